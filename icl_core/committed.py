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

import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from .results import Result

REPOSITORY = "https://github.com/icl-book/icl-book"      # = _config.yml's repository url (tested)
FILES = ("result.json", "arrays.npz")
INDEX = "index.json"        # {recipe: [folder, ...]} of the committed results (tested in sync)


def installed_from() -> tuple[str, str | None]:
    """``(repository url, commit)`` the package was installed from: what pip recorded for a
    ``git+URL@REF`` install (the Colab install cell), else ``(REPOSITORY, None)``."""
    try:
        from importlib.metadata import distribution
        info = json.loads(distribution("icl_core").read_text("direct_url.json") or "null")
    except Exception:          # not installed as a distribution (a checkout on sys.path)
        info = None
    if info and "vcs_info" in info:
        return info["url"].removesuffix(".git"), info["vcs_info"].get("commit_id")
    return REPOSITORY, None


def results_url() -> str:
    """Where the published results are downloaded from: ``$ICL_BOOK_RESULTS_URL``, else the
    ``results/`` of the commit the package was installed from (``main`` when unknown)."""
    env = os.environ.get("ICL_BOOK_RESULTS_URL")
    if env:
        return env.rstrip("/")
    url, commit = installed_from()
    raw = url.replace("https://github.com/", "https://raw.githubusercontent.com/")
    return f"{raw}/{commit or 'main'}/results"


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


def _download(recipe: str, folder: str, files=FILES) -> Path | None:
    """Fetch ``files`` of ``recipe/folder`` into the cache (once)."""
    target = cache_root() / recipe / folder
    if all((target / f).exists() for f in files):
        return target
    base = results_url()
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=_ensure(cache_root())))
    try:
        if target.is_dir():                  # keep what an earlier download of other files left
            shutil.copytree(target, tmp, dirs_exist_ok=True)
        for f in files:
            if (tmp / f).exists():
                continue
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


def find(recipe: str, folder: str, download: bool | None = None, files=FILES) -> Path | None:
    """The folder of the committed result ``recipe/folder`` (e.g. ``"collins.figure1",
    "paper"``) by the lookup order above, or None when no root has it.

    ``download``: None (default) downloads only when the package is not in a checkout; False
    never; True always tries. ``files``: what the folder must hold (a Result's two files; a
    long run's ``("state.pt", "progress.json")``)."""
    for root in roots():
        if (root / recipe / folder / files[0]).exists():
            return root / recipe / folder
    cached = cache_root() / recipe / folder
    if all((cached / f).exists() for f in files):
        return cached
    if download is None:
        download = checkout_root() is None
    return _download(recipe, folder, tuple(files)) if download else None


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
            f"{'' if checkout_root() else ' and ' + results_url()}). To make it ({minutes}):\n"
            f"    {command}\nwhich writes {write_root() / recipe / folder}/, where this page looks first.")


def local_index(root: Path) -> dict[str, list[str]]:
    """``{recipe: [folder, ...]}`` of the results saved under ``root`` (a Result's
    ``result.json`` or a long run's ``state.pt`` present)."""
    out: dict[str, list[str]] = {}
    for folder in sorted(p.parent for p in Path(root).glob("*/*/*") if p.name in ("result.json", "state.pt")):
        names = out.setdefault(folder.parent.name, [])
        if folder.name not in names:
            names.append(folder.name)
    return out


def write_index(root: Path) -> Path:
    """Write ``root/index.json`` (what a reader without the checkout can list and download)."""
    path = Path(root) / INDEX
    path.write_text(json.dumps(local_index(root), indent=1) + "\n")
    return path


def published_index(download: bool | None = None) -> dict[str, list[str]]:
    """The published ``index.json`` (cached beside the downloads); {} when it cannot be had."""
    cached = cache_root() / INDEX
    if not cached.exists():
        if download is None:
            download = checkout_root() is None
        if not download:
            return {}
        try:
            with urllib.request.urlopen(f"{results_url()}/{INDEX}", timeout=30) as src:
                _ensure(cache_root())
                cached.write_bytes(src.read())
        except (urllib.error.URLError, OSError, ValueError):
            return {}
    try:
        return json.loads(cached.read_text())
    except ValueError:
        return {}


def folders(recipe: str, download: bool | None = None) -> list[str]:
    """The folders of ``recipe`` a reader can load: every local root's, and (outside a
    checkout) the published index's."""
    names = set()
    for root in roots():
        names.update(local_index(root).get(recipe, []) if root.is_dir() else [])
    names.update(published_index(download).get(recipe, []))
    return sorted(names)
