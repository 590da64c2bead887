"""A fixed pool of pre-drawn batches served as a task sampler.

Drawing Gaussian-process prompts costs an eigendecomposition per prompt, far more than a step
of the small models they train. ``PoolSampler`` draws ``n_batches`` batches once and serves one
of them per training step, chosen by the run's task stream (so every run still has its own,
reproducible sequence). The authors of Cheng et al. resample their batch every 10 steps; a pool
of fresh batches is the same idea.
"""
from __future__ import annotations

import torch

from ..prompts import Streams
from ..validation import check_int
from .base import TaskSampler


class PoolSampler(TaskSampler):
    """Args: base sampler; batch_size and n_points of the pooled batches; n_batches; seed."""

    def __init__(self, base: TaskSampler, batch_size: int, n_points: int, n_batches: int = 20,
                 seed: int = 0):
        super().__init__(base.d, base.noise_std)
        n_batches = check_int("n_batches", n_batches, minimum=1)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        n_points = check_int("n_points", n_points, minimum=1)
        self.base, self.batch_size, self.n_points = base, batch_size, n_points
        self.pool = [base.sample(batch_size, n_points, seed=seed * 100_003 + k)
                     for k in range(n_batches)]

    def draw(self, streams: Streams, batch_size, n_points, d_active=None):
        if (batch_size, n_points) != (self.batch_size, self.n_points):
            raise ValueError(f"the pool holds batches of {self.batch_size} prompts of "
                             f"{self.n_points} points, asked for {batch_size} x {n_points}")
        k = int(torch.randint(len(self.pool), (1,), generator=streams.task))
        p = self.pool[k]
        return p.x, p.y, p.task
