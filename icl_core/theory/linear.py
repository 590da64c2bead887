"""Closed forms for Gaussian linear regression in context (the foundations chapter).

Setting: ``x_i, x_q ~ N(0, I_d)``, ``w ~ N(0, tau^2 I_d)``, ``y = <w, x> + sigma * eps``.
"Excess risk" is ``E[(y_hat - <w, x_q>)^2]``; the prediction error against the noisy
label adds ``sigma^2``. Risks are *not* divided by d here; plots divide by d (Garg et al.).
"""
from __future__ import annotations

import math

import torch

from ..validation import check_float, check_int


def ols_excess_risk(n: int, d: int, sigma: float, tau: float = 1.0) -> float:
    """Exact expected excess risk of (minimum-norm) OLS with ``n`` Gaussian examples.

    * ``n >= d + 2``: ``sigma^2 d / (n - d - 1)`` (inverse-Wishart mean
      ``E[(X^T X)^{-1}] = I / (n - d - 1)``).
    * ``n <= d - 2``: ``(1 - n/d) d tau^2 + sigma^2 n / (d - n - 1)`` (the unseen part of
      ``w`` plus the noise fitted by the minimum-norm interpolator).
    * ``n = 0``: ``d tau^2``. Otherwise (``|n - d| <= 1``) the expectation is infinite.
    """
    n = check_int("n", n, minimum=0)
    d = check_int("d", d, minimum=1)
    sigma = check_float("sigma", sigma, minimum=0.0)
    tau = check_float("tau", tau, minimum=0.0)
    if n == 0:
        return d * tau ** 2
    if n >= d + 2:
        return sigma ** 2 * d / (n - d - 1)
    if n <= d - 2:
        return (1 - n / d) * d * tau ** 2 + sigma ** 2 * n / (d - n - 1)
    return math.inf


def gaussian_posterior(x_ctx: torch.Tensor, y_ctx: torch.Tensor, sigma: float,
                       tau: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Posterior of ``w`` given the context: mean ``(B, d)`` and covariance ``(B, d, d)``,
    ``Sigma_post = (X^T X / sigma^2 + I / tau^2)^{-1}``, ``mu = Sigma_post X^T y / sigma^2``.
    The mean equals ridge regression with ``lam = sigma^2 / tau^2``. Needs ``sigma > 0``."""
    sigma = check_float("sigma", sigma, minimum=0.0, strict=True)
    tau = check_float("tau", tau, minimum=0.0, strict=True)
    X, y = x_ctx.to(torch.float64), y_ctx.to(torch.float64)
    eye = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device)
    cov = torch.linalg.inv(X.transpose(1, 2) @ X / sigma ** 2 + eye / tau ** 2)
    mean = (cov @ (X.transpose(1, 2) @ y.unsqueeze(-1))).squeeze(-1) / sigma ** 2
    return mean, cov


def bayes_excess_risk(x_ctx: torch.Tensor, sigma: float, tau: float = 1.0) -> torch.Tensor:
    """Per-prompt excess risk of the posterior mean for an isotropic query,
    ``tr(Sigma_post)``: ``(B, n, d) -> (B,)``. Averaging over prompts gives the Bayes risk."""
    _, cov = gaussian_posterior(x_ctx, torch.zeros(x_ctx.shape[:2]), sigma, tau)
    return cov.diagonal(dim1=-2, dim2=-1).sum(-1)
