"""The linear self-attention layer of Zhang, Frei, Bartlett (JMLR 2024), eq. 3:

    f_LSA(E; theta) = E + W^PV E (E^T W^KQ E) / rho,       W^PV, W^KQ in R^{(d+1) x (d+1)},

with the paper's column embedding E = [[x_1 .. x_N x_q], [y_1 .. y_N 0]] (eq. 4), no mask
(the query column is a key and a value too), rho = N, and the prediction the bottom-right
entry, y_hat = +[f_LSA(E)]_{d+1, N+1}. Written out (the E term contributes 0 because the
query's label slot is 0):

    y_hat = e_{d+1}^T W^PV (E E^T / rho) W^KQ (x_q; 0).

``icl_core`` keeps tokens as rows, so ``E E^T`` is ``tokens^T tokens`` (see
:mod:`icl_core.embed`). Several queries in one prompt are treated as separate prompts sharing
the context: each query's E holds the N context tokens and that query only.

Parameterisations: ``"full"`` trains both (d+1) x (d+1) matrices; ``"structured"`` trains only
the entries that affect the prediction on the invariant subspace of gradient flow,
U_11 = W^KQ_11 (d x d) and u_-1 = W^PV_{d+1,d+1}, the rest held at 0 (the spec's recommended
setting: the u_21 direction has ~100x the curvature and makes plain GD unstable).
"""
from __future__ import annotations

import torch
import torch.nn as nn

from .base import InContextModel
from ..validation import check_choice, check_float, check_int


class LSA(InContextModel):
    """Args: d; param in {"structured", "full"}; sigma and theta: Assumption 3's initial
    ``W^PV(0) = sigma e_{d+1} e_{d+1}^T``, ``W^KQ(0) = sigma [[Theta Theta^T, 0], [0, 0]]``
    (``theta`` a (d, d) matrix, normalised so ``||Theta Theta^T||_F = 1``; default I/sqrt(d));
    dtype: float32 to train, float64 for identities."""

    supports_runs = False

    def __init__(self, d: int, param: str = "structured", sigma: float = 0.1, theta=None,
                 dtype=torch.float32):
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        self.param = check_choice("param", param, {"structured", "full"})
        sigma = check_float("sigma", sigma, minimum=0.0)
        theta = torch.eye(d, dtype=torch.float64) if theta is None else \
            torch.as_tensor(theta, dtype=torch.float64)
        if theta.shape != (d, d):
            raise ValueError(f"theta must have shape (d, d) = ({d}, {d}), got {tuple(theta.shape)}")
        tt = theta @ theta.T
        tt = tt / torch.linalg.norm(tt)
        if param == "structured":
            self.U11 = nn.Parameter((sigma * tt).to(dtype))
            self.u = nn.Parameter(torch.tensor(sigma, dtype=dtype))
        else:
            kq = torch.zeros(d + 1, d + 1, dtype=torch.float64)
            kq[:d, :d] = sigma * tt
            pv = torch.zeros(d + 1, d + 1, dtype=torch.float64)
            pv[d, d] = sigma
            self.W_KQ, self.W_PV = nn.Parameter(kq.to(dtype)), nn.Parameter(pv.to(dtype))
        self.config = dict(d=d, param=param, sigma=sigma)

    @property
    def matrices(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(W_KQ, W_PV)``, both (d+1, d+1), in the paper's column convention."""
        if self.param == "full":
            return self.W_KQ, self.W_PV
        d = self.d
        kq = torch.zeros(d + 1, d + 1, dtype=self.U11.dtype, device=self.U11.device)
        kq[:d, :d] = self.U11
        pv = torch.zeros_like(kq)
        pv[d, d] = self.u
        return kq, pv

    def product(self) -> torch.Tensor:
        """``u_-1 * U_11`` (d, d): the preconditioner Theorem 4 says tends to Gamma^{-1}."""
        kq, pv = self.matrices
        return pv[self.d, self.d] * kq[: self.d, : self.d]

    def forward(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """``x (B, T, d), y (B, T)`` -> ``(B, T - n_context)``: each query predicted from the
        ``n_context`` labelled tokens and itself, rho = n_context."""
        # context tokens z_i = (x_i, y_i): (B, N, d+1); query tokens (x_q, 0): (B, q, d+1)
        n = check_int("n_context", n_context, minimum=1, maximum=x.shape[-2] - 1)
        W_KQ, W_PV = self.matrices
        W_KQ, W_PV = W_KQ.to(x.dtype), W_PV.to(x.dtype)
        z = torch.cat([x[:, :n], y[:, :n].unsqueeze(-1)], dim=-1)
        zq = torch.cat([x[:, n:], torch.zeros_like(y[:, n:]).unsqueeze(-1)], dim=-1)
        C = z.transpose(1, 2) @ z                                  # (B, d+1, d+1) = sum z z^T
        v = W_PV[self.d]                                           # last row of W^PV (d+1,)
        kq_zq = zq @ W_KQ.T                                        # (B, q, d+1) = W^KQ z_q
        ctx = ((kq_zq @ C.transpose(1, 2)) * v).sum(-1)            # v^T C W^KQ z_q
        own = (zq @ v) * (zq * kq_zq).sum(-1)                      # (v^T z_q)(z_q^T W^KQ z_q)
        return (ctx + own) / n

    @classmethod
    def from_matrices(cls, W_KQ, W_PV) -> "LSA":
        """A full LSA holding given (d+1, d+1) matrices (float64)."""
        W_KQ, W_PV = torch.as_tensor(W_KQ, dtype=torch.float64), torch.as_tensor(W_PV, dtype=torch.float64)
        m = cls(W_KQ.shape[0] - 1, param="full", dtype=torch.float64)
        with torch.no_grad():
            m.W_KQ.copy_(W_KQ)
            m.W_PV.copy_(W_PV)
        return m
