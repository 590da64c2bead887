"""Where committed results are found: one rule for every notebook and for the CLI.

A result lives in ``<root>/<recipe>/<folder>/`` (``result.json`` + ``arrays.npz``, see
:class:`~icl_core.results.Result`). The roots are searched in this order:

1. ``$ICL_BOOK_RESULTS``, when set (a folder);
2. ``./results`` in the working directory (where ``python -m icl_core run`` writes);
3. the ``results/`` of the checkout the package was imported from (a clone of the book);
4. a download cache, ``~/.cache/icl-book/results`` (``$ICL_BOOK_CACHE`` overrides it), filled on
   demand from the repository's files (``$ICL_BOOK_RESULTS_URL`` overrides the address, e.g. a
   ``file://`` copy). Only a package installed **outside** a checkout downloads (Colab, a pip
   install): inside one, what is not committed is simply absent, and nothing is fetched.

The CLI writes to the first of 1 and 2, so a run's result is found by the next lookup.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from .results import Result

REPOSITORY = "https://github.com/icl-book/icl-book"
RAW_RESULTS = "https://raw.githubusercontent.com/icl-book/icl-book/main/results"
FILES = ("result.json", "arrays.npz")


def checkout_root() -> Path | None:
    """The ``results/`` of the checkout the package was imported from, or None (installed)."""
    here = Path(__file__).resolve().parent.parent
    return here / "results" if (here / ".git").exists() or (here / "results").is_dir() else None


def cache_root() -> Path:
    return Path(os.environ.get("ICL_BOOK_CACHE", Path.home() / ".cache" / "icl-book")) / "results"


def write_root() -> Path:
    """Where the CLI writes results: ``$ICL_BOOK_RESULTS``, else ``./results``."""
    env = os.environ.get("ICL_BOOK_RESULTS")
    return Path(env) if env else Path.cwd() / "results"


def roots() -> list[Path]:
    """The local roots in lookup order (existing or not), without the download cache."""
    out = [Path(p) for p in [os.environ.get("ICL_BOOK_RESULTS")] if p] + [Path.cwd() / "results"]
    repo = checkout_root()
    if repo is not None:
        out.append(repo)
    return out


def _download(recipe: str, folder: str) -> Path | None:
    """Fetch ``result.json`` and ``arrays.npz`` of ``recipe/folder`` into the cache (once)."""
    target = cache_root() / recipe / folder
    if all((target / f).exists() for f in FILES):
        return target
    base = os.environ.get("ICL_BOOK_RESULTS_URL", RAW_RESULTS).rstrip("/")
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=_ensure(cache_root())))
    try:
        for f in FILES:
            with urllib.request.urlopen(f"{base}/{recipe}/{folder}/{f}", timeout=30) as src:
                (tmp / f).write_bytes(src.read())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        return target
    except (urllib.error.URLError, OSError, ValueError):
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def find(recipe: str, folder: str, download: bool | None = None) -> Path | None:
    """The folder of the committed result ``recipe/folder`` (e.g. ``"collins.figure1",
    "paper"``) by the lookup order above, or None when no root has it.

    ``download``: None (default) downloads only when the package is not in a checkout; False
    never; True always tries."""
    for root in roots():
        if (root / recipe / folder / "result.json").exists():
            return root / recipe / folder
    cached = cache_root() / recipe / folder
    if all((cached / f).exists() for f in FILES):
        return cached
    if download is None:
        download = checkout_root() is None
    return _download(recipe, folder) if download else None


def load(recipe: str, folder: str, download: bool | None = None) -> Result | None:
    """:func:`find`, then :meth:`Result.load`; None when the result is not found."""
    path = find(recipe, folder, download)
    return Result.load(path) if path is not None else None


def root_of(recipe: str) -> Path:
    """The first local root holding any folder of ``recipe`` (for readers of whole recipe
    folders, such as the trained models of ``chen.train``); the checkout's otherwise."""
    for root in roots():
        if (root / recipe).is_dir():
            return root
    return checkout_root() or write_root()


def missing(recipe: str, folder: str, command: str, minutes: str) -> str:
    """What a page prints for a result it lacks: what is missing here, and how to get it."""
    where = ", ".join(str(r) for r in roots())
    return (f"No result {recipe}/{folder} here (looked in {where}"
            f"{'' if checkout_root() else ' and ' + RAW_RESULTS}). To make it ({minutes}):\n"
            f"    {command}\nwhich writes {write_root() / recipe / folder}/, where this page looks first.")
