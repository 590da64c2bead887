"""Checkpoints of :func:`~icl_core.training.train`: written atomically, read safely, and
fingerprinted so that a run never resumes under other settings.

* :func:`atomic_save`: a temporary file, then ``os.replace`` (an interrupted write leaves the
  previous checkpoint whole);
* :func:`load_checkpoint`: ``torch.load(weights_only=True)`` (tensors, numbers, strings and
  containers only: loading runs no code); a damaged or foreign file raises ``ValueError``
  naming it;
* :func:`fingerprint`: everything that shapes a run's trajectory (the models' class, config
  and shapes, the samplers, the optimisation settings, the seeds), compared on resume by
  :func:`fingerprint_mismatch`.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch


def atomic_save(obj, path: Path):
    """``torch.save`` to ``path`` through a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)



def describe(obj, depth: int = 0):
    """A JSON-able description of a model or sampler for checkpoint fingerprints: its class
    and its public scalar settings; tensors by shape and a hash of their values; nested
    samplers described in turn (lists, e.g. a pool's pre-drawn batches, are left out: they
    follow from the settings)."""
    import hashlib
    out = {"class": type(obj).__name__}
    config = getattr(obj, "config", None)
    if isinstance(config, dict):
        out["config"] = {k: v for k, v in config.items()     # init_*: replaced by the checkpoint
                         if isinstance(v, (bool, int, float, str, type(None))) and not k.startswith("init")}
    if isinstance(obj, torch.nn.Module):
        out["shapes"] = [list(p.shape) for p in obj.parameters()]
        return out
    for key, value in sorted(vars(obj).items()):
        if key.startswith("_"):
            continue
        if isinstance(value, (bool, int, float, str, type(None))):
            out[key] = value
        elif isinstance(value, torch.Tensor):
            data = value.detach().cpu().contiguous()
            out[key] = f"tensor{list(data.shape)}:" + hashlib.sha1(
                data.numpy().tobytes() if data.dtype != torch.bfloat16 else
                data.float().numpy().tobytes()).hexdigest()[:12]
        elif depth < 2 and hasattr(value, "sample_x"):
            out[key] = describe(value, depth + 1)
    return out


def fingerprint(models, samplers, seeds, **settings) -> dict:
    """Everything that shapes a run's trajectory, as a flat dict of JSON-able values."""
    fp = {"model": describe(models[0]), "n_runs": len(models), "seeds": list(seeds)}
    fp["samplers"] = [describe(s) for s in samplers]
    fp.update(settings)
    return fp


def fingerprint_mismatch(saved: dict, now: dict) -> list[str]:
    """Keys present in both fingerprints whose values differ."""
    return sorted(k for k in set(saved) & set(now) if saved[k] != now[k])


def load_checkpoint(path: str | Path, map_location=None) -> dict:
    """Read a checkpoint written by :func:`train` with ``torch.load(weights_only=True)``
    (tensors, numbers, strings and containers only: no code runs); a damaged or foreign file
    raises ``ValueError`` naming it."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:   # EOFError, UnpicklingError, RuntimeError (zip), ...
        raise ValueError(f"cannot read the checkpoint {path} ({type(err).__name__}: {err}); "
                         "delete it or pass resume=False to start over") from None
