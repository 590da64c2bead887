"""A small multi-head transformer for in-context regression, in one file.

read-in (Linear token_dim -> d_model) -> L blocks -> [final LayerNorm] -> read-out
(Linear d_model -> 1), with no positional encoding. A block is

    pre-norm:  h = h + Attn(LN(h));  h = h + MLP(LN(h))      (GPT-2, Garg et al.)
    post-norm: h = LN(h + Attn(h));  h = LN(h + MLP(h))      (original transformer)
    none:      h = h + Attn(h);      h = h + MLP(h)

Attention is softmax (``torch.nn.functional.scaled_dot_product_attention``) or linear:
``out_i = (1/|K_i|) sum_{j in K_i} <q_i, k_j> v_j`` with ``K_i`` the keys token i may see
(the 1/n normalisation of Zhang et al. and Cheng et al.). ``d_mlp=0`` drops the MLP.
``causal=True`` gives a decoder (GPT-2 style), ``False`` an encoder. Garg et al.'s standard
model is ``Transformer(d=20, d_model=256, n_layers=12, n_heads=8)`` on the interleaved layout.

For Chen et al.'s analyses each block's attention has a ``head_mask`` buffer (one factor per
head on its slice of the concatenated output, before the output projection; saved with the
weights, so a pruned model stays pruned) and ``hidden_states()`` returns the residual stream
after the read-in and after every block (:mod:`icl_core.head_analysis`).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..embed import Layout
from .base import InContextModel
from ..validation import check_choice, check_int


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, kind: str):
        super().__init__()
        self.n_heads, self.kind = n_heads, kind
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        # (H,) multiplier of each head's slice of the concatenated output, before ``proj``
        # (Chen et al. Section 3: 0 masks / prunes a head). A buffer: saved with the weights.
        self.register_buffer("head_mask", torch.ones(n_heads))

    def forward(self, h, mask, is_causal=False):
        # h: (B, S, D); mask: (S, S) bool, True = may attend, or None; is_causal: mask is tril
        B, S, D = h.shape
        q, k, v = self.qkv(h).view(B, S, 3, self.n_heads, D // self.n_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B, H, S, Dh)
        if self.kind == "softmax":
            if is_causal:  # the fused causal kernel, no (S, S) mask materialised
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, H, S, S)
            if mask is not None:
                scores = scores * mask / mask.sum(-1, keepdim=True).clamp(min=1)
            else:
                scores = scores / S
            out = scores @ v
        out = out * self.head_mask.to(out.dtype).view(-1, 1, 1)  # (B, H, S, Dh)
        return self.proj(out.transpose(1, 2).reshape(B, S, D))


class Block(nn.Module):
    def __init__(self, d_model, n_heads, attention, norm, d_mlp):
        super().__init__()
        self.norm = norm
        self.attn = MultiHeadAttention(d_model, n_heads, attention)
        self.ln1 = nn.LayerNorm(d_model) if norm != "none" else nn.Identity()
        self.ln2 = nn.LayerNorm(d_model) if norm != "none" and d_mlp else nn.Identity()
        self.mlp = (nn.Sequential(nn.Linear(d_model, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_model))
                    if d_mlp else None)

    def forward(self, h, mask, is_causal=False):
        # h: (B, S, D)
        if self.norm == "post":
            h = self.ln1(h + self.attn(h, mask, is_causal))
            return self.ln2(h + self.mlp(h)) if self.mlp is not None else h
        h = h + self.attn(self.ln1(h), mask, is_causal)
        return h + self.mlp(self.ln2(h)) if self.mlp is not None else h


class Transformer(InContextModel):
    """Small multi-head transformer for in-context regression.

    Args:
        d: covariate dimension of the prompts it reads.
        d_model: width (divisible by ``n_heads``).
        n_layers: number of blocks L >= 1.
        n_heads: heads per block.
        attention: ``"softmax"`` or ``"linear"``.
        norm: ``"pre"``, ``"post"`` or ``"none"`` (LayerNorm placement).
        d_mlp: MLP hidden width; ``None`` means ``4 * d_model``, ``0`` no MLP.
        layout: ``"interleaved"`` (Garg et al.) or ``"stacked"`` (see :mod:`icl_core.embed`).
        causal: decoder mask; default ``True`` for interleaved, ``False`` for stacked.
        query_is_key: stacked layout only: let query tokens be keys too.
        positions: learned absolute positional embeddings for up to this many tokens, added
            to the read-in (GPT-2's, which Zhang et al. conjecture cause the error spike past
            the training length); 0 (default): none, the causal mask alone orders the tokens.
    """

    def __init__(self, d: int, d_model: int = 64, n_layers: int = 3, n_heads: int = 2,
                 attention: str = "softmax", norm: str = "pre", d_mlp: int | None = None,
                 layout: str = "interleaved", causal: bool | None = None,
                 query_is_key: bool = False, positions: int = 0):
        super().__init__()
        self.d = check_int("d", d, minimum=1)
        d_model = check_int("d_model", d_model, minimum=1)
        n_heads = check_int("n_heads", n_heads, minimum=1)
        if d_model % n_heads:
            raise ValueError(f"d_model must be divisible by n_heads={n_heads}, got {d_model}")
        check_int("n_layers", n_layers, minimum=1)
        check_choice("attention", attention, {"softmax", "linear"})
        self.norm = check_choice("norm", norm, {"pre", "post", "none"})
        d_mlp = 4 * d_model if d_mlp is None else check_int("d_mlp", d_mlp, minimum=0)
        self.layout = Layout(layout, query_is_key)
        self.causal = (layout == "interleaved") if causal is None else bool(causal)
        if layout == "interleaved" and not self.causal:
            raise ValueError("causal must be True for the interleaved layout (the labels of "
                             "later points would otherwise leak into earlier predictions)")
        self.config = dict(d=d, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                           attention=attention, norm=norm, d_mlp=d_mlp, layout=layout,
                           causal=self.causal, query_is_key=query_is_key)
        positions = check_int("positions", positions, minimum=0)
        if positions:       # only then in the config: checkpoints of models without stay valid
            self.config["positions"] = positions
        self.read_in = nn.Linear(self.layout.token_dim(d), d_model)
        self.pos = nn.Embedding(positions, d_model) if positions else None
        self.blocks = nn.ModuleList(Block(d_model, n_heads, attention, norm, d_mlp)
                                    for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model) if norm == "pre" else nn.Identity()
        self.read_out = nn.Linear(d_model, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """Predictions for a batch of prompts.

        Args:
            x: ``(B, T, d)`` covariates; y: ``(B, T)`` labels (query labels are never seen).
            n_context: number of labelled context points (>= 1).

        Returns:
            ``(B, T - n_context)`` predictions at the queries (stacked layout) or ``(B, T)``
            predictions at every point from the points before it (interleaved layout).
        """
        # x: (B, T, d), y: (B, T) -> h (B, S, d_model) -> out (B, S)
        h = self.hidden_states(x, y, n_context)[-1]
        out = self.read_out(self.ln_f(h)).squeeze(-1)
        return self.layout.predictions(out, n_context)

    def hidden_states(self, x: torch.Tensor, y: torch.Tensor, n_context: int) -> list[torch.Tensor]:
        """The residual stream after the read-in and after each block: ``L + 1`` tensors
        ``(B, S, d_model)`` ("input, 1, ..., L" of Chen et al.'s per-layer probes)."""
        # x: (B, T, d), y: (B, T)
        if x.shape[-1] != self.d:
            raise ValueError(f"x has d={x.shape[-1]} but the model was built for d={self.d}")
        if self.layout.kind == "stacked":
            check_int("n_context", n_context, minimum=1, maximum=x.shape[1])
        tokens = self.layout.tokens(x, y, n_context)
        # a purely causal mask goes to SDPA as is_causal (its fused kernel) instead of a tensor
        is_causal = self.causal and self.layout.kind == "interleaved"
        mask = None if is_causal and self.config["attention"] == "softmax" else \
            self.layout.key_mask(tokens.shape[1], n_context, self.causal, tokens.device)
        h = self.read_in(tokens)                                    # (B, S, d_model)
        if self.pos is not None:
            S = tokens.shape[1]
            if S > self.pos.num_embeddings:
                raise ValueError(f"the prompt has {S} tokens but the model has positions for "
                                 f"{self.pos.num_embeddings} (positions={self.pos.num_embeddings})")
            h = h + self.pos.weight[:S]
        states = [h]
        for block in self.blocks:
            states.append(block(states[-1], mask, is_causal))
        return states

    @property
    def head_masks(self) -> list[torch.Tensor]:
        """Each block's ``(n_heads,)`` head mask (1 = on, 0 = masked), as live buffers."""
        return [block.attn.head_mask for block in self.blocks]

    def target_of(self, y: torch.Tensor, n_context: int) -> torch.Tensor:
        """The labels ``forward(x, y, n_context)`` is scored against, same shape."""
        return self.layout.targets(y, n_context)
