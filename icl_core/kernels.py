"""Kernels of Cheng, Chen, Sra (ICML 2024), eq. 11 and Figure 4, as Gram-matrix functions.

``gram(U, W, kind)`` takes ``U (..., n, d)`` and ``W (..., m, d)`` and returns the
``(..., n, m)`` matrix ``K(u_i, w_j)``:

* ``"linear"``: ``<u, w>``; ``"relu"``: ``relu(<u, w>)`` (not positive semi-definite);
* ``"exp"``: ``exp(beta <u, w>)`` (the paper's beta = 1; the authors' code uses 1/2);
* ``"composite"`` (Figure 4, the paper's formula, d >= 5):
  ``(u1 w1 + u2 w2)/2 + exp((u3 w3 + u4 w4 + u5 w5)/2)/2``.

``flip(K)`` is the paper's K_+ (Definition 3.3): the symmetric matrix with the eigenvalues
replaced by their absolute values, so that labels ``N(0, K_+)`` exist for any kernel.
"""
from __future__ import annotations

import torch

from .validation import check_choice

KERNELS = ("linear", "relu", "exp", "composite")


def gram(U: torch.Tensor, W: torch.Tensor, kind, beta: float = 1.0) -> torch.Tensor:
    """``K(u_i, w_j)`` for ``U (..., n, d)``, ``W (..., m, d)`` -> ``(..., n, m)``; ``kind`` is
    one of :data:`KERNELS` or a callable ``(U, W) -> (..., n, m)``."""
    if callable(kind):
        return kind(U, W)
    check_choice("kernel", kind, set(KERNELS))
    if U.shape[-1] != W.shape[-1]:
        raise ValueError(f"kernel inputs must have the same dimension, got {U.shape[-1]} and {W.shape[-1]}")
    if kind == "composite":
        if U.shape[-1] < 5:
            raise ValueError(f"the composite kernel needs d >= 5, got d={U.shape[-1]}")
        lin = U[..., :2] @ W[..., :2].transpose(-1, -2)
        return 0.5 * lin + 0.5 * torch.exp(0.5 * U[..., 2:5] @ W[..., 2:5].transpose(-1, -2))
    inner = U @ W.transpose(-1, -2)
    if kind == "linear":
        return inner
    if kind == "relu":
        return inner.clamp(min=0)
    return torch.exp(beta * inner)


def _abs_eigh(K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(|Lambda|, Q)`` of the symmetrised ``K = Q Lambda Q^T`` (batched)."""
    evals, evecs = torch.linalg.eigh((K + K.transpose(-1, -2)) / 2)
    return evals.abs(), evecs


def flip(K: torch.Tensor) -> torch.Tensor:
    """``K_+ = Q |Lambda| Q^T`` for a symmetric ``K = Q Lambda Q^T`` (batched)."""
    evals, evecs = _abs_eigh(K)
    return (evecs * evals.unsqueeze(-2)) @ evecs.transpose(-1, -2)


def flipped_root(K: torch.Tensor, jitter: float) -> torch.Tensor:
    """``R`` with ``R R^T = K_+ + jitter I``: ``(..., T, T) -> (..., T, T)``, the map from
    i.i.d. N(0, 1) draws to GP values with covariance ``K_+`` (Definition 3.3) plus a jitter.
    One eigendecomposition: ``K_+ + jitter I = Q (|Lambda| + jitter) Q^T`` (:func:`flip`
    followed by a second ``eigh`` would recompute the same ``Q``)."""
    evals, evecs = _abs_eigh(K)
    return evecs * (evals + jitter).sqrt().unsqueeze(-2)
