"""One attention unit reading the labels: Collins et al. (NeurIPS 2024), eq. ATTN with the
reparameterisation of their eq. 4.

With ``W_V`` reading only the label and ``W_K``, ``W_Q`` only the covariates, the prediction
for a query ``x`` from the context ``(x_i, y_i)_{i <= n}`` is

    softmax:  y_hat(x) = sum_i y_i exp(x_i^T M x) / sum_j exp(x_j^T M x)
    linear:   y_hat(x) = sum_i y_i x_i^T M x                  (Remark 2.2; no 1/n, it is in M)

Queries attend only to the n labelled context tokens, never to themselves or each other.
``M`` is parameterised as in the paper's experiments: tied ``M = W^T W`` (PSD, ``W_0 = 0.001 I``),
untied ``M = M_K^T M_Q``, or ``M`` itself.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .base import InContextModel
from ..validation import check_choice, check_float, check_int


class SoftmaxUnit(InContextModel):
    """Args: d; attention in {"softmax", "linear"}; param in {"tied", "untied", "M"};
    init_scale: the initial ``W`` (or ``M``) is ``init_scale * I``.

    Run-batched: with parameters stacked over K runs (``W`` of shape (K, d, d)) the same
    forward takes ``x (K, B, T, d)``; :func:`icl_core.training.train` uses this to train an
    ensemble of units without ``vmap``."""

    supports_runs = True

    def __init__(self, d: int, attention: str = "softmax", param: str = "tied",
                 init_scale: float = 1e-3):
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        self.attention = check_choice("attention", attention, {"softmax", "linear"})
        self.param = check_choice("param", param, {"tied", "untied", "M"})
        init_scale = check_float("init_scale", init_scale, minimum=0.0)
        eye = init_scale * torch.eye(d)
        if param == "untied":
            self.M_K, self.M_Q = nn.Parameter(eye.clone()), nn.Parameter(eye.clone())
        else:
            self.W = nn.Parameter(eye.clone())
        self.config = dict(d=d, attention=attention, param=param, init_scale=init_scale)

    @property
    def M(self) -> torch.Tensor:
        """The merged key-query matrix ``(d, d)``."""
        if self.param == "M":
            return self.W
        A, B = (self.W, self.W) if self.param == "tied" else (self.M_K, self.M_Q)
        # (K, d, d) when stacked: bmm, not the broadcasting matmul (fewer autograd nodes)
        return A.T @ B if A.dim() == 2 else torch.bmm(A.transpose(1, 2), B)

    def forward(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """``x (B, T, d), y (B, T)`` -> predictions ``(B, T - n_context)`` at the queries
        (with a leading run dimension K on the inputs, outputs and parameters if stacked)."""
        # x: (..., B, T, d) with ... = () or (K,); context x[..., :n, :], queries x[..., n:, :].
        # Written as explicit bmm over flattened prompts: no broadcasting, so the backward pass
        # has no reductions over broadcast dimensions (the step of a unit is overhead-bound).
        check_int("n_context", n_context, minimum=1, maximum=x.shape[-2] - 1)
        lead, d = x.shape[:-2], x.shape[-1]
        N, n, q = lead.numel(), n_context, x.shape[-2] - n_context        # N: prompts in all
        M = self.M                                                     # (d, d) or (K, d, d)
        xq = x[..., n:, :]
        if M.dim() == 2:
            a = xq.reshape(N * q, d) @ M                               # (N q, d)
        else:
            a = torch.bmm(xq.reshape(M.shape[0], -1, d), M)            # (K, B q, d)
        scores = torch.bmm(a.view(N, q, d), x[..., :n, :].reshape(N, n, d).transpose(1, 2))
        weights = scores.softmax(-1) if self.attention == "softmax" else scores  # (N, q, n)
        return torch.bmm(weights, y[..., :n].reshape(N, n, 1)).view(*lead, q)   # (.., B, q)
