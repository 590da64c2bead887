"""Gaussian-process tasks of Cheng, Chen, Sra (ICML 2024), Section 3.2, Example 7, App. H.1.

Covariates ``x = Sigma^{1/2} xi`` with ``xi`` uniform on the unit sphere and
``Sigma^{1/2} = U^T diag(1, 1, 0.5, 1.5, 1) U`` (so ``Sigma = U^T diag(1, 1, 0.25, 2.25, 1) U``,
the paper's; ``U`` a random orthogonal matrix from ``seed``; other d use 1 everywhere). Labels,
the query's included, are drawn jointly: ``Y | X ~ N(0, K_+(Xi))``, the kernel applied to the
whitened ``xi = Sigma^{-1/2} x`` and its Gram matrix eigenvalue-flipped (Definition 3.3), with a
``1e-8`` jitter for the rank-deficient linear kernel (the authors' code). Noiseless.
``prompt.task["xi"]`` holds the whitened covariates for the Bayes predictor.
"""
from __future__ import annotations

import torch

from ..kernels import KERNELS, flip, gram
from ..validation import check_choice, check_int
from .base import TaskSampler
from .lipschitz import sphere


class GPTask(TaskSampler):
    """Args: d; kernel in {"linear", "relu", "exp", "composite"}; sigma: ``"paper"`` (the
    diag(1, 1, 0.25, 2.25, 1) covariance, d = 5) or ``"identity"``; seed: draws U."""

    name = "gp"

    def __init__(self, d: int = 5, kernel: str = "exp", sigma: str = "paper", seed: int = 0):
        super().__init__(d, 0.0)
        self.kernel = check_choice("kernel", kernel, set(KERNELS))
        check_choice("sigma", sigma, {"paper", "identity"})
        root = torch.ones(self.d)
        if sigma == "paper":
            if self.d != 5:
                raise ValueError(f"d must be 5 for sigma='paper', got {self.d}")
            root = torch.tensor([1.0, 1.0, 0.5, 1.5, 1.0])
        g = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
        U, _ = torch.linalg.qr(torch.randn(self.d, self.d, generator=g, dtype=torch.float64))
        root = root.double()
        self.sqrt_sigma = U @ torch.diag(root) @ U.T          # symmetric Sigma^{1/2}, float64
        self.inv_sqrt_sigma = U @ torch.diag(1 / root) @ U.T

    def draw(self, streams, batch_size, n_points, d_active=None):
        xi = sphere(batch_size, n_points, self.d, streams.x).double()
        K = flip(gram(xi, xi, self.kernel)) + 1e-8 * torch.eye(n_points, dtype=torch.float64)
        evals, evecs = torch.linalg.eigh(K)
        root = evecs * evals.clamp(min=0).sqrt().unsqueeze(-2)
        z = torch.randn(batch_size, n_points, 1, generator=streams.task, dtype=torch.float64)
        y = (root @ z).squeeze(-1).float()
        x = (xi @ self.sqrt_sigma).float()
        return x, y, {"xi": xi.float()}

    def draw_runs(self, streams, batch_size, n_points, d_active=None):
        draws = [self.draw(st, batch_size, n_points) for st in streams]
        return torch.stack([d[0] for d in draws]), torch.stack([d[1] for d in draws])
