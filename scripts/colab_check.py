"""A reader's Colab, simulated on this machine: the package as a wheel in a fresh virtual
environment, the committed ``.ipynb`` twins executed with papermill in an empty folder, and
committed results reached only by the download step (pointed at this checkout's ``results/``
through ``ICL_BOOK_RESULTS_URL=file://...``, as Colab reaches the repository's raw files).

For each notebook it counts the figures (``image/png`` outputs) and compares them with the
book's own execution in ``_build/executed`` (run ``make book`` first); it fails when a twin
draws fewer, says a committed result is missing that the book found, or raises.

    python scripts/colab_check.py [--jobs 2] [--only book/chen/experiments]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from book import EXECUTED, KERNEL_ENV, ipynb_twin, notebooks, rel  # noqa: E402

# what Colab has or the install cell brings: the package's runtime dependencies and papermill
RUNTIME = ("torch", "numpy", "matplotlib", "ipywidgets", "tqdm", "papermill", "ipykernel")


def pins() -> list[str]:
    """The tested versions of RUNTIME, from requirements.txt."""
    lines = [l.strip() for l in (ROOT / "requirements.txt").read_text().splitlines()]
    return [l for l in lines if l.split("==")[0] in RUNTIME]


MISSING = re.compile(r"No result (\S+) here|Not committed|No trained models|No paper-scale piece")


def figures(nb_path: Path) -> tuple[int, set[str]]:
    """(number of image/png outputs, what its outputs say is missing: a result's name, or the
    message)."""
    nb = json.loads(nb_path.read_text())
    n, missing = 0, set()
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            n += "image/png" in data
            text = "".join(out.get("text", "")) + "".join(data.get("text/plain", ""))
            for m in MISSING.finditer(text):
                missing.add(m.group(1) or m.group(0))
    return n, missing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", nargs="*", help="notebooks, e.g. book/chen/experiments")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args(argv)
    srcs = [s for s in notebooks() if not args.only or rel(s) in args.only]
    missing_book = [rel(s) for s in srcs if not (EXECUTED / f"{rel(s)}.ipynb").exists()]
    if missing_book:
        raise SystemExit(f"no book execution to compare with for {missing_book}: run `make book` first")
    tmp = Path(tempfile.mkdtemp(prefix="colab-sim-"))
    t0 = time.perf_counter()
    try:
        py = sys.executable
        subprocess.run([py, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                        str(tmp / "wheel"), str(ROOT)], check=True)
        wheel = next((tmp / "wheel").glob("icl_core-*.whl"))
        subprocess.run([py, "-m", "venv", str(tmp / "venv")], check=True)
        vpy = str(tmp / "venv" / "bin" / "python")
        subprocess.run(f"{vpy} -m pip install -q {wheel} {' '.join(pins())} 2>&1 | "
                       "grep -v 'is neither a file nor a directory' || true", shell=True, check=True)
        check = subprocess.run([vpy, "-c", "import icl_core, pathlib; print(pathlib.Path(icl_core.__file__).parent)"],
                               capture_output=True, text=True, cwd=tmp, check=True).stdout.strip()
        print(f"wheel {wheel.name} installed in a fresh environment ({check}); "
              f"{time.perf_counter() - t0:.0f} s")
        work = tmp / "colab"
        work.mkdir()
        env = {**os.environ, **KERNEL_ENV, "ICL_BOOK_RESULTS_URL": (ROOT / "results").as_uri(),
               "ICL_BOOK_CACHE": str(tmp / "cache"), "PYTHONPATH": ""}
        env.pop("ICL_BOOK_RESULTS", None)
        env.pop("ICL_BOOK_STATIC_PLAYER", None)           # a reader's kernel: no build-time player

        def run(src: Path):
            name = rel(src).replace("/", "__")
            shutil.copy(ipynb_twin(src), work / f"{name}.ipynb")
            t = time.perf_counter()
            proc = subprocess.run([vpy, "-m", "papermill", "-k", "python3", "--cwd", str(work),
                                   "-p", "scale", "ci", "-p", "records_path", str(tmp / f"{name}.json"),
                                   str(work / f"{name}.ipynb"), str(work / f"{name}.out.ipynb")],
                                  env=env, capture_output=True, text=True, cwd=work)
            return src, proc, time.perf_counter() - t, work / f"{name}.out.ipynb"

        failed = []
        print(f"{'notebook':32s} {'colab figures':>13s} {'book figures':>12s} {'seconds':>8s}")
        with ThreadPoolExecutor(args.jobs) as pool:
            for src, proc, secs, out in pool.map(run, srcs):
                book_n, book_missing = figures(EXECUTED / f"{rel(src)}.ipynb")
                n, missing = figures(out) if out.exists() else (0, set())
                missing -= book_missing            # what the book lacks too is not committed anywhere
                ok = proc.returncode == 0 and n >= book_n and not missing
                print(f"{rel(src):32s} {n:13d} {book_n:12d} {secs:8.0f}  {'ok' if ok else 'FAILED'}")
                if proc.returncode:
                    print("   " + proc.stderr.strip().splitlines()[-1][:300] if proc.stderr.strip() else "")
                for m in sorted(missing):
                    print(f"   missing here but not in the book: {m}")
                if not ok:
                    failed.append(rel(src))
        print(f"simulated Colab: {len(srcs) - len(failed)}/{len(srcs)} notebooks draw every figure the book draws "
              f"({time.perf_counter() - t0:.0f} s in all)")
        return 1 if failed else 0
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
