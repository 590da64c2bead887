"""The sampler interface shared by every task family.

A sampler draws ``B`` prompts of ``T`` points: covariates from its covariate law, one task
per prompt from its task law, labels ``y = f_task(x) + noise_std * eps``. The three draws
use the three separate streams of :class:`icl_core.prompts.Streams`.
"""
from __future__ import annotations

import torch

from ..prompts import Prompt, Streams
from ..validation import check_float, check_int


class TaskSampler:
    """Base class. Subclasses implement ``sample_x``, ``sample_task`` and ``evaluate``.

    Args:
        d: covariate dimension (>= 1).
        noise_std: standard deviation of the label noise (>= 0).
    """

    name = "task"

    def __init__(self, d: int, noise_std: float = 0.0):
        self.d = check_int("d", d, minimum=1)
        self.noise_std = check_float("noise_std", noise_std, minimum=0.0)

    # --- to implement -------------------------------------------------------------
    def sample_x(self, batch_size: int, n_points: int, g: torch.Generator) -> torch.Tensor:
        """Covariates ``(B, T, d)``, or ``(x, extras)`` where ``extras`` is a dict of
        per-prompt covariate-law parameters (e.g. a random covariance) added to the task."""
        raise NotImplementedError

    def sample_task(self, batch_size: int, g: torch.Generator) -> dict:
        """Task parameters, a dict of tensors with leading dimension ``B``."""
        raise NotImplementedError

    def evaluate(self, x: torch.Tensor, task: dict) -> torch.Tensor:
        """Noiseless labels ``f_task(x)``: ``(B, T, d) -> (B, T)``."""
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------
    def sample(self, batch_size: int, n_points: int, seed: int | None = None,
               streams: Streams | None = None, n_context: int | None = None,
               d_active: int | None = None) -> Prompt:
        """Draw a batch of prompts.

        Args:
            batch_size: B >= 1.
            n_points: T >= 1 points per prompt (context plus queries).
            seed: seeds the three streams (ignored if ``streams`` is given).
            streams: explicit generators, to share covariates/tasks/noise across calls.
            n_context: how many of the T points are labelled context, in [1, T]; default
                ``T - 1`` (one query, the last point).
            d_active: curriculum truncation (Garg et al.): coordinates ``>= d_active`` of
                ``x`` are zeroed; default ``d``.

        Returns:
            :class:`Prompt` with ``x`` (B, T, d), ``y`` (B, T), float32.
        """
        batch_size = check_int("batch_size", batch_size, minimum=1)
        if n_context is None:   # the last point is the query
            n_points = check_int("n_points", n_points, minimum=2)
            n_context = n_points - 1
        else:
            n_points = check_int("n_points", n_points, minimum=1)
            n_context = check_int("n_context", n_context, minimum=1, maximum=n_points)
        d_active = self.d if d_active is None else check_int(
            "d_active", d_active, minimum=1, maximum=self.d)
        if streams is None:
            if seed is None:
                raise ValueError("seed must be an integer (or pass streams=), got None")
            streams = Streams.from_seed(seed)
        x, y, task = self.draw(streams, batch_size, n_points, d_active)
        return Prompt(x, y, n_context, task, self.noise_std)

    def draw(self, streams: Streams, batch_size: int, n_points: int,
             d_active: int | None = None) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """The unchecked core of :meth:`sample` (the training loop's hot path): advances the
        three streams and returns ``x (B, T, d)``, ``y (B, T)`` and the task dict."""
        x = self.sample_x(batch_size, n_points, streams.x)
        x, extras = x if isinstance(x, tuple) else (x, {})
        if d_active is not None and d_active < self.d:
            x = x.clone()
            x[..., d_active:] = 0.0
        task = {**self.sample_task(batch_size, streams.task), **extras}
        y = self.evaluate(x, task)
        if self.noise_std > 0:
            y = y + self.noise_std * torch.randn(y.shape, generator=streams.noise)
        return x, y, task

    def draw_runs(self, streams: list[Streams], batch_size: int, n_points: int,
                  d_active: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch for each of K runs, run k from its own ``streams[k]``, exactly as K
        calls of :meth:`draw` would give: ``x (K, B, T, d)``, ``y (K, B, T)``. The labels of
        all runs are computed in one call of :meth:`evaluate` (samplers that override
        :meth:`draw` itself get one :meth:`draw` per run, stacked)."""
        if type(self).draw is not TaskSampler.draw:
            draws = [self.draw(st, batch_size, n_points, d_active) for st in streams]
            return torch.stack([dr[0] for dr in draws]), torch.stack([dr[1] for dr in draws])
        xs, tasks = [], []
        for st in streams:
            x = self.sample_x(batch_size, n_points, st.x)
            x, extras = x if isinstance(x, tuple) else (x, {})
            xs.append(x)
            tasks.append({**self.sample_task(batch_size, st.task), **extras})
        x = torch.cat(xs)                                         # (K * B, T, d)
        if d_active is not None and d_active < self.d:
            x[..., d_active:] = 0.0
        y = self.evaluate(x, {k: torch.cat([t[k] for t in tasks]) for k in tasks[0]})
        K = len(streams)
        y = y.view(K, batch_size, n_points)
        if self.noise_std > 0:
            y = y + self.noise_std * torch.stack(
                [torch.randn(batch_size, n_points, generator=st.noise) for st in streams])
        return x.view(K, batch_size, n_points, self.d), y

    def __repr__(self):
        return f"{type(self).__name__}(d={self.d}, noise_std={self.noise_std})"
