"""Sparse linear regression (Garg et al. 2022; Chen, Zhao, Zou 2024 Section 2).

``x ~ N(0, I_d)``; ``w`` has ``s`` nonzero coordinates on a support drawn uniformly per
prompt; the nonzeros are ``N(0, 1)`` (``nonzero="gaussian"``, Garg et al.) or ``+-1/sqrt(s)``
with random signs (``nonzero="rademacher"``, so that ``||w|| = 1``, Chen et al.).
``correlation=zeta`` draws ``x ~ N(0, I + zeta 11^T)`` instead (Chen et al. Appendix G,
Fig. 11's non-orthogonal design).
The support is returned as a boolean mask ``prompt.task["support"]`` of shape (B, d).
"""
from __future__ import annotations

import torch

from ..validation import check_choice, check_float, check_int
from .base import TaskSampler


class SparseLinearRegression(TaskSampler):
    """Args: d; s in [1, d] nonzeros; noise_std; nonzero in {"gaussian", "rademacher"};
    correlation: zeta >= 0, the covariance is ``I + zeta 11^T``."""

    name = "sparse_linear"

    def __init__(self, d: int, s: int, noise_std: float = 0.0, nonzero: str = "gaussian",
                 correlation: float = 0.0):
        super().__init__(d, noise_std)
        self.s = check_int("s", s, minimum=1, maximum=self.d)
        self.nonzero = check_choice("nonzero", nonzero, {"gaussian", "rademacher"})
        self.correlation = check_float("correlation", correlation, minimum=0.0)

    def covariance(self) -> torch.Tensor:
        """``Sigma = I + zeta 11^T``, ``(d, d)`` float64."""
        return torch.eye(self.d, dtype=torch.float64) + self.correlation * torch.ones(
            self.d, self.d, dtype=torch.float64)

    def sample_x(self, batch_size, n_points, g):
        x = torch.randn(batch_size, n_points, self.d, generator=g)
        if self.correlation:  # a shared N(0, zeta) shift of every coordinate
            x = x + self.correlation ** 0.5 * torch.randn(batch_size, n_points, 1, generator=g)
        return x

    def sample_task(self, batch_size, g):
        order = torch.rand(batch_size, self.d, generator=g).argsort(dim=1)
        support = torch.zeros(batch_size, self.d, dtype=torch.bool)
        support.scatter_(1, order[:, : self.s], True)
        if self.nonzero == "gaussian":
            values = torch.randn(batch_size, self.d, generator=g)
        else:
            signs = torch.randint(0, 2, (batch_size, self.d), generator=g) * 2 - 1
            values = signs.float() / self.s ** 0.5
        return {"w": values * support, "support": support}

    def evaluate(self, x, task):
        return (x @ task["w"].to(x.dtype).unsqueeze(-1)).squeeze(-1)  # (B, T, d) @ (B, d, 1)

    def __repr__(self):
        return (f"SparseLinearRegression(d={self.d}, s={self.s}, noise_std={self.noise_std}, "
                f"nonzero={self.nonzero!r}, correlation={self.correlation})")
