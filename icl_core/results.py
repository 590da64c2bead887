"""``Result``: what a recipe hands back and what lands in ``results/``.

On disk a result is a folder with ``result.json`` (name, scale, config, scalar metrics,
provenance) and ``arrays.npz`` (curves, histories). Both files are written atomically
(temporary file, then ``os.replace``), so an interrupted save never leaves half a result.

Provenance records the command, git sha, package versions, device, wall time and seeds.
"""
from __future__ import annotations

import io
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def _atomic_write_bytes(path: Path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def replace_folder(new: Path, folder: Path):
    """Put the complete folder ``new`` in place of ``folder``: the old one is moved aside
    first and removed last, so ``folder`` is never half-written (``new`` may be on another
    disk, e.g. a temporary folder)."""
    folder = Path(folder)
    old = folder.with_name(folder.name + ".replaced")
    if old.exists():
        shutil.rmtree(old)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists():
        os.replace(folder, old)
    shutil.move(str(new), str(folder))      # a rename, or a copy when new is on another disk
    if old.exists():
        shutil.rmtree(old)


def git_sha(cwd: str | Path | None = None) -> str:
    """The current commit (with ``-dirty`` when the tree has changes), or ``"unknown"``."""
    cwd = cwd or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                             text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("-dirty" if dirty else "")) if sha else "unknown"


def provenance(device: str, wall_time_s: float, seeds, command: str | None = None,
               sha: str | None = None) -> dict:
    """The provenance block stored with every result (``sha``: the commit the run started
    from, taken before a long run so later commits do not relabel it)."""
    import torch

    from . import __version__
    return {
        "command": command if command is not None else " ".join(sys.argv),
        "git_sha": sha if sha is not None else git_sha(),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": np.__version__, "icl_core": __version__},
        "device": device,
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "wall_time_s": round(float(wall_time_s), 3),
        "seeds": seeds,
    }


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass
class Result:
    """A recipe's output. ``metrics``: JSON-able numbers; ``arrays``: name -> ndarray."""

    name: str
    scale: str
    config: dict
    metrics: dict
    arrays: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)

    def save(self, folder: str | Path) -> Path:
        """Write ``result.json`` and ``arrays.npz`` into ``folder`` as one unit: both go to a
        temporary folder beside it, which then replaces ``folder`` (an interrupted save leaves
        the previous result whole, never a mixed pair)."""
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"out must be a folder, but {folder} is a file")
        meta = {"name": self.name, "scale": self.scale, "config": _jsonable(self.config),
                "metrics": _jsonable(self.metrics), "provenance": _jsonable(self.provenance),
                "arrays": sorted(self.arrays)}
        buf = io.BytesIO()
        np.savez_compressed(buf, **{k: np.asarray(v) for k, v in self.arrays.items()})
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(folder.name + ".saving")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir()
        _atomic_write_bytes(tmp / "arrays.npz", buf.getvalue())
        _atomic_write_bytes(tmp / "result.json", (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode())
        if folder.exists():
            for extra in folder.iterdir():          # keep anything else the folder held (notes)
                if extra.name not in ("result.json", "arrays.npz"):
                    shutil.move(str(extra), str(tmp / extra.name))
        replace_folder(tmp, folder)
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "Result":
        """Read a result written by :meth:`save`; a missing or damaged file raises an error
        naming it."""
        folder = Path(folder)
        if not (folder / "result.json").exists():
            raise FileNotFoundError(f"no result.json in {folder}")
        try:
            meta = json.loads((folder / "result.json").read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{folder / 'result.json'} is damaged ({err})") from None
        arrays = {}
        if meta.get("arrays"):
            path = folder / "arrays.npz"
            if not path.exists():
                raise ValueError(f"{path} is missing but result.json lists {len(meta['arrays'])} arrays")
            try:
                with np.load(path) as z:
                    arrays = {k: z[k] for k in z.files}
            except Exception as err:
                raise ValueError(f"{path} is damaged ({type(err).__name__}: {err})") from None
            missing = sorted(set(meta["arrays"]) - set(arrays))
            if missing:
                raise ValueError(f"{path} lacks arrays listed in result.json: {missing[:5]}")
        return cls(meta["name"], meta["scale"], meta["config"], meta["metrics"], arrays,
                   meta["provenance"])
