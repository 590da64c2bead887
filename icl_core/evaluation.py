"""Evaluation: squared error against the number of in-context examples, with bootstrap
confidence intervals, every predictor scored on the *same* prompts (Garg et al. Section 3:
1280 prompts, errors divided by d, 5th-95th percentile bootstrap intervals)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from .baselines import prefix_predictions
from .prompts import derive_seed
from .validation import check_float, check_int


EVAL_STREAM = 0xE7A1  # keeps evaluation prompts apart from training prompts


@dataclass
class ErrorCurve:
    """Mean squared error (divided by ``normalize``) against ``n``, the number of context
    examples, with a bootstrap interval ``[lo, hi]``. All arrays have shape ``(P,)``."""

    n: np.ndarray
    mean: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def at(self, n: int) -> float:
        """The mean error with exactly ``n`` examples."""
        idx = np.flatnonzero(self.n == n)
        if not len(idx):
            raise ValueError(f"n must be one of {self.n.min()}..{self.n.max()}, got {n}")
        return float(self.mean[idx[0]])

    def to_dict(self) -> dict:
        return {k: getattr(self, k).tolist() for k in ("n", "mean", "lo", "hi")}


def bootstrap_ci(errors, n_boot: int = 1000, level: float = 0.90, seed: int = 0):
    """Mean over prompts and its bootstrap interval.

    Args:
        errors: ``(N, P)`` per-prompt errors (N prompts, P positions).
        n_boot: bootstrap resamples; level: coverage (0.90 gives the 5th-95th percentiles).

    Returns:
        ``(mean, lo, hi)``, each ``(P,)``.
    """
    errors = np.asarray(errors, dtype=np.float64)
    if errors.ndim == 1:
        errors = errors[:, None]
    n_boot = check_int("n_boot", n_boot, minimum=1)
    level = check_float("level", level, minimum=0.0, strict=True, maximum=1.0)
    rng = np.random.default_rng(seed)
    N = errors.shape[0]
    means = np.empty((n_boot, errors.shape[1]))
    for b in range(n_boot):
        means[b] = errors[rng.integers(0, N, N)].mean(0)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail], axis=0)
    return errors.mean(0), lo, hi


def curve_predictor(predictor):
    """Wrap a model or a baseline as ``f(x (B,T,d), y (B,T)) -> (B,T)``: the prediction for
    point i from the i points before it. Models must use the interleaved causal layout."""
    if isinstance(predictor, torch.nn.Module):
        layout = getattr(predictor, "layout", None)
        if layout is None or layout.kind != "interleaved":
            raise ValueError("predictor must be a model with the interleaved layout "
                             "(one forward pass gives every prefix)")

        @torch.no_grad()
        def run(x, y):
            was_training = predictor.training
            predictor.eval()
            dev = next(predictor.parameters()).device
            out = predictor(x.to(dev), y.to(dev), x.shape[1] - 1).cpu()
            predictor.train(was_training)
            return out
        return run
    return partial(prefix_predictions, predictor)


def error_vs_context(predictors: dict, sampler, n_points: int, n_prompts: int = 1280,
                     seed: int = 0, batch_size: int = 640, normalize: float | None = None,
                     n_boot: int = 1000) -> dict[str, ErrorCurve]:
    """Error against context length for several predictors on the same prompts.

    Args:
        predictors: name -> model or baseline (see :func:`curve_predictor`); a baseline with
            keyword arguments can be given as ``functools.partial(ridge, lam=0.1)``.
        sampler: a :class:`~icl_core.tasks.TaskSampler`.
        n_points: T, prompt length; curves cover n = 0..T-1 examples.
        n_prompts: number of evaluation prompts N (split into batches of ``batch_size``).
        normalize: divide squared errors by this (default ``sampler.d``, as Garg et al.).

    Returns:
        name -> :class:`ErrorCurve` with ``n = 0..T-1``.
    """
    n_points = check_int("n_points", n_points, minimum=1)
    n_prompts = check_int("n_prompts", n_prompts, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    normalize = sampler.d if normalize is None else check_float(
        "normalize", normalize, minimum=0.0, strict=True)
    fns = {name: curve_predictor(p) for name, p in predictors.items()}
    errs = {name: [] for name in fns}
    for i, start in enumerate(range(0, n_prompts, batch_size)):
        prompt = sampler.sample(min(batch_size, n_prompts - start), n_points,
                                seed=derive_seed(seed, EVAL_STREAM, i))
        for name, fn in fns.items():
            pred = fn(prompt.x, prompt.y).to(torch.float64)
            errs[name].append(((pred - prompt.y.to(torch.float64)) ** 2).numpy())
    curves = {}
    for name, chunks in errs.items():
        mean, lo, hi = bootstrap_ci(np.concatenate(chunks) / normalize, n_boot=n_boot, seed=seed)
        curves[name] = ErrorCurve(np.arange(n_points), mean, lo, hi)
    return curves
