"""``train(...)``: the one training loop of the library.

* fresh prompts every step, drawn from ``seed`` and the step number alone
  (``derive_seed(seed, step)``), so a run is a pure function of its seed: resuming from a
  checkpoint replays exactly the batches an uninterrupted run would have seen;
* Adam (Garg et al.: lr 1e-4, batch 64), MSE over every predicted position;
* optional curriculum (Garg et al. Section 3: dimensions 5 -> 20 and points 11 -> 41,
  stepped every 2,000 steps);
* checkpoints every ``checkpoint_every`` steps, written atomically; ``resume=True``
  continues from the checkpoint at ``checkpoint_path`` if there is one;
* a non-finite loss raises :class:`TrainingDiverged` naming the step and the last good
  checkpoint;
* a tqdm progress bar, silent when ``CI`` is set, when ``ICL_CORE_PROGRESS=0``, or when
  stderr is neither a terminal nor a notebook.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .devices import pick_device
from .prompts import derive_seed
from .validation import check_float, check_int


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class Curriculum:
    """Garg et al.'s curriculum: ``d_active`` and ``n_points`` grow by ``*_step`` every
    ``interval`` steps from their start to their end values."""

    dims: tuple[int, int, int]       # (start, end, increment)
    points: tuple[int, int, int]     # (start, end, increment)
    interval: int = 2000

    def __post_init__(self):
        for name, (start, end, inc) in (("dims", self.dims), ("points", self.points)):
            check_int(f"{name} start", start, minimum=1)
            check_int(f"{name} end", end, minimum=start)
            check_int(f"{name} increment", inc, minimum=0)
        check_int("interval", self.interval, minimum=1)

    @classmethod
    def garg(cls, d: int = 20, n_points: int = 41, interval: int = 2000) -> "Curriculum":
        """Garg et al.'s schedule for linear regression, ending at (d, n_points)."""
        return cls((min(5, d), d, 1), (min(11, n_points), n_points, 2), interval)

    def at(self, step: int) -> tuple[int, int]:
        """``(d_active, n_points)`` at ``step``."""
        k = step // self.interval
        (d0, d1, dd), (p0, p1, dp) = self.dims, self.points
        return min(d1, d0 + k * dd), min(p1, p0 + k * dp)


@dataclass
class TrainResult:
    """What a training run hands back: the per-step losses and how the run was made."""

    losses: np.ndarray
    steps: int
    seed: int
    device: str
    wall_time_s: float
    checkpoint: str | None = None
    config: dict = field(default_factory=dict)


def progress_enabled() -> bool:
    """Whether training shows a progress bar (see the module docstring)."""
    if os.environ.get("CI") or os.environ.get("ICL_CORE_PROGRESS", "1") == "0":
        return False
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def _atomic_save(obj, path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def train(model: torch.nn.Module, sampler, steps: int, batch_size: int = 64, lr: float = 1e-4,
          seed: int = 0, n_points: int | None = None, curriculum: Curriculum | None = None,
          checkpoint_every: int = 0, checkpoint_path: str | Path | None = None,
          resume: bool = True, device=None, grad_clip: float | None = None,
          weight_decay: float = 0.0, progress: bool | None = None) -> TrainResult:
    """Train ``model`` on prompts from ``sampler``.

    Args:
        model: a model with ``predict(prompt)`` and ``targets(prompt)`` (e.g.
            :class:`~icl_core.models.Transformer`); its ``d`` must equal ``sampler.d``.
        sampler: a :class:`~icl_core.tasks.TaskSampler`.
        steps: total optimisation steps (>= 1), counted from step 0 even when resuming.
        batch_size: prompts per step; lr: Adam learning rate (> 0).
        seed: the data seed: step ``t`` trains on ``sampler.sample(seed=derive_seed(seed, t))``.
        n_points: points per prompt (context + query); required without a curriculum.
        curriculum: a :class:`Curriculum`; overrides ``n_points`` and truncates dimensions.
        checkpoint_every: save every K steps (0: only at the end, if a path is given).
        checkpoint_path: where the checkpoint lives (model, optimizer, step, losses).
        resume: continue from ``checkpoint_path`` when it exists.
        device: ``None``/"auto" picks cuda, then mps, then cpu.
        grad_clip: clip the global gradient norm to this value (None: no clipping).

    Returns:
        :class:`TrainResult` with the loss of every step.

    Raises:
        TrainingDiverged: the loss became non-finite (the message names the step and the
            last good checkpoint).
    """
    steps = check_int("steps", steps, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    checkpoint_every = check_int("checkpoint_every", checkpoint_every, minimum=0)
    if curriculum is None:
        if n_points is None:
            raise ValueError("n_points must be given (an integer >= 2) when there is no curriculum")
        n_points = check_int("n_points", n_points, minimum=2)
    if getattr(model, "d", sampler.d) != sampler.d:
        raise ValueError(f"the sampler has d={sampler.d} but the model was built for d={model.d}")
    dev = pick_device(device)
    model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    ckpt = Path(checkpoint_path) if checkpoint_path is not None else None
    start, losses, last_good = 0, [], None
    if ckpt is not None and resume and ckpt.exists():
        state = torch.load(ckpt, map_location=dev, weights_only=False)
        if state["seed"] != seed:
            raise ValueError(f"seed={seed} differs from the checkpoint's seed={state['seed']} "
                             f"({ckpt}); pass resume=False to start over")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, losses, last_good = state["step"], list(state["losses"]), str(ckpt)

    def save(step):
        _atomic_save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                      "losses": losses, "seed": seed,
                      "model_config": getattr(model, "config", None)}, ckpt)
        return str(ckpt)

    show = progress_enabled() if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm
        bar = tqdm(total=steps, initial=start, desc="train", leave=False)
    t0 = time.perf_counter()
    model.train()
    for step in range(start, steps):
        d_active, T = curriculum.at(step) if curriculum is not None else (None, n_points)
        prompt = sampler.sample(batch_size, T, seed=derive_seed(seed, step),
                                d_active=d_active).to(dev)
        loss = torch.nn.functional.mse_loss(model.predict(prompt), model.targets(prompt))
        value = loss.item()
        if not math.isfinite(value):
            if bar is not None:
                bar.close()
            raise TrainingDiverged(f"loss is {value} at step {step}; last good checkpoint: "
                                   f"{last_good or 'none (no checkpoint was written)'}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        losses.append(value)
        if ckpt is not None and checkpoint_every and (step + 1) % checkpoint_every == 0:
            last_good = save(step + 1)
        if bar is not None:
            bar.update(1)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{value:.4f}")
    if bar is not None:
        bar.close()
    if ckpt is not None and start < steps:
        last_good = save(steps)
    model.eval()
    return TrainResult(np.asarray(losses), steps, seed, dev.type, time.perf_counter() - t0,
                       last_good, {"batch_size": batch_size, "lr": lr, "n_points": n_points,
                                   "curriculum": None if curriculum is None else vars(curriculum)})
