"""Long training runs done in pieces: continue from the last committed checkpoint for a
wall-clock budget, write the next one, stop cleanly.

A paper-scale run (Chen et al.: width 256, 320,000 steps) does not fit one session of any
machine this project is lent, so it is trained in pieces, each continuing from the checkpoint
the previous piece committed under ``results/``::

    python -m icl_core continue chen.train.paper-h4-L4 --minutes 8 --device cuda

A :class:`LongRun` names what is trained (models, samplers, the :func:`~icl_core.training.train`
settings, the total steps) and how a piece is scored; :func:`continue_run` resumes, trains for
the budget (``train(..., max_seconds=...)``), evaluates, and replaces the run's folder in one
step (a temporary folder renamed into place), so a piece killed half-way leaves the previous
state intact.

**The compact checkpoint.** A committed checkpoint must be small (it travels with the working
tree and is returned from a device in files of at most 16 MiB). Per run ``k`` the folder holds
``run<k>.params.pt`` (every parameter, float32: exact) and ``run<k>.adam.pt`` (Adam's second
moment in bfloat16), plus ``state.pt`` (step, random streams, losses, fingerprint, optimizer
settings) and ``progress.json`` (one entry per piece: steps, device, wall time, git sha,
evaluation). Adam's first moment is not stored: with beta1 = 0.9 it forgets its past within
about ten steps, and it restarts from zero at each piece. So a piece resumed from a compact
checkpoint is close to, not bit-for-bit equal to, an uninterrupted run (within a piece,
training is as :func:`train` always does it; on a GPU it is not bit-reproducible anyway).
The fingerprint of :func:`train` is kept: a piece with other settings is refused.

**The evaluation travels with the state.** Each piece ends with the run's ``evaluate`` on the
models it commits, recorded in its ``progress.json`` entry; when that evaluation is extended
later, :func:`evaluate_committed` (``python -m icl_core continue <run> --evaluate-only``) scores
the committed state again without training and adds what the newest entry lacks.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .devices import device_name, pick_device
from .results import git_sha, provenance, replace_folder
from .checkpoints import load_checkpoint
from .ensembles import run_mode
from .training import train

FORMAT = 1


@dataclass
class LongRun:
    """A named long run.

    ``build(cfg) -> (models, samplers, train_kwargs)``: the K models (freshly initialised),
    their K samplers and the keyword arguments of :func:`train` other than the models,
    samplers, ``steps``, checkpointing, ``device`` and ``max_seconds``.
    ``evaluate(models, cfg) -> dict``: JSON-able metrics of the current models (on CPU).
    ``run_names``: one name per model (e.g. ``"h4_L4_s0.1"``)."""

    name: str
    config: dict
    build: callable
    evaluate: callable
    run_names: callable            # cfg -> list[str]
    description: str = ""
    folder: str = ""               # default results/<name with the last dot as a slash>


LONG_RUNS: dict[str, LongRun] = {}


def register_long_run(run: LongRun) -> LongRun:
    LONG_RUNS[run.name] = run
    return run


def get_long_run(name: str) -> LongRun:
    from .recipes import _load_all
    _load_all()
    if name not in LONG_RUNS:
        raise ValueError(f"long run must be one of {sorted(LONG_RUNS)}, got {name!r}")
    return LONG_RUNS[name]


def default_folder(run: LongRun) -> Path:
    if run.folder:
        return Path(run.folder)
    recipe, _, scale = run.name.rpartition(".")
    return Path("results") / recipe / scale


# --- compact checkpoints ----------------------------------------------------------------
def _param_names(models) -> list[str]:
    return [name for name, _ in models[0].named_parameters()]


def _order(mode: str, names: list[str], K: int) -> list[tuple[int | None, str]]:
    """(run, name) of each optimizer parameter index in a :func:`train` checkpoint of ``mode``:
    stacked layouts hold one tensor per name for all runs (run None), the separate layout one
    per run and name, runs outermost."""
    if mode == "separate":
        return [(k, n) for k in range(K) for n in names]
    return [(None, n) for n in names]


def export_compact(full: dict, names: list[str], K: int, folder: Path) -> None:
    """Write the compact form of a :func:`train` checkpoint ``full`` into ``folder``."""
    mode = full["mode"]
    params = full["params"]
    opt = full["optimizer"]
    group = {k: v for k, v in opt["param_groups"][0].items() if k != "params"}
    steps_adam = None
    second = {k: {} for k in range(K)}
    for idx, (run, name) in enumerate(_order(mode, names, K)):
        st = opt["state"].get(idx, {})
        if "exp_avg_sq" not in st:
            continue
        steps_adam = float(st["step"])
        v = st["exp_avg_sq"].detach().cpu()
        if run is None:
            for k in range(K):
                second[k][name] = (v[k] if K > 1 and mode != "single" else v).to(torch.bfloat16).clone()
        else:
            second[run][name] = v.to(torch.bfloat16).clone()
    for k in range(K):
        own = {n: (params[n][k] if mode != "single" else params[n]).detach().cpu().float().clone()
               for n in names}
        torch.save(own, folder / f"run{k}.params.pt")
        torch.save(second[k], folder / f"run{k}.adam.pt")
    losses = torch.tensor(np.asarray(full["losses"], dtype=np.float32).reshape(-1, K))
    torch.save({"format": FORMAT, "step": full["step"], "streams": full["streams"],
                "stream_step": full["stream_step"], "prefetch": full["prefetch"],
                "seeds": full["seeds"], "fingerprint": full.get("fingerprint"),
                "scheduler": full.get("scheduler"), "param_group": group,
                "adam_step": steps_adam, "losses": losses, "n_runs": K, "names": names,
                "model_config": full.get("model_config")}, folder / "state.pt")


def expand_compact(folder: Path, mode: str, device) -> dict:
    """The :func:`train` checkpoint (for ``mode``'s optimizer layout) that a compact folder
    stands for; Adam's first moment restarts at zero (see the module docstring)."""
    meta = load_checkpoint(folder / "state.pt", map_location="cpu")
    if meta.get("format") != FORMAT:
        raise ValueError(f"{folder / 'state.pt'} has format {meta.get('format')!r}, expected {FORMAT}")
    K, names = meta["n_runs"], meta["names"]
    own = [load_checkpoint(folder / f"run{k}.params.pt", map_location="cpu") for k in range(K)]
    sq = [load_checkpoint(folder / f"run{k}.adam.pt", map_location="cpu") for k in range(K)]
    single = mode == "single"
    params = {n: own[0][n] if single else torch.stack([own[k][n] for k in range(K)]) for n in names}
    state = {}
    for idx, (run, name) in enumerate(_order(mode, names, K)):
        if name not in sq[0]:
            continue
        v = (sq[0][name] if single else torch.stack([sq[k][name] for k in range(K)])) if run is None \
            else sq[run][name]
        v = v.float()
        step = torch.tensor(meta["adam_step"], dtype=torch.float32)
        state[idx] = {"step": step, "exp_avg": torch.zeros_like(v), "exp_avg_sq": v}
    group = dict(meta["param_group"], params=list(range(len(_order(mode, names, K)))))
    losses = meta["losses"].numpy().astype(float).tolist()
    return {"params": params, "optimizer": {"state": state, "param_groups": [group]},
            "scheduler": meta["scheduler"], "streams": meta["streams"],
            "stream_step": meta["stream_step"], "prefetch": meta["prefetch"], "mode": mode,
            "step": meta["step"], "losses": losses, "seeds": meta["seeds"],
            "fingerprint": meta["fingerprint"], "model_config": meta["model_config"]}


def load_state(folder: str | Path) -> dict | None:
    """``{"step", "losses" (steps, K), "progress"}`` of a committed long run, or None (also
    for ``folder=None``, what :func:`icl_core.committed.find` returns when it has none)."""
    if folder is None:
        return None
    folder = Path(folder)
    if not (folder / "state.pt").exists():
        return None
    meta = load_checkpoint(folder / "state.pt", map_location="cpu")
    progress = json.loads((folder / "progress.json").read_text()) if (folder / "progress.json").exists() else {}
    return {"step": meta["step"], "losses": meta["losses"].numpy(), "progress": progress}


def largest_loss_rise(losses, window: int = 1000) -> dict:
    """The largest rise of a run's training loss, smoothed over ``window`` updates, above its lowest
    earlier value: how a loss spike is told from the noise of single steps.

    ``losses``: (steps,) the training loss of every update, in order (``losses[i]`` is update
    ``i + 1``'s; :func:`load_state` gives ``(steps, K)``, one column per model). With
    ``m_t = mean(losses[t - window + 1 .. t])`` (the window of ``window`` updates ending at update
    ``t``), the rise at ``t`` is ``m_t - min_{u <= t} m_u``. Returns ``{"rise"`` (the largest rise),
    ``"lowest"`` (the lowest window mean up to it), ``"peak"`` (the window mean at it), ``"start"``
    (the first update of that window, 1-based), ``"now"`` (the mean of the last ``window``
    updates), ``"steps"``, ``"window"}``; a loss that never rises has ``rise`` 0 at the first window.
    """
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 1:
        raise ValueError(f"losses must be one run's (steps,) losses, got shape {losses.shape}")
    if not 1 <= window <= len(losses):
        raise ValueError(f"window must be between 1 and the number of steps ({len(losses)}), got {window}")
    if not np.isfinite(losses).all():
        raise ValueError("losses must be finite")
    c = np.concatenate([[0.0], np.cumsum(losses)])
    means = (c[window:] - c[:-window]) / window          # means[j]: updates j + 1 .. j + window
    lowest = np.minimum.accumulate(means)
    j = int(np.argmax(means - lowest))
    return {"rise": float(means[j] - lowest[j]), "lowest": float(lowest[j]), "peak": float(means[j]),
            "start": j + 1, "now": float(means[-1]), "steps": len(losses), "window": window}


def machine_kinds(pieces: list[dict]) -> str:
    """The machine kinds ``pieces`` (``progress.json``'s list) were trained on, in order of first
    use and in words: "GPU", "CPU", "GPU and CPU" (from each piece's ``provenance.device``)."""
    words = {"cuda": "GPU", "cpu": "CPU", "mps": "Apple GPU"}
    kinds = dict.fromkeys(words.get(d, d) for d in
                          (p["provenance"]["device"].split(":")[0].strip().lower() for p in pieces))
    return " and ".join(kinds)


def committed_summary(folder: str | Path) -> str:
    """One line on what ``folder`` holds: steps trained of the run's total, the number of pieces
    and the machines they ran on; "nothing committed" when it has no ``progress.json``."""
    path = Path(folder) / "progress.json"
    if not path.exists():
        return "nothing committed"
    pieces = json.loads(path.read_text()).get("pieces", [])
    if not pieces:
        return "nothing committed"
    return (f"{pieces[-1]['to_step']:,} of {pieces[-1]['steps_total']:,} steps, "
            f"{len(pieces)} piece{'s' if len(pieces) > 1 else ''} on {machine_kinds(pieces)}")


def load_models(run: LongRun, folder: str | Path | None = None, **overrides) -> dict:
    """``run name -> model`` (CPU, eval mode) at the committed step of ``run``."""
    folder = Path(folder) if folder is not None else default_folder(run)
    cfg = dict(run.config, **overrides)
    models, _, _ = run.build(cfg)
    meta = load_checkpoint(folder / "state.pt", map_location="cpu")
    if meta["n_runs"] != len(models):
        raise ValueError(f"{folder} holds {meta['n_runs']} runs but the config builds {len(models)}")
    out = {}
    for k, (name, model) in enumerate(zip(run.run_names(cfg), models)):
        model.load_state_dict(load_checkpoint(folder / f"run{k}.params.pt", map_location="cpu"),
                              strict=False)     # parameters only: the head-mask buffers stay
        out[name] = model.eval()
    return out


def evaluate_committed(name: str, folder: str | Path | None = None, sha: str | None = None,
                       command: str | None = None) -> dict:
    """Score the committed state of long run ``name`` again with this code's evaluation, without
    training: the keys the newest piece's ``metrics`` lack (an evaluation extended after the piece
    ran) are added; the keys it has are kept as recorded, and their recomputed values are listed
    beside them (numbers only). The entry's ``evaluations`` list records each such pass (keys added, values
    rechecked, provenance). ``progress.json`` is replaced atomically; nothing else is touched.
    Returns the new entry (CPU, so a GPU-trained piece is rescored on the CPU)."""
    from .recipes import _load_all
    _load_all()
    run = get_long_run(name)
    folder = Path(folder) if folder is not None else default_folder(run)
    sha = sha or git_sha()                 # the code that scores, taken before the pass (as continue_run)
    state = load_state(folder)
    if state is None or not state["progress"].get("pieces"):
        raise ValueError(f"no committed piece in {folder}: nothing to evaluate")
    progress = state["progress"]
    cfg = dict(progress["config"])
    models = load_models(run, folder, **cfg)
    t0 = time.perf_counter()
    metrics = run.evaluate(list(models.values()), cfg)
    seconds = time.perf_counter() - t0
    entry = progress["pieces"][-1]
    added = sorted(k for k in metrics if k not in entry["metrics"])
    entry["metrics"].update({k: metrics[k] for k in added})
    entry.setdefault("evaluations", []).append(
        {"at_step": state["step"], "added": added,
         "rechecked": {k: v for k, v in metrics.items() if k not in added and isinstance(v, (int, float))},
         "provenance": provenance(device_name(pick_device("cpu")), seconds, cfg.get("seed"), command, sha=sha)})
    tmp = folder / "progress.json.tmp"
    tmp.write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n")
    tmp.replace(folder / "progress.json")
    return entry


# --- one piece ----------------------------------------------------------------------------
_RUN_FILE = re.compile(r"state\.pt|progress\.json|run\d+\.(params|adam)\.pt")   # the files a piece writes


def continue_run(name: str, minutes: float, device=None, folder: str | Path | None = None,
                 sha: str | None = None, command: str | None = None, compile: bool = False,
                 **overrides) -> dict:
    """Continue long run ``name`` from the compact checkpoint in ``folder`` (default
    ``results/<recipe>/<scale>``; none there: start at step 0) for at most ``minutes`` of
    training, evaluate, and replace ``folder`` with the new state. ``overrides`` change the
    config (e.g. tiny sizes for a test); a folder written with other settings is refused.
    Files in ``folder`` that a piece does not write (a ``NOTE.md``) are kept; a run already at its
    ``steps`` is refused (ValueError), so a loop over every run can include the finished ones.
    ``compile``: ``torch.compile`` the model (single-model runs; falls back to eager mode with
    a warning). Returns the new progress entry."""
    if not isinstance(minutes, (int, float)) or not 0 < minutes <= 24 * 60:
        raise ValueError(f"minutes must be a number in (0, 1440], got {minutes!r}")
    from .recipes import apply_overrides
    run = get_long_run(name)
    cfg = apply_overrides(f"long run {name!r}", run.config, overrides)
    folder = Path(folder) if folder is not None else default_folder(run)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"folder {folder} exists and is not a folder")
    dev = pick_device(device)
    sha = sha or git_sha()
    models, samplers, kwargs = run.build(cfg)
    names = _param_names(models)
    K = len(models)
    mode = run_mode(models, dev)
    work = Path(tempfile.mkdtemp(prefix="icl_long_run_"))
    try:
        full_path = work / "full.pt"
        start = 0
        if (folder / "state.pt").exists():
            full = expand_compact(folder, mode, dev)
            start = full["step"]
            if start >= cfg["steps"]:
                raise ValueError(f"long run {name!r} finished at {start:,} of {cfg['steps']:,} steps in "
                                 f"{folder}: nothing to train (to score it again: --evaluate-only)")
            torch.save(full, full_path)
        t0 = time.perf_counter()
        try:
            fit = train(models, samplers, cfg["steps"], checkpoint_path=full_path, device=dev,
                        max_seconds=60.0 * minutes, compile=compile,
                        vmap=None if mode in ("single", "stacked") else mode == "vmap", **kwargs)
        except ValueError as err:   # name the committed folder, not the scratch file
            raise ValueError(str(err).replace(str(full_path), str(folder))) from None
        seconds = time.perf_counter() - t0
        models = [m.cpu().eval() for m in models]
        metrics = run.evaluate(models, cfg)
        new = work / "new"
        new.mkdir()
        export_compact(load_checkpoint(full_path, map_location="cpu"), names, K, new)
        history = []
        if (folder / "progress.json").exists():
            history = json.loads((folder / "progress.json").read_text()).get("pieces", [])
        entry = {"from_step": start, "to_step": fit.steps, "steps_total": cfg["steps"],
                 "compiled": bool(compile),
                 "finished": fit.steps >= cfg["steps"], "seconds": round(seconds, 1),
                 "steps_per_s": round((fit.steps - start) / max(seconds, 1e-9), 2),
                 "metrics": metrics,
                 "provenance": provenance(device_name(dev), seconds, fit.seed, command, sha=sha)}
        progress = {"name": name, "config": cfg, "run_names": run.run_names(cfg),
                    "step": fit.steps, "pieces": history + [entry],
                    "note": "compact checkpoint: parameters float32, Adam's second moment "
                            "bfloat16, first moment restarted at each piece (icl_core.long_runs)"}
        (new / "progress.json").write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n")
        for kept in sorted(folder.iterdir()) if folder.is_dir() else []:    # what the run does not write
            if kept.is_file() and not _RUN_FILE.fullmatch(kept.name):         # (a NOTE.md) stays
                shutil.copy2(kept, new / kept.name)
        replace_folder(new, folder)
        return entry
    finally:
        shutil.rmtree(work, ignore_errors=True)
