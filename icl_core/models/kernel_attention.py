"""Stacked generalized attention of Cheng, Chen, Sra (ICML 2024), eqs. 2-4 and 26.

Tokens are rows ``z_j = (x_j, y_j)`` (the query's label slot 0). Layer l, head h computes

    Phi = h~(B x_i, C x_j)        for sources i <= n (context only) and every destination j
    x_j <- x_j + sum_h sum_i Phi_ij A x_i,      y_j <- y_j + sum_h r sum_i Phi_ij y_i

with ``h~`` in {"linear", "relu", "exp", "softmax"} (softmax over the n sources of each
destination), residuals, no LayerNorm, no MLP: the value-sparse parameterisation
``V = diag(A, r)`` of Assumption 4.4 (``fix_A=True`` keeps A = 0, as Theorem 4.5). The paper's
read-out ``TF = [Z]_{d+1, n+1}`` predicts ``-y``; this module returns the prediction
``y_hat = -TF`` (the library's plus-sign convention). Scaling: linear / relu / exp outputs are
divided by n (the authors' code; keeps parameters O(1)), softmax is not (it is normalised
already); pass ``normalize`` to override.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .base import InContextModel
from ..validation import check_choice, check_float, check_int

ACTIVATIONS = ("linear", "relu", "exp", "softmax")


EXP_CLAMP = 10.0


def _scores(S: torch.Tensor, activation: str) -> torch.Tensor:
    # S: (B, n, T) = (B x_i)^T (C x_j), sources i on dim 1
    if activation == "linear":
        return S
    if activation == "relu":
        return S.clamp(min=0)
    if activation == "exp":
        # overflow guard (the authors' code rescales Z instead): exact below EXP_CLAMP; above it
        # the gradient is zero, so KernelTransformer.clamped_share measures how often it acts
        return torch.exp(S.clamp(max=EXP_CLAMP))
    return torch.softmax(S, dim=1)


class KernelTransformer(InContextModel):
    """Args: d; n_layers; activations: one per head (e.g. ``["exp", "linear"]`` for Figure 4);
    fix_A: hold A = 0; init_std: Gaussian init of r, A, B, C (the authors' 0.1);
    normalize: divide by n (default: all but softmax)."""

    def __init__(self, d: int, n_layers: int = 3, activations=("relu",), fix_A: bool = False,
                 init_std: float = 0.1, normalize: bool | None = None):
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        L = check_int("n_layers", n_layers, minimum=1)
        self.activations = [check_choice("activation", a, set(ACTIVATIONS)) for a in activations]
        if not self.activations:
            raise ValueError("activations must name at least one head")
        H = len(self.activations)
        init_std = check_float("init_std", init_std, minimum=0.0)
        self.fix_A = bool(fix_A)
        self.normalize = [a != "softmax" for a in self.activations] if normalize is None \
            else [bool(normalize)] * H
        g = lambda *shape: nn.Parameter(init_std * torch.randn(*shape))
        self.r, self.B, self.C = g(L, H), g(L, H, d, d), g(L, H, d, d)
        self.A = None if fix_A else g(L, H, d, d)
        self.config = dict(d=d, n_layers=L, activations=self.activations, fix_A=fix_A,
                           init_std=init_std)

    def clamped_share(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> float:
        """The share of exp-head scores ``(B x_i)^T (C x_j)`` above ``EXP_CLAMP`` over every layer
        on these prompts: where the guard acts, the score is flat and passes no gradient (0.0 for
        a model without exp heads)."""
        scores = []
        with torch.no_grad():
            for _ in self.layers(x, y, n_context, scores=scores):
                pass
        if not scores:
            return 0.0
        return float(sum((S > EXP_CLAMP).sum().item() for S in scores) / sum(S.numel() for S in scores))

    def layers(self, x: torch.Tensor, y: torch.Tensor, n_context: int, query_labels: bool = False,
               scores: list | None = None):
        """Yield the label row after each layer: ``(B, T)`` tensors (for per-layer read-outs).

        ``query_labels=True`` starts the queries' label slots at their true labels instead of 0
        (the paper's Z-bar of Lemma A.1): no query is ever a source, so every later row differs
        from the masked run's only there, by exactly those labels."""
        n = n_context
        X, y = x.to(self.r.dtype), y.to(self.r.dtype)       # a float64 model computes in float64
        Y = y.clone() if query_labels else torch.cat([y[:, :n], torch.zeros_like(y[:, n:])], 1)
        for l in range(self.r.shape[0]):
            dX, dY = 0.0, 0.0
            for h, act in enumerate(self.activations):
                S = (X[:, :n] @ self.B[l, h].T) @ (X @ self.C[l, h].T).transpose(1, 2)   # (B, n, T)
                if scores is not None and act == "exp":
                    scores.append(S.detach())
                Phi = _scores(S, act)
                if self.normalize[h]:
                    Phi = Phi / n
                dY = dY + self.r[l, h] * (Phi.transpose(1, 2) @ Y[:, :n, None]).squeeze(-1)
                if self.A is not None:
                    dX = dX + Phi.transpose(1, 2) @ (X[:, :n] @ self.A[l, h].T)
            X, Y = X + dX, Y + dY
            yield Y

    def forward(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """``x (B, T, d), y (B, T)`` -> ``(B, T - n_context)``: ``y_hat = -[Z_L]_{d+1, query}``,
        in the parameters' dtype (``model.double()`` for deep exp stacks: a score spike that
        overflows float32 mid-training stays finite in float64, and training recovers)."""
        # x: (B, T, d); y: (B, T); every query is a destination, never a source
        check_int("n_context", n_context, minimum=1, maximum=x.shape[-2] - 1)
        for Y in self.layers(x, y, n_context):
            pass
        return -Y[:, n_context:]

    @classmethod
    def functional_gd(cls, d: int, step_sizes, activation: str = "exp") -> "KernelTransformer":
        """Proposition 3.1's construction: ``V_l = diag(0, -r'_l)``, ``B_l = C_l = I``, no 1/n,
        one head; with a kernel activation it computes functional GD with steps ``r'_l``."""
        steps = list(step_sizes)
        m = cls(d, len(steps), [activation], fix_A=True, init_std=0.0, normalize=False).double()
        with torch.no_grad():
            m.r.copy_(-torch.tensor(steps, dtype=torch.float64)[:, None])
            m.B.copy_(torch.eye(d, dtype=torch.float64).expand_as(m.B))
            m.C.copy_(torch.eye(d, dtype=torch.float64).expand_as(m.C))
        return m
