"""The theory architecture of Chen, Zhao, Zou (2024), eq. (2.2): linear attention only, a
head count per layer, explicit weights.

In the paper's column notation (``H`` is ``d_hid x m``, one column per token)

    H^(i) = W_1^(i) ( H^(i-1) + Concat_j [ V_j M K_j^T Q_j ] ),   M = diag(I_n, 0),

with ``V_j = W_V_j H`` etc. (``W_* in R^{(d_hid/h) x d_hid}``), an embedding ``W_E`` of the
``(x_i, y_i)`` tokens (query labels 0) and a read-out ``W_O`` at the query tokens. No softmax,
no LayerNorm, no bias. The library holds tokens as rows, ``(B, m, d_hid)``, so a head computes
``out_t = sum_{k <= n} v_k <k_k, q_t>`` for every token t.

``normalize="1/n"`` divides each head's output by the number of context tokens (the
convention of Zhang et al. and Cheng et al.); the paper's ``"none"`` folds that 1/n into
``W_K`` (layer 1) or ``W_V`` (GD layers) instead, which ties its weights to one n.
"""
from __future__ import annotations

import torch
import torch.nn as nn

from ..embed import stacked_tokens
from ..validation import check_choice, check_int
from .base import InContextModel


class MultiHeadLinearTransformer(InContextModel):
    """Eq. (2.2) with explicit weights.

    Args:
        d: covariate dimension; d_hid: hidden width;
        heads: heads per layer, e.g. ``[d, 1, 1]`` (each must divide ``d_hid``);
        normalize: ``"none"`` (the paper) or ``"1/n"``.

    Parameters (all zero at construction; set them or use
    :func:`icl_core.theory.chen.constructed_transformer`): ``W_E (d_hid, d+1)``, per layer
    ``W_Q, W_K, W_V (h, d_hid/h, d_hid)`` and ``W_1 (d_hid, d_hid)``, ``W_O (d_hid,)``.
    """

    def __init__(self, d: int, d_hid: int, heads: list[int], normalize: str = "none",
                 dtype=torch.float64):
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        self.d_hid = check_int("d_hid", d_hid, minimum=1)
        if not heads:
            raise ValueError("heads must list at least one layer's head count")
        for i, h in enumerate(heads):
            check_int(f"heads[{i}]", h, minimum=1, maximum=d_hid)
            if d_hid % h:
                raise ValueError(f"heads[{i}]={h} must divide d_hid={d_hid}")
        self.heads = list(heads)
        self.normalize = check_choice("normalize", normalize, {"none", "1/n"})
        z = lambda *shape: nn.Parameter(torch.zeros(*shape, dtype=dtype))  # noqa: E731
        self.W_E = z(d_hid, d + 1)
        self.W_Q = nn.ParameterList(z(h, d_hid // h, d_hid) for h in heads)
        self.W_K = nn.ParameterList(z(h, d_hid // h, d_hid) for h in heads)
        self.W_V = nn.ParameterList(z(h, d_hid // h, d_hid) for h in heads)
        self.W_1 = nn.ParameterList(z(d_hid, d_hid) for _ in heads)
        self.W_O = z(d_hid)
        for i, h in enumerate(heads):
            self.register_buffer(f"head_mask_{i}", torch.ones(h, dtype=dtype))

    @property
    def head_masks(self) -> list[torch.Tensor]:
        """Each layer's ``(h,)`` head mask (1 = on, 0 = masked), as live buffers."""
        return [getattr(self, f"head_mask_{i}") for i in range(len(self.heads))]

    def layer(self, i: int, H: torch.Tensor, n_context: int) -> torch.Tensor:
        """``TF_i``: ``(B, m, d_hid) -> (B, m, d_hid)``."""
        # H: (B, m, D); q, k, v: (B, h, m, D/h)
        q = torch.einsum("hed,bmd->bhme", self.W_Q[i], H)
        k = torch.einsum("hed,bmd->bhme", self.W_K[i], H[:, :n_context])
        v = torch.einsum("hed,bmd->bhme", self.W_V[i], H[:, :n_context])
        out = v.transpose(-1, -2) @ (k @ q.transpose(-1, -2))       # (B, h, D/h, m): V M K^T Q
        if self.normalize == "1/n":
            out = out / n_context
        out = out * self.head_masks[i].view(1, -1, 1, 1)
        B, h, e, m = out.shape
        concat = out.permute(0, 3, 1, 2).reshape(B, m, h * e)        # (B, m, D)
        return (H + concat) @ self.W_1[i].T

    def hidden_states(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> list[torch.Tensor]:
        """``[W_E(E), H^(1), ..., H^(L)]``, each ``(B, n+q, d_hid)``."""
        # x: (B, T, d), y: (B, T)
        if x.shape[-1] != self.d:
            raise ValueError(f"x has d={x.shape[-1]} but the model was built for d={self.d}")
        check_int("n_context", n_context, minimum=1, maximum=x.shape[1])
        E = stacked_tokens(x.to(self.W_E.dtype), y.to(self.W_E.dtype), n_context)  # (B, T, d+1)
        states = [E @ self.W_E.T]
        for i in range(len(self.heads)):
            states.append(self.layer(i, states[-1], n_context))
        return states

    def forward(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """Predictions ``W_O . H^(L)`` at the query tokens: ``(B, T - n_context)``."""
        return self.hidden_states(x, y, n_context)[-1][:, n_context:] @ self.W_O
