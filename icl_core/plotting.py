"""The book's house style and one function per kind of figure."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

# One colour per predictor, the same in every chapter.
COLORS = {"transformer": "#1f4e9c", "ols": "#000000", "ridge": "#7a7a7a", "3-nn": "#2a9d4b",
          "averaging": "#d9822b", "gd": "#9c1f7a", "ols theory": "#c0392b", "bayes": "#555555"}

# The widest figure, in inches: at 110 dpi in the book's ~800 px text column a figure this
# wide keeps 10-pt text at 9 px or more (scripts/check_html.py checks the shown / drawn width).
MAX_WIDTH_IN = 10.5
STYLE = {"figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False,
         "axes.grid": True, "grid.alpha": 0.3, "legend.frameon": False, "font.size": 10}


def use_style():
    """Apply the house style to matplotlib."""
    plt.rcParams.update(STYLE)


def error_curves(curves: dict, ax=None, theory: dict | None = None, title: str | None = None,
                 ylabel: str = "squared error / d", ylim=(-0.05, 1.25)):
    """Plot error-vs-context curves with their bootstrap bands.

    Args:
        curves: name -> object with ``n, mean, lo, hi`` (an
            :class:`~icl_core.evaluation.ErrorCurve`) or a dict with those keys.
        theory: name -> ``(n, values)`` drawn as dashed lines (closed forms).
        ylim: Garg et al.'s plots clip at 1.25.
    """
    use_style()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.8))
    for name, c in curves.items():
        get = (lambda k: np.asarray(c[k])) if isinstance(c, dict) else (lambda k: getattr(c, k))
        color = COLORS.get(name)
        ax.plot(get("n"), get("mean"), label=name, color=color, lw=1.8)
        ax.fill_between(get("n"), get("lo"), get("hi"), color=color, alpha=0.2, lw=0)
    for name, (n, values) in (theory or {}).items():
        ax.plot(n, values, ls="--", lw=1.4, color=COLORS.get(name, "#c0392b"), label=name)
    ax.set_xlabel("in-context examples n")
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8, ncol=2)
    return ax


def result_label(result, committed: bool = False) -> str:
    """A figure's provenance label from the result itself: scale, device (and "committed
    run" for a result loaded from ``results/``), e.g. ``"ci scale, cpu"``."""
    device = (result.provenance or {}).get("device", "device not recorded")
    return f"{result.scale or '?'} scale, {device}" + (", committed run" if committed else "")
