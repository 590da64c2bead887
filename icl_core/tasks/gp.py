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

from ..kernels import KERNELS, flipped_root, gram
from ..validation import check_choice, check_float, check_int
from .base import TaskSampler
from .lipschitz import sphere


def whitened_covariates(kind: str, batch_size: int, n_points: int, d: int, g) -> torch.Tensor:
    """The whitened covariates ``xi`` of the paper's examples, float64 ``(B, T, d)``:
    ``"sphere"`` uniform on the unit sphere (Example 7, the experiments), ``"gaussian"``
    N(0, I) (Example 4), ``"mixture"`` a per-prompt mean ``mu ~ N(0, I)`` plus N(0, I) noise,
    not i.i.d. across the prompt (Example 5)."""
    if kind == "sphere":
        return sphere(batch_size, n_points, d, g).double()
    z = torch.randn(batch_size, n_points, d, generator=g, dtype=torch.float64)
    if kind == "gaussian":
        return z
    return z + torch.randn(batch_size, 1, d, generator=g, dtype=torch.float64)


class GPTask(TaskSampler):
    """Args: d; kernel in {"linear", "relu", "exp", "composite"}; sigma: ``"paper"`` (the
    diag(1, 1, 0.25, 2.25, 1) covariance, d = 5) or ``"identity"``; covariates: ``"sphere"``,
    ``"gaussian"`` or ``"mixture"`` (:func:`whitened_covariates`); seed: draws U; beta: the exp
    kernel's ``exp(beta <u, w>)`` (the paper's eq. 11: 1; the authors' code: 1/2), exp only."""

    name = "gp"

    def __init__(self, d: int = 5, kernel: str = "exp", sigma: str = "paper", seed: int = 0,
                 covariates: str = "sphere", beta: float = 1.0):
        super().__init__(d, 0.0)
        self.kernel = check_choice("kernel", kernel, set(KERNELS))
        self.beta = check_float("beta", beta, minimum=0.0, strict=True)
        if self.beta != 1.0 and self.kernel != "exp":
            raise ValueError(f"beta applies to the exp kernel only, got beta={beta} with kernel={kernel!r}")
        self.covariates = check_choice("covariates", covariates, {"sphere", "gaussian", "mixture"})
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

    def gram(self, U: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """This task's kernel as a Gram-matrix function (:func:`~icl_core.kernels.gram`)."""
        return gram(U, W, self.kernel, self.beta)

    def draw(self, streams, batch_size, n_points, d_active=None):
        xi = whitened_covariates(self.covariates, batch_size, n_points, self.d, streams.x)
        root = flipped_root(self.gram(xi, xi), 1e-8)      # the authors' jitter
        z = torch.randn(batch_size, n_points, 1, generator=streams.task, dtype=torch.float64)
        y = (root @ z).squeeze(-1).float()
        x = (xi @ self.sqrt_sigma).float()
        return x, y, {"xi": xi.float()}


class ReluNetTask(TaskSampler):
    """Cheng et al. Example 8 (Garg et al.'s class): ``y = <theta2, relu(theta1 x)>`` with a fresh
    random network per prompt, ``theta1 (m, d)`` and ``theta2 (m,)`` i.i.d. N(0, 1); covariates
    from :func:`whitened_covariates` (Sigma = I). Given X the labels are not Gaussian, but their
    covariance is the degree-1 arc-cosine kernel
    ``m ||x|| ||x'|| (sin(phi) + (pi - phi) cos(phi)) / (2 pi)`` (:func:`relu_net_covariance`)."""

    name = "relu_net"

    def __init__(self, d: int = 5, m: int = 100, covariates: str = "sphere"):
        super().__init__(d, 0.0)
        self.m = check_int("m", m, minimum=1)
        self.covariates = check_choice("covariates", covariates, {"sphere", "gaussian", "mixture"})

    def sample_x(self, batch_size, n_points, g):
        return whitened_covariates(self.covariates, batch_size, n_points, self.d, g).float()

    def sample_task(self, batch_size, g):
        return {"theta1": torch.randn(batch_size, self.m, self.d, generator=g),
                "theta2": torch.randn(batch_size, self.m, generator=g)}

    def evaluate(self, x, task):
        hidden = torch.relu(x @ task["theta1"].to(x.dtype).transpose(1, 2))   # (B, T, m)
        return (hidden * task["theta2"].to(x.dtype)[:, None, :]).sum(-1)


def relu_net_covariance(x: torch.Tensor, x2: torch.Tensor, m: int) -> torch.Tensor:
    """``E[y(x) y(x')]`` for :class:`ReluNetTask`: ``(..., n, d), (..., k, d) -> (..., n, k)``."""
    nx, nx2 = x.norm(dim=-1), x2.norm(dim=-1)
    cos = (x @ x2.transpose(-1, -2)) / (nx[..., :, None] * nx2[..., None, :])
    phi = torch.arccos(cos.clamp(-1, 1))
    return m * nx[..., :, None] * nx2[..., None, :] * (torch.sin(phi) + (torch.pi - phi) * torch.cos(phi)) / (2 * torch.pi)
