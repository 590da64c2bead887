"""Figures of the synthesis chapter (recipe ``synthesis.compare``)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import MAX_WIDTH_IN, result_label
from ..results import Result
from ..theory.synthesis import FAMILIES, MECHANISMS

COL = {"lsa": "#1f4e9c", "softmax": "#d9822b", "multihead": "#c0392b", "kernel": "#2a9d4b"}


def error_curves(result: Result, label: str = ""):
    """Normalised error against n per family: each mechanism trained (solid) and constructed
    (dashed), with ridge, Lasso and the GP posterior; grey: the training n."""
    label = label or result_label(result)
    A, ns, n_train = result.arrays, list(result.arrays["ns"]), result.config["n_train"]
    fig, grid = plt.subplots(2, 2, figsize=(MAX_WIDTH_IN, 7.2))
    axes = list(grid.flat)                   # one panel per family (four)
    for ax, fam in zip(axes, FAMILIES):
        for mech in MECHANISMS:
            ax.plot(ns, A[f"{fam}/trained {mech}"], "o-", color=COL[mech], label=f"trained {mech}")
            ax.plot(ns, A[f"{fam}/constructed {mech}"], "--", color=COL[mech], alpha=0.8, label=f"constructed {mech}")
        for ref, st in (("ridge", "k:"), ("lasso", "k-."), ("gp posterior", "k-")):
            if f"{fam}/{ref}" in A:
                ax.plot(ns, A[f"{fam}/{ref}"], st, lw=1, label=ref)
        ax.set_xscale("log"); ax.set_xticks(ns, [str(v) for v in ns]); ax.minorticks_off()
        ax.set_ylim(0, 1.3); ax.set_xlabel("examples n"); ax.set_title(fam, fontsize=10)
        ax.axvline(n_train, color="0.8", lw=1)
    axes[0].set_ylabel("normalised error"); axes[2].set_ylabel("normalised error")
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle(f"{label}: trained (solid) and constructed (dashed); grey line: the training n", fontsize=10)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def gaps(result: Result, label: str = ""):
    """Trained against constructed: the normalised squared gap per family and mechanism."""
    label = label or result_label(result)
    M = result.metrics
    g = np.array([[M[f"{fam}/gap/{mech}"] for mech in MECHANISMS] for fam in FAMILIES])
    fig, ax = plt.subplots(figsize=(6, 3.4))
    im = ax.imshow(np.minimum(g, 1.0), cmap="magma_r", vmin=0, vmax=1)
    ax.set_xticks(range(len(MECHANISMS)), MECHANISMS); ax.set_yticks(range(len(FAMILIES)), FAMILIES)
    for i in range(len(FAMILIES)):
        for j in range(len(MECHANISMS)):
            ax.text(j, i, f"{g[i, j]:.3f}", ha="center", va="center", fontsize=8, color="w" if g[i, j] > 0.5 else "k")
    plt.colorbar(im, ax=ax, label="normalised squared gap")
    ax.set_title(f"trained vs constructed at n = {result.config['n_train']} ({label})", fontsize=9)
    fig.tight_layout()
    return fig
