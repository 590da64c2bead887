"""The book pipeline: one execution path from Jupytext sources to HTML.

    python scripts/book.py execute [--force] [--scale ci]   papermill, in parallel, skipping fresh runs
    python scripts/book.py build                            execute + seed jupyter-cache + jupyter-book -W
    python scripts/book.py sync | check-sync                the committed .ipynb twins (Colab buttons)
    python scripts/book.py sync --ref SHA                   the twins with the install cell pinned to SHA
                                                            (the Pages workflow, for the "colab" branch)
    python scripts/book.py list                             the notebooks, from _toc.yml
    python scripts/book.py report                           regenerate book/reproduction.md

Each notebook (a MyST markdown file with a Jupytext header) runs once under papermill with
``records_path`` injected; the executed copy goes to ``_build/executed/<path>.ipynb`` and its
recorded numbers to ``_build/records/<path>.json``. A run is *fresh* while the notebook, the
``icl_core`` sources and the committed ``results/`` are unchanged (their hash is stored
beside it), so ``make test`` and ``make book`` share one execution. Jupyter Book then renders
the executed outputs from its jupyter-cache, with its own execution never triggered.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
EXECUTED = BUILD / "executed"
RECORDS = BUILD / "records"
CELL_TIMEOUT_S = 1200

# One torch/BLAS thread per kernel: on 2 cores the default threading spins (toolchain.md §4).
KERNEL_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "ICL_CORE_PROGRESS": "0", "ICL_BOOK_STATIC_PLAYER": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def toc_documents() -> list[str]:
    """Every document in _toc.yml, as paths relative to the root without suffix."""
    import yaml
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    docs = [toc["root"]]

    def walk(node):
        for key in ("chapters", "sections", "parts"):
            for child in node.get(key, []) or []:
                if "file" in child:
                    docs.append(child["file"])
                walk(child)
    walk(toc)
    return docs


def notebooks() -> list[Path]:
    """The executable documents (MyST notebooks with a kernelspec) in _toc.yml order."""
    out = []
    for doc in toc_documents():
        src = ROOT / f"{doc}.md"
        text = src.read_text() if src.exists() else ""
        front = text.split("---", 2)[1] if text.startswith("---") else ""
        if "kernelspec:" in front:
            out.append(src)
    return out


def rel(src: Path) -> str:
    return src.relative_to(ROOT).with_suffix("").as_posix()


def executed_path(src: Path) -> Path:
    return EXECUTED / f"{rel(src)}.ipynb"


def records_path(src: Path) -> Path:
    return RECORDS / f"{rel(src)}.json"


def source_key(src: Path, scale: str) -> str:
    """Hash of everything a notebook's outputs depend on (the notebook, the pinned package
    versions, the ``icl_core`` sources, the committed results)."""
    h = hashlib.sha256(f"scale={scale}\n".encode())
    files = [src, ROOT / "requirements.txt", *sorted((ROOT / "icl_core").rglob("*.py")),
             *sorted((ROOT / "results").rglob("*.json")), *sorted((ROOT / "results").rglob("*.npz"))]
    for f in files:
        h.update((f.relative_to(ROOT) if f.is_relative_to(ROOT) else Path(f.name)).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _stamp(src: Path) -> Path:
    return executed_path(src).with_suffix(".stamp.json")


def is_fresh(src: Path, scale: str = "ci") -> bool:
    stamp = _stamp(src)
    return (executed_path(src).exists() and records_path(src).exists() and stamp.exists()
            and json.loads(stamp.read_text())["key"] == source_key(src, scale))


def last_run_seconds(src: Path) -> float | None:
    """Wall time of the execution a fresh notebook reuses."""
    stamp = _stamp(src)
    return json.loads(stamp.read_text())["seconds"] if stamp.exists() else None


SECONDS_HINT = Path(__file__).with_name("notebook_seconds.json")


def expected_seconds(src: Path) -> float:
    """How long ``src`` is expected to run: its last run here, else the committed measurement
    in ``scripts/notebook_seconds.json`` (only the order of execution depends on it)."""
    last = last_run_seconds(src)
    if last is not None:
        return last
    hint = json.loads(SECONDS_HINT.read_text()) if SECONDS_HINT.exists() else {}
    return float(hint.get("seconds", {}).get(rel(src), 0.0))


def execute_one(src: Path, scale: str) -> tuple[Path, float, str | None]:
    import jupytext
    import papermill as pm
    out, recs = executed_path(src), records_path(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    # the old stamp goes first: a run that fails or is killed leaves nothing that looks fresh
    _stamp(src).unlink(missing_ok=True)
    recs.unlink(missing_ok=True)
    key = source_key(src, scale)      # what this run executes: a change during it makes it stale
    partial = out.with_name(out.stem + ".partial.ipynb")
    partial.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        # The kernel starts in the notebook's folder through nbclient's resources, not
        # papermill's ``cwd``: that one chdirs this whole process, and runs in parallel
        # threads would race and leave it in some notebook's folder.
        pm.execute_notebook(jupytext.read(src), str(partial), kernel_name="python3",
                            parameters={"scale": scale, "records_path": str(recs)},
                            resources={"metadata": {"path": str(src.parent)}},
                            progress_bar=False, execution_timeout=CELL_TIMEOUT_S,
                            log_output=False)
    except Exception as err:  # papermill raises PapermillExecutionError with the cell's traceback
        return src, time.perf_counter() - t0, f"{type(err).__name__}: {err}"
    os.replace(partial, out)          # the executed copy only replaces the old one when complete
    seconds = time.perf_counter() - t0
    _stamp(src).write_text(json.dumps({"key": key, "scale": scale,
                                       "seconds": round(seconds, 1)}))
    return src, seconds, None


def execute(force: bool = False, scale: str = "ci", jobs: int | None = None,
            only: list[str] | None = None) -> dict:
    """Execute the stale notebooks in parallel; return ``{rel path: timing text}``."""
    os.environ.update(KERNEL_ENV)
    todo = [s for s in notebooks() if not only or rel(s) in only]
    stale = [s for s in todo if force or not is_fresh(s, scale)]
    timings = {rel(s): f"{last_run_seconds(s)} s (reused: sources unchanged since that run)"
               for s in todo if s not in stale}
    jobs = jobs or os.cpu_count() or 1
    failures = []
    stale.sort(key=expected_seconds, reverse=True)   # longest first: the shortest makespan on few cores
    if stale:
        print(f"executing {len(stale)} notebook(s) at scale={scale!r}, {jobs} at a time ...",
              flush=True)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for src, seconds, error in pool.map(lambda s: execute_one(s, scale), stale):
                timings[rel(src)] = f"{seconds:.1f} s"
                print(f"  {rel(src):40s} {seconds:7.1f} s  {'FAILED' if error else 'ok'}", flush=True)
                if error:
                    failures.append(f"{rel(src)}: {error}")
    (BUILD / "timings.json").write_text(json.dumps(timings, indent=1))
    if failures:
        raise SystemExit("notebook execution failed:\n" + "\n\n".join(failures))
    return timings


def merged_notebook(src: Path):
    """The source notebook with the executed outputs copied in (what jupyter-cache stores).

    The injected-parameters cell papermill added is dropped, so the page shows the
    notebook's own defaults and the cell hashes match the source's."""
    import jupytext
    import nbformat
    nb = jupytext.read(src)
    done = nbformat.read(executed_path(src), as_version=4)
    ran = [c for c in done.cells if c.cell_type == "code"
           and "injected-parameters" not in c.metadata.get("tags", [])]
    mine = [c for c in nb.cells if c.cell_type == "code"]
    if len(ran) != len(mine):
        raise SystemExit(f"{rel(src)}: executed copy has {len(ran)} code cells, source {len(mine)}; "
                         "rerun `python scripts/book.py execute --force`")
    for cell, out in zip(mine, ran):
        cell.outputs, cell.execution_count = out.outputs, out.execution_count
    # the widget state is left out: the HTML shows each explorer's static player (text/html),
    # and without a state no widget manager is loaded from a CDN to draw dead sliders
    for key in ("language_info",):
        if key in done.metadata:
            nb.metadata[key] = done.metadata[key]
    return nb


def seed_cache():
    """Store every executed notebook in Jupyter Book's jupyter-cache."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    cache = get_cache(BUILD / ".jupyter_cache")
    for src in notebooks():
        if not is_fresh(src):
            raise SystemExit(f"{rel(src)} has no fresh execution; run `python scripts/book.py execute`")
        cache.cache_notebook_bundle(CacheBundleIn(merged_notebook(src), uri=str(src)),
                                    check_validity=False, overwrite=True)


REPORT = ROOT / "book" / "reproduction.md"


def _cell(text, markup: bool = False) -> str:
    """One Markdown table cell: pipes escaped, no line breaks, ``*`` escaped unless ``markup``."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if markup else text.replace("*", "\\*")


def collect_claims() -> list[tuple[str, str, dict]]:
    """``(notebook, claim id, row)`` for every declared claim (``icl_core.claims``): the row its
    notebook computed when it ran, or a *not run* row when no executed notebook recorded it."""
    from icl_core.claims import all_claims, evaluate   # here, not at start-up: they import torch
    from icl_core.records import Records

    recorded = {}
    for src in notebooks():
        path = records_path(src)
        if path.exists():
            nb = rel(src).removeprefix("book/").removesuffix(".md")
            for cid, row in Records.read_claims(path).items():
                recorded[cid] = (nb, row)
    out = []
    for cid, claim in sorted(all_claims().items()):
        if cid in recorded:
            nb, row = recorded[cid]
        else:
            nb, row = claim.notebook, evaluate(claim, {}, "-")
            row["gate"] = "its notebook has not been executed"
        out.append((nb, cid, row))
    return out


def write_report(out: Path = REPORT) -> Path:
    """Generate the reproduction report (``book/reproduction.md``, not committed) from the
    claims declared in ``icl_core`` and the verdicts their notebooks computed when they ran.
    Never edited by hand: ``make book`` rewrites it on every build."""
    from icl_core.claims import VERDICTS as verdicts
    from icl_core.claims import scale_label

    claims = collect_claims()
    papers = sorted({c["paper"] for _, _, c in claims})
    lines = ["# Reproduction report", "",
             "Generated by the book build; never written by hand. Every claim is declared once in "
             "`icl_core` beside the recipe that measures it, with the paper's words, a test and an "
             "*adequacy gate* (can this run decide the claim at all: has training converged, has the "
             "model left the plateau the claim presupposes, is the sampling error small enough). "
             "The verdict is computed: *inconclusive* when the gate fails (its reason is shown), "
             "*differs* when the gate passes and the test fails, *reproduced in a modified setting* "
             "when a named change of setting applies at that scale, *reproduced at reduced scale* "
             "when only the budget is smaller, *reproduced* in the paper's setting; *not run* when "
             "a value is missing. The live runs use `scale = \"ci\"`; rows from committed results "
             "name their scale and device.", "",
             "## Summary", "", "| paper | " + " | ".join(verdicts) + " | claims |",
             "|---|" + "---|" * (len(verdicts) + 1)]
    for paper in papers:
        mine = [c for _, _, c in claims if c["paper"] == paper]
        lines.append(f"| {_cell(paper)} | " + " | ".join(str(sum(c["verdict"] == v for c in mine))
                                                     for v in verdicts) + f" | {len(mine)} |")
    lines.append("| all | " + " | ".join(str(sum(c["verdict"] == v for _, _, c in claims))
                                          for v in verdicts) + f" | {len(claims)} |")
    for paper in papers:
        lines += ["", f"## {paper}", "",
                  "| claim | the paper says | we measured | setting changed / budget | can this run decide it? | verdict |",
                  "|---|---|---|---|---|---|"]
        for nb, cid, c in claims:
            if c["paper"] != paper:
                continue
            where = f"{c['where']} (`{cid}`, {nb})"
            changes = "; ".join(x for x in (c.get("deviation") and f"setting: {c['deviation']}",
                                            c.get("budget") and f"budget: {c['budget']}") if x) or "-"
            scale = scale_label(c)
            lines.append("| " + " | ".join(_cell(v) for v in (where, f"\"{c['quote']}\"", c["measured"], changes,
                                                                c["gate"]))
                         + f" | **{_cell(c['verdict'])}** ({_cell(scale)}) |")
    lines += ["", "## Committed results", "",
              "| result | scale | device | wall time | commit | command |", "|---|---|---|---|---|---|"]
    committed = sorted((ROOT / "results").glob("*/*/result.json"))
    for path in committed:
        meta = json.loads(path.read_text())
        pv = meta.get("provenance", {})
        lines.append("| " + " | ".join(_cell(v) for v in (
            path.parent.relative_to(ROOT / "results").as_posix(), meta.get("scale", ""), pv.get("device", ""),
            f"{pv.get('wall_time_s', 0) / 60:.1f} min", str(pv.get("git_sha", ""))[:10],
            f"`{pv.get('command', '')}`")) + " |")
    if not committed:
        lines.append("| (none yet) | | | | | |")
    lines += ["", "## How each page was executed", "",
              "Each page ran once under papermill at the scale shown (the pages show its outputs); the executed "
              "notebooks, outputs included, can be downloaded here.", "",
              "| page | scale | wall time | executed notebook |", "|---|---|---|---|"]
    for src in notebooks():
        stamp = _stamp(src)
        meta = json.loads(stamp.read_text()) if stamp.exists() else {}
        link = (f"{{download}}`{rel(src)}.ipynb <{os.path.relpath(executed_path(src), out.parent)}>`"
                if executed_path(src).exists() else "not executed")
        lines.append(f"| {rel(src)} | {meta.get('scale', '-')} | "
                     f"{meta['seconds']:.0f} s | {link} |" if meta else f"| {rel(src)} | - | - | {link} |")
    out.write_text("\n".join(lines) + "\n")
    return out


def build() -> int:
    t0 = time.perf_counter()
    timings = execute()
    t_exec = time.perf_counter() - t0
    write_report()
    seed_cache()
    t1 = time.perf_counter()
    env = {**os.environ, **KERNEL_ENV}
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(ROOT), "--all", "-W", "-n", "--keep-going"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    (BUILD / "jupyter-book.log").write_text(log)
    t_build = time.perf_counter() - t1
    if proc.returncode != 0:
        print(log[-6000:])
        print("jupyter-book build FAILED (full log: _build/jupyter-book.log)")
        return proc.returncode
    if "Executing notebook" in log:
        print(log[-3000:])
        print("jupyter-book executed a notebook itself: the cache seeding missed it")
        return 1
    print(f"\n{len(timings)} notebooks executed at scale='ci' (papermill, one torch thread each):")
    for name, seconds in timings.items():
        print(f"  {name:40s} {seconds}")
    print(f"execution {t_exec:.1f} s, html build {t_build:.1f} s")
    print(f"open the book: {BUILD / 'html' / 'index.html'}")
    return 0


def ipynb_twin(src: Path) -> Path:
    return src.with_suffix(".ipynb")


INSTALL_MARK = "# Installs icl_core when it is missing (Colab); does nothing when it is installed."


def repository_url() -> str:
    """The repository's address, from ``_config.yml`` (``repository: url:``): the one place the
    launch buttons, the install cells and the Pages workflow read it from."""
    for line in (ROOT / "_config.yml").read_text().splitlines():
        if line.strip().startswith("url:") and "github.com" in line:
            return line.split("url:", 1)[1].strip()
    raise SystemExit("_config.yml has no repository url (repository: url: https://github.com/...)")


def install_cell(ref: str = "main") -> str:
    """The first code cell of every notebook: installs ``icl_core`` at ``ref`` (a commit on the
    "colab" branch's pinned twins; ``main`` in the repository itself) when it is missing."""
    return (f"{INSTALL_MARK}\ntry:\n    import icl_core\nexcept ImportError:\n"
            f'    %pip install -q "icl_core @ git+{repository_url()}@{ref}"\n    import icl_core')


def with_install_cell(text: str, ref: str, where: str) -> str:
    """A MyST source's text with its one install cell set to :func:`install_cell` at ``ref``: the
    one way both the sources and their .ipynb twins get theirs."""
    if text.count(INSTALL_MARK) != 1:
        raise SystemExit(f"{where}: expected one install cell starting with {INSTALL_MARK!r}, "
                         f"found {text.count(INSTALL_MARK)}")
    start = text.find(INSTALL_MARK)
    end = text.find("\n```", start)
    if end < 0:
        raise SystemExit(f"{where}: the install cell starting with {INSTALL_MARK!r} is not closed")
    return text[:start] + install_cell(ref) + text[end:]


def colab_notebook(src: Path, ref: str = "main"):
    """The .ipynb committed beside each source so the Colab button opens a notebook; its
    install cell installs ``icl_core`` at ``ref``."""
    import jupytext
    nb = jupytext.reads(with_install_cell(src.read_text(), ref, rel(src)), fmt="md:myst")
    nb.metadata.pop("jupytext", None)
    nb.metadata["colab"] = {"provenance": []}
    for i, cell in enumerate(nb.cells):      # stable ids, so regenerating changes nothing
        cell.id = f"cell-{i}"
    return nb


def sync(check: bool = False, ref: str = "main") -> int:
    """Write (or with ``check``, compare) each source's install cell (from ``_config.yml``'s
    url) and its .ipynb twin; ``ref`` pins the twins' install cell to a commit."""
    import jupytext
    bad = []
    for src in notebooks():
        source_text = src.read_text()
        fixed = with_install_cell(source_text, "main", rel(src))
        if fixed != source_text:
            if check:
                bad.append(rel(src) + " (its install cell differs from _config.yml's repository)")
            else:
                src.write_text(fixed)
        text = jupytext.writes(colab_notebook(src, ref), fmt="ipynb")
        twin = ipynb_twin(src)
        if check:
            if not twin.exists() or twin.read_text() != text:
                bad.append(str(twin.relative_to(ROOT)))
        else:
            twin.write_text(text)
    if bad:
        print("out of sync with their .md sources (run `make sync`):\n  " + "\n  ".join(bad))
        return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["execute", "build", "sync", "check-sync", "list", "seed-cache",
                                    "report"])
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--scale", default="ci",
                    help="ci (default), paper, or any extra scale a recipe declares (e.g. mid)")
    ap.add_argument("--only", nargs="*", help="notebooks to execute, e.g. book/foundations/theory")
    ap.add_argument("--ref", default="main", help="sync: the commit the twins' install cell installs")
    args = ap.parse_args(argv)
    if args.cmd == "execute":
        sys.path.insert(0, str(ROOT))
        from icl_core.recipes import all_scales
        if args.scale not in all_scales():
            raise SystemExit(f"--scale must be one of {all_scales()} (the scales the recipes declare), "
                             f"got {args.scale!r}")
        execute(args.force, args.scale, only=args.only)
        return 0
    if args.cmd == "build":
        return build()
    if args.cmd == "seed-cache":
        seed_cache()
        return 0
    if args.cmd == "report":
        print(write_report())
        return 0
    if args.cmd in ("sync", "check-sync"):
        return sync(check=args.cmd == "check-sync", ref=args.ref)
    for src in notebooks():
        print(rel(src), "fresh" if is_fresh(src) else "stale")
    return 0


if __name__ == "__main__":
    sys.exit(main())
