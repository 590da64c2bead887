"""Token layouts: how a :class:`~icl_core.prompts.Prompt` becomes the transformer's input.

**The one convention.** Tensors are batch first, tokens as rows: ``(B, tokens, features)``.
The papers write the embedding as a matrix whose *columns* are tokens,

.. math:: Z = \\begin{pmatrix} x_1 & \\cdots & x_n & x_{q} \\\\ y_1 & \\cdots & y_n & 0 \\end{pmatrix}
          \\in \\mathbb R^{(d+1)\\times(n+1)}

(Zhang et al. eq. 4, Cheng et al. eq. 3, Chen et al. Section 2, Collins et al. Section 2).
``stacked`` tokens are exactly the rows of ``Z^T``: ``Z = tokens.transpose(-1, -2)``
(:func:`to_columns` does it). The label is the **last** feature; the prediction is read
with a **plus** sign (papers that read ``-[Z]_{d+1,n+1}`` are converted in their chapter).

Two layouts:

* ``"stacked"``: token i is ``(x_i, y_i)`` (width d+1); query tokens are ``(x_q, 0)``.
  Only context tokens are keys (the mask ``diag(I_n, 0)`` of Cheng et al. and Chen et al.);
  pass ``query_is_key=True`` for Zhang et al.'s LSA, where the query column takes part.
  Predictions are read at the query tokens.
* ``"interleaved"``: Garg et al.'s ``x_1, y_1, x_2, y_2, ...`` with each ``y`` zero-padded to
  width d, ``[y, 0, ..., 0]``. Used with a causal mask; the prediction at ``x_i`` sees the
  ``i - 1`` examples before it, so one forward pass gives the whole error-vs-context curve.
"""
from __future__ import annotations

import torch

from .validation import check_choice


def to_columns(tokens: torch.Tensor) -> torch.Tensor:
    """``(B, T, D) -> (B, D, T)``: the papers' column-token matrix ``Z``."""
    return tokens.transpose(-1, -2)


def stacked_tokens(x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
    """``x (B, T, d), y (B, T) -> (B, T, d+1)`` with the labels of tokens ``>= n_context``
    (the queries) zeroed."""
    y_in = y.clone()
    y_in[:, n_context:] = 0.0
    return torch.cat([x, y_in.unsqueeze(-1)], dim=-1)


def interleaved_tokens(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x (B, T, d), y (B, T) -> (B, 2T, d)``: ``x_1, [y_1,0..0], x_2, ...`` (Garg et al.)."""
    B, T, d = x.shape
    y_tok = torch.zeros_like(x)
    y_tok[..., 0] = y
    return torch.stack([x, y_tok], dim=2).reshape(B, 2 * T, d)


class Layout:
    """A token layout. Build with :func:`make_layout`."""

    def __init__(self, kind: str = "interleaved", query_is_key: bool = False):
        self.kind = check_choice("layout", kind, {"stacked", "interleaved"})
        self.query_is_key = bool(query_is_key)

    def token_dim(self, d: int) -> int:
        """Width of a token for covariates of dimension ``d``."""
        return d + 1 if self.kind == "stacked" else d

    def tokens(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """``(B, T, d), (B, T) -> (B, S, token_dim)``."""
        if self.kind == "stacked":
            return stacked_tokens(x, y, n_context)
        return interleaved_tokens(x, y)

    def key_mask(self, n_tokens: int, n_context: int, causal: bool,
                 device=None) -> torch.Tensor | None:
        """Boolean ``(S, S)`` mask, ``True`` where query row i may attend to key column j;
        ``None`` when every token sees every token."""
        mask = None
        if causal:
            mask = torch.ones(n_tokens, n_tokens, dtype=torch.bool, device=device).tril()
        if self.kind == "stacked" and not self.query_is_key:
            keys = torch.arange(n_tokens, device=device) < n_context
            keys = keys.expand(n_tokens, n_tokens)
            mask = keys if mask is None else mask & keys
        return mask

    def predictions(self, out: torch.Tensor, n_context: int) -> torch.Tensor:
        """Per-token read-out ``(B, S)`` -> predictions: ``(B, T - n_context)`` at the
        queries (stacked) or ``(B, T)`` at every ``x`` token (interleaved)."""
        if self.kind == "stacked":
            return out[:, n_context:]
        return out[:, ::2]

    def targets(self, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """The labels the predictions are scored against, same shape as ``predictions``."""
        return y[:, n_context:] if self.kind == "stacked" else y

    def __repr__(self):
        return f"Layout({self.kind!r}, query_is_key={self.query_is_key})"
