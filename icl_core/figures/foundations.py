"""Figures of the foundations chapter (recipe ``foundations.error_vs_context``)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import error_curves, result_label
from ..results import Result

NAMES = ("transformer", "ols", "ridge", "3-nn", "averaging")


def curves_of(arrays, names=NAMES) -> dict:
    """The error curves of a result's arrays in :func:`~icl_core.plotting.error_curves`' form."""
    return {k: {"n": arrays["n"], "mean": arrays[f"{k}/mean"], "lo": arrays[f"{k}/lo"],
                "hi": arrays[f"{k}/hi"]} for k in names}


def error_vs_context(result: Result, label: str = ""):
    """Error / d against the number of in-context examples for the trained transformer and the
    baselines (left, d dotted), and the training loss (right, running mean)."""
    label = label or result_label(result)
    a, d = result.arrays, result.config["d"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    error_curves(curves_of(a), ax=axes[0], title=f"{label}, d={d}")
    axes[0].axvline(d, color="0.6", lw=0.8, ls=":")
    losses = a["losses"]
    window = max(1, len(losses) // 50)
    axes[1].plot(np.convolve(losses, np.ones(window) / window, mode="valid"), color="#1f4e9c")
    axes[1].set_xlabel("training step"); axes[1].set_ylabel(f"training loss (mean of {window} steps)")
    axes[1].set_yscale("log"); axes[1].set_title("training loss")
    fig.tight_layout()
    return fig
