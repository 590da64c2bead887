"""Figures of the Chen, Zhao, Zou chapter (recipes ``chen.*`` and the analyses of
:mod:`icl_core.head_analysis`). The trained-model figures take the analysis results (dicts of
arrays) rather than a recipe result, since one set of trained models feeds several figures."""
from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np

from ..long_runs import machine_kinds
from ..plotting import MAX_WIDTH_IN, result_label
from ..results import Result

GD, PREGD = "#1f4e9c", "#c0392b"


def figure2c(result: Result, sigmas, label: str = ""):
    """``chen.figure2c``: excess risk of GD and pre-GD against the number of GD steps, one
    panel per noise level (d = 16, s = 4, n = 10)."""
    label = label or result_label(result)
    a, steps = result.arrays, result.arrays["steps"]
    cols = min(len(sigmas), 3)
    rows = -(-len(sigmas) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(MAX_WIDTH_IN, 3.0 * rows), squeeze=False)
    for ax in axes.flat[len(sigmas):]:
        ax.set_visible(False)
    for ax, sigma in zip(axes.flat, sigmas):
        key = f"sigma{sigma:g}"
        ax.plot(steps[1:], a[f"sparse/gd/{key}"][1:], color=GD, label="gd")
        ax.plot(steps[1:], a[f"sparse/pre-gd/{key}"][1:], color=PREGD, label="pre-gd")
        ax.set_xscale("log"); ax.set_xlabel("GD steps"); ax.set_title(f"sigma = {sigma}", fontsize=9)
        ax.set_ylim(0, 4.2)
    for ax in axes[:, 0]:
        ax.set_ylabel("excess risk")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"Figure 2c: d = 16, s = 4, n = 10, {result.config['tasks']} tasks ({label})", fontsize=10)
    fig.tight_layout()
    return fig


def correlated(zetas, gd, pregd):
    """Best excess risk of GD and pre-GD under the correlated designs I + zeta 11^T."""
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(zetas, gd, "s-", color=GD, label="gd")
    ax.plot(zetas, pregd, "o-", color=PREGD, label="pre-gd")
    ax.set_xlabel("zeta"); ax.set_ylabel("best excess risk"); ax.legend(fontsize=8); ax.set_ylim(0, 2)
    ax.set_title("x ~ N(0, I + zeta 11^T), n = 10, sigma = 0.1", fontsize=9)
    fig.tight_layout()
    return fig


def training_losses(result: Result, label: str = ""):
    """``chen.train``: training loss of each (unpruned) model, one point per 100 steps."""
    label = label or result_label(result)
    fig, ax = plt.subplots(figsize=(6, 3))
    for name in result.metrics["models"]:
        if not name.endswith("pruned"):
            loss = result.arrays[f"loss/{name}"]
            ax.plot(np.arange(len(loss)) * 100, loss, "o-", label=name)
    ax.set_xlabel("step"); ax.set_ylabel("training loss (mean of 100 steps)"); ax.legend(fontsize=8)
    ax.set_title(f"training ({label})", fontsize=9)
    fig.tight_layout()
    return fig


def figure1b(ns, curves: dict, baselines: Result, depth: int, label: str):
    """Figure 1b: excess risk against n for the trained models of one depth, with OLS, ridge
    and Lasso (each at its best grid value; OLS clipped at 5 as in the paper)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, c in (("ols", "0.6"), ("ridge", "0.3"), ("lasso", "#2a9d4b")):
        ax.plot(baselines.arrays["ns"], np.minimum(baselines.arrays[f"{k}/sigma0.1"], 5), "--", color=c, label=k)
    for name, c in curves.items():
        if f"_L{depth}_" in name:
            ax.plot(ns, c, "o-", ms=3, label=name)
    ax.set_ylim(0, 5); ax.set_xlabel("in-context examples n"); ax.set_ylabel("excess risk")
    ax.set_title(f"Figure 1b at {label}", fontsize=9); ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def head_weights(W, title: str, ax=None):
    """Figure 1c / 4: a layer x head heat map of head weights, values printed."""
    W = np.asarray(W)
    L, H = W.shape
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(4.5, 3.6))
    im = ax.imshow(W, origin="lower", cmap="viridis", vmin=0, vmax=max(0.7, float(np.nanmax(W))))
    ax.set_xticks(range(H), [str(j + 1) for j in range(H)]); ax.set_yticks(range(L), [str(i + 1) for i in range(L)])
    ax.set_xlabel("head"); ax.set_ylabel("layer"); plt.colorbar(im, ax=ax)
    for i in range(L):
        for j in range(H):
            ax.text(j, i, f"{W[i, j]:.2f}", ha="center", va="center", fontsize=7, color="w")
    ax.set_title(title, fontsize=8)
    if own:
        fig.tight_layout()
        return fig
    return ax.figure


def probes(risks_by_model: dict, title: str, ax=None):
    """Figure 1d / 5-8: per-layer probe excess risk ("input", then after each block)."""
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(6, 3.6))
    L = len(next(iter(risks_by_model.values()))) - 1
    for name, risks in risks_by_model.items():
        ax.plot(range(L + 1), risks, "o-", label=name)
    ax.set_xticks(range(L + 1), ["input"] + [str(i) for i in range(1, L + 1)])
    ax.set_xlabel("layer"); ax.set_ylabel("probe excess risk"); ax.set_ylim(bottom=0); ax.legend(fontsize=7)
    ax.set_title(title, fontsize=8)
    if own:
        fig.tight_layout()
        return fig
    return ax.figure


def figure2b(curves: dict, lrs: dict, title: str):
    """Figure 2b: P-probing, excess risk of GD on the first block's query features."""
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for name, c in curves.items():
        ax.plot(range(len(c)), c, label=f"{name} (lr {lrs[name]:g})")
    ax.set_xlabel("GD steps"); ax.set_ylabel("excess risk"); ax.legend(fontsize=7); ax.set_ylim(0, 5)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return fig


def pieces_analysis(values: dict, label: str):
    """Figs. 1c, 1d and 2b on the paper-scale pieces' newest state: the h = 4 model's head
    weights (left), the per-layer probes of h = 4 and h = 1 (middle; no pruned model: the paper
    fine-tunes it 60,000 steps), and P-probing (right). ``values``: what
    :func:`icl_core.recipes.chen.pieces_records` returns."""
    fig, axes = plt.subplots(1, 3, figsize=(MAX_WIDTH_IN, 3.6), gridspec_kw={"width_ratios": [1, 1.1, 1.3]})
    head_weights(values["pieces_fig1c_weights"], "Fig. 1c: head weights, h = 4", ax=axes[0])
    probes(values["pieces_probes"], "Fig. 1d: per-layer probes (no pruned model)", ax=axes[1])
    for name, c in values["pieces_pprobe"].items():
        axes[2].plot(range(len(c)), c, label=f"{name} (lr {values['pieces_pprobe_lr'][name]:g})")
    axes[2].set_xlabel("GD steps"); axes[2].set_ylabel("excess risk"); axes[2].set_ylim(0, 5)
    axes[2].legend(fontsize=7); axes[2].set_title("Fig. 2b: P-probing the first layer", fontsize=8)
    fig.suptitle(label, fontsize=9)
    fig.tight_layout()
    return fig


def depth_grid(depths, err_by_heads: dict, ridge: float, avg_weights: dict, probes_by_depth: dict, label: str):
    """Figures 3-8 reduced: error at n = 10 against depth per head count (with ridge), and per
    depth the sorted, averaged head weights (top) and the per-layer probes (bottom)."""
    fig, axes = plt.subplots(2, len(depths) + 1, figsize=(min(4.2 * (len(depths) + 1), MAX_WIDTH_IN), 7.2), squeeze=False)
    for (h, vals), c in zip(err_by_heads.items(), (GD, PREGD, "#2a9d4b")):
        axes[0, 0].plot(depths, vals, "o-", color=c, label=f"h = {h}")
    axes[0, 0].axhline(ridge, color="0.3", ls="--", label="ridge")
    axes[0, 0].set_xticks(depths); axes[0, 0].set_xlabel("layers L"); axes[0, 0].set_ylabel("excess risk at n = 10")
    axes[0, 0].set_title("Fig. 3 (reduced): error vs heads", fontsize=9); axes[0, 0].legend(fontsize=8)
    axes[1, 0].axis("off")
    for j, Ld in enumerate(depths, start=1):
        W = np.asarray(avg_weights[Ld])
        H = W.shape[1]
        axes[0, j].imshow(W, origin="lower", cmap="viridis", vmin=0, vmax=0.8)
        axes[0, j].set_xticks(range(H), [str(k + 1) for k in range(H)])
        axes[0, j].set_yticks(range(Ld), [str(k + 1) for k in range(Ld)])
        axes[0, j].set_xlabel("head rank"); axes[0, j].set_ylabel("layer")
        axes[0, j].set_title(f"Fig. 4 (reduced): L = {Ld}, sorted average", fontsize=8)
        probes(probes_by_depth[Ld], f"Figs. 5-8 (reduced): L = {Ld}", ax=axes[1, j])
    fig.suptitle(label, fontsize=10)
    fig.tight_layout()
    return fig


def piece_devices(pieces: dict) -> str:
    """The machine kinds the pieces of ``pieces`` (label -> :func:`long_runs.load_state`) were
    trained on, in words ("GPU", "CPU", "GPU and CPU"; :func:`long_runs.machine_kinds`)."""
    return machine_kinds([p for st in pieces.values() for p in st["progress"]["pieces"]])


def paper_pieces(pieces: dict, what: str = "paper-scale encoders, L = 4", where: str | None = None):
    """Encoders trained in pieces (:mod:`icl_core.long_runs`): training loss (1,000-step
    means) with a grey line where each piece resumed. ``pieces``: heads (or a label) ->
    :func:`long_runs.load_state`; ``what`` titles the panel; ``where``: the machine kinds named in
    the axis label (None: read from the pieces' provenance, :func:`piece_devices`)."""
    where = piece_devices(pieces) if where is None else where
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    name = {h: f"h = {h}" if isinstance(h, int) else str(h) for h in pieces}
    for h, st in pieces.items():
        loss = st["losses"][:, 0]
        k = len(loss) // 1000 * 1000
        ax.semilogy(np.arange(k // 1000) * 1000 + 500, loss[:k].reshape(-1, 1000).mean(1), label=name[h])
        for p in st["progress"]["pieces"][1:]:
            ax.axvline(p["from_step"], color="0.8", lw=0.8)
    ax.set_xlabel(f"training step (grey: where a piece resumed; pieces on {where})"); ax.set_ylabel("training loss (1,000-step means)")
    totals = {st["progress"]["pieces"][-1]["steps_total"] for st in pieces.values()}
    if len(totals) == 1:
        steps = ", ".join(f"{st['step']:,} ({name[h]})" for h, st in pieces.items())
        title = f"{what}: {steps} of {totals.pop():,} steps"
    else:
        steps = ", ".join(f"{st['step']:,} of {st['progress']['pieces'][-1]['steps_total']:,} ({name[h]})"
                          for h, st in pieces.items())
        title = f"{what}: steps {steps}"
    ax.set_title("\n".join(textwrap.wrap(title, 95)), fontsize=9)   # many runs: wrapped, so the figure keeps its width
    ax.legend(); fig.tight_layout()
    return fig
