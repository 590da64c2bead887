"""Chen, Zhao, Zou (NeurIPS 2024): preprocess-then-optimize for in-context sparse regression.

Conventions (the library's; the paper's differences are converted here and stated once):

* prompts are batch first, ``x (B, n+q, d)``, ``y (B, n+q)``; the first ``n_context`` points
  are labelled (the paper's n), the rest are queries (its q);
* Algorithm 1: ``r_hat = X^T y / n`` from the context only, ``x~ = diag(r_hat) x`` for every
  point (context and queries);
* GD runs on ``L(w) = (1/2n) sum_i (y_i - <w, x_i>)^2`` from ``w = 0`` (Proposition 4.2);
* excess risk ``E (yhat - y)^2 - sigma^2 = ||Sigma^{1/2}(w_eff - w*)||^2`` without the 1/2 of
  the paper's Section 5 (its appendix drops it too);
* ridge in the theory's normalised form ``(X^T X / n + lam I)^{-1} X^T y / n`` (Appendix F.2).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..validation import check_float, check_int


def _check_prompts(x, y, n_context):
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, n+q, d), got {tuple(x.shape)}")
    if y.shape != x.shape[:2]:
        raise ValueError(f"y must have shape (B, n+q) = {tuple(x.shape[:2])}, got {tuple(y.shape)}")
    return check_int("n_context", n_context, minimum=1, maximum=x.shape[1])


def correlations(x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
    """``r_hat_j = (1/n) sum_{i<=n} x_ij y_i``: ``(B, d)`` (Algorithm 1, line 2)."""
    n = _check_prompts(x, y, n_context)
    return (x[:, :n] * y[:, :n].unsqueeze(-1)).mean(1)


def preprocess(x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
    """Algorithm 1: ``x~_k = diag(r_hat) x_k`` for all ``n+q`` points, with ``r_hat`` from the
    first ``n_context`` points.

    Args:
        x: ``(B, n+q, d)``; y: ``(B, n+q)`` (query labels are never read);
        n_context: n, in [1, n+q].

    Returns:
        ``(B, n+q, d)`` preprocessed covariates.
    """
    return x * correlations(x, y, n_context).unsqueeze(1)


def gd_path(X: torch.Tensor, y: torch.Tensor, lr: float, steps) -> torch.Tensor:
    """Gradient descent from 0 on ``(1/2n)||y - X w||^2``, in closed form.

    With ``X^T X / n = V diag(lam) V^T``, ``w_t = V diag((1 - (1 - lr lam)^t) / lam) V^T X^T y / n``
    (``lr t`` where ``lam = 0``), so any step count costs one eigendecomposition (the spec's
    trick that makes 10^4-step curves instant).

    Args:
        X: ``(B, n, D)``; y: ``(B, n)``; lr: step size > 0;
        steps: an int K (returns steps 0..K) or a sequence of step counts.

    Returns:
        ``(len(steps), B, D)`` iterates (non-finite where GD diverged).
    """
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    ts = np.arange(check_int("steps", steps, minimum=0) + 1) if np.isscalar(steps) \
        else np.asarray(steps)
    if (ts < 0).any():
        raise ValueError(f"steps must be >= 0, got {ts.min()}")
    X, y = X.double(), y.double()
    n = X.shape[1]
    lam, V = torch.linalg.eigh(X.transpose(1, 2) @ X / n)          # (B, D), (B, D, D)
    lam = lam.clamp(min=0.0)
    b = (V.transpose(1, 2) @ (X.transpose(1, 2) @ y.unsqueeze(-1))).squeeze(-1) / n  # (B, D)
    t = torch.as_tensor(ts, dtype=torch.float64).view(-1, 1, 1)
    factor = torch.where(lam > 1e-12, (1 - (1 - lr * lam) ** t) / lam.clamp(min=1e-12),
                         lr * t)                                       # (T, B, D)
    return torch.einsum("tbk,bdk->tbd", factor * b, V)


def gd_iterative(X: torch.Tensor, y: torch.Tensor, lr: float, steps: int) -> torch.Tensor:
    """The same iterates by the explicit recursion ``w <- w + (lr/n) X^T (y - X w)``:
    ``(steps + 1, B, D)`` (the check of :func:`gd_path`)."""
    X, y = X.double(), y.double()
    n = X.shape[1]
    w = torch.zeros(X.shape[0], X.shape[2], dtype=torch.float64)
    out = [w]
    for _ in range(check_int("steps", steps, minimum=0)):
        w = w + lr / n * (X.transpose(1, 2) @ (y - (X @ w.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)).squeeze(-1)
        out.append(w)
    return torch.stack(out)
