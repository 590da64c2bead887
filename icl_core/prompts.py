"""Prompts: the batch of in-context regression problems every model and baseline sees.

One convention for the whole library (the papers' column-token notation is converted
in :mod:`icl_core.embed` only):

* ``x``: ``(B, T, d)`` covariates, batch first; ``y``: ``(B, T)`` labels.
* The first ``n_context`` points of each prompt are the labelled context
  :math:`(x_1, y_1), \\dots, (x_n, y_n)`; the remaining ``T - n_context`` are queries whose
  labels are the targets (models never see them: the layouts zero them).
* ``task`` holds the task parameters that generated the labels (e.g. ``w`` of shape
  ``(B, d)``) so theory and baselines can be compared on the very same prompts.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .validation import check_int


def derive_seed(*keys: int) -> int:
    """A 63-bit seed derived from integer ``keys`` (NumPy ``SeedSequence``): independent
    streams for (base seed, step), (seed, stream index), ... without collisions."""
    ss = np.random.SeedSequence([int(k) for k in keys])
    return int(ss.generate_state(1, dtype=np.uint64)[0]) >> 1


@dataclass
class Streams:
    """Three independent random streams: covariates ``x``, task parameters, label noise.

    Seeding them separately lets two runs share the covariates and tasks while the
    noise differs (or the reverse), and lets every model and baseline be scored on
    identical prompts.
    """

    x: torch.Generator
    task: torch.Generator
    noise: torch.Generator

    @classmethod
    def from_seed(cls, seed: int) -> "Streams":
        gens = []
        for stream in range(3):
            g = torch.Generator()
            g.manual_seed(derive_seed(seed, stream))
            gens.append(g)
        return cls(*gens)

    def get_state(self) -> list[torch.Tensor]:
        """The three generators' states (for checkpoints)."""
        return [g.get_state() for g in (self.x, self.task, self.noise)]

    def set_state(self, states: list[torch.Tensor]) -> "Streams":
        for g, st in zip((self.x, self.task, self.noise), states):
            # a checkpoint loaded with map_location="cuda" holds the states on the GPU
            g.set_state(st.to(device=g.device, dtype=torch.uint8))
        return self


@dataclass
class Prompt:
    """A batch of prompts. Shapes: ``x`` (B, T, d), ``y`` (B, T); see the module docstring."""

    x: torch.Tensor
    y: torch.Tensor
    n_context: int
    task: dict = field(default_factory=dict)
    noise_std: float = 0.0

    def __post_init__(self):
        if self.x.dim() != 3:
            raise ValueError(f"x must have shape (B, T, d), got {tuple(self.x.shape)}")
        if self.y.shape != self.x.shape[:2]:
            raise ValueError(f"y must have shape (B, T) = {tuple(self.x.shape[:2])}, "
                             f"got {tuple(self.y.shape)}")
        check_int("n_context", self.n_context, minimum=1, maximum=self.x.shape[1])

    @property
    def batch_size(self) -> int:
        return self.x.shape[0]

    @property
    def n_points(self) -> int:
        return self.x.shape[1]

    @property
    def d(self) -> int:
        return self.x.shape[2]

    @property
    def context(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_ctx (B, n, d), y_ctx (B, n))``."""
        return self.x[:, : self.n_context], self.y[:, : self.n_context]

    @property
    def queries(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x_q (B, q, d), y_q (B, q))`` with ``q = T - n_context``."""
        return self.x[:, self.n_context:], self.y[:, self.n_context:]

    def to(self, device=None, dtype=None) -> "Prompt":
        """A copy on ``device`` / in ``dtype`` (task tensors move too)."""
        def move(t):
            if not torch.is_tensor(t):
                return t
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None)
        return Prompt(move(self.x), move(self.y), self.n_context,
                      {k: move(v) for k, v in self.task.items()}, self.noise_std)
