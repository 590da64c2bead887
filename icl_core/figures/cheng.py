"""Figures of the Cheng, Chen, Sra chapter (recipes ``cheng.*``)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import MAX_WIDTH_IN, result_label
from ..results import Result

COLORS = {"linear": "#1f4e9c", "relu": "#2a9d4b", "exp": "#d9822b", "softmax": "#9c1f7a",
          "linear+exp": "#111111"}


FIG1_LETTERS = {"linear": "a", "relu": "b", "exp": "c"}      # the paper's panels


def figure1(result: Result, label: str = ""):
    """``cheng.figure1``: log test loss against n, one panel per data kernel, one curve per
    activation (mean and spread over seeds), the Bayes predictor in black."""
    label = label or result_label(result)
    a, ns, cfg = result.arrays, result.arrays["ns"], result.config
    fig, axes = plt.subplots(1, len(cfg["kernels"]), figsize=(MAX_WIDTH_IN, 3.4), squeeze=False)
    for ax, kernel in zip(axes[0], cfg["kernels"]):
        for act in cfg["activations"]:
            logs = a[f"{kernel}/{act}"]
            ax.errorbar(ns, logs.mean(1), yerr=logs.std(1), fmt="o-", ms=4, color=COLORS[act], label=f"h = {act}")
        ax.plot(ns, np.log(np.maximum(a[f"{kernel}/bayes"], 1e-8)), "k--", label="Bayes")
        ax.set_title(f"({FIG1_LETTERS[kernel]}) {kernel}-kernel GP, L = {cfg['depth']} ({label})", fontsize=9)
        ax.set_xlabel("n"); ax.set_ylabel("log test loss"); ax.legend(fontsize=7)
        if kernel == "linear":
            ax.set_ylim(-8, 1)
    fig.tight_layout()
    return fig


PANELS = (("a", "relu", 14), ("b", "exp", 14), ("c", "relu", 6), ("d", "exp", 6))


def figure2(result: Result, label: str = ""):
    """``cheng.figure2``: log test loss against the number of layers, panels (a) ReLU data
    n = 14, (b) exp n = 14, (c) ReLU n = 6, (d) exp n = 6 (those the result holds), one curve
    per activation (mean and seed spread), the Bayes predictor dashed."""
    label = label or result_label(result)
    a, cfg = result.arrays, result.config
    panels = [p for p in PANELS if p[2] in cfg["ns"] and p[1] in cfg["kernels"]]
    cols = 2 if len(panels) > 2 else len(panels)
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.4 * rows), squeeze=False)
    for ax, (letter, kernel, n) in zip(axes.flat, panels):
        for act in cfg["activations"]:
            logs = a[f"n{n}/{kernel}/{act}"]
            ax.errorbar(a["depths"], logs.mean(1), yerr=logs.std(1), fmt="o-", ms=4, color=COLORS[act],
                        label=f"h = {act}")
        ax.axhline(float(np.log(a[f"n{n}/{kernel}/bayes"])), color="black", ls="--", label="Bayes")
        ax.set_title(f"({letter}) {kernel}-kernel GP, n = {n} ({label})", fontsize=9)
        ax.set_xlabel("layers L"); ax.set_ylabel("log test loss"); ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def seeds_at(runs: dict, panel: str, depth: int, activations=("relu", "exp")):
    """One setting of ``cheng.figure2`` in several runs, seed by seed: the log test loss of
    each seed (dots) and their mean (bar) per run and activation. ``runs``: ``{label: Result}``;
    ``panel``: "n14/relu" and the like; ``depth`` must be among each run's depths. Shows what a
    mean hides: seeds left on a plateau."""
    if not runs:
        raise ValueError("runs must hold at least one {label: Result}")
    fig, ax = plt.subplots(figsize=(min(2.2 + 1.8 * len(runs), MAX_WIDTH_IN), 3.4))
    for i, (label, r) in enumerate(runs.items()):
        depths = [int(L) for L in r.arrays["depths"]]
        if depth not in depths:
            raise ValueError(f"depth must be one of run {label!r}'s depths {depths}, got {depth}")
        for j, act in enumerate(activations):
            logs = np.asarray(r.arrays[f"{panel}/{act}"][depths.index(depth)])
            x = i + (j - (len(activations) - 1) / 2) * 0.25
            ax.plot(np.full(len(logs), x), logs, "o", ms=5, alpha=0.75, color=COLORS[act],
                    label=f"h = {act}" if i == 0 else None)
            ax.hlines(logs.mean(), x - 0.1, x + 0.1, color=COLORS[act], lw=2)
    ax.set_xticks(range(len(runs)), [f"{k}\n({r.config['seeds']} seeds, {r.config['steps']:,} steps)"
                                     for k, r in runs.items()], fontsize=8)
    ax.set_xlim(-0.6, len(runs) - 0.4)
    n, kernel = panel.split("/")
    ax.set_title(f"{kernel}-kernel GP, n = {n[1:]}, L = {depth}: each seed (dots) and the mean (bar)", fontsize=9)
    ax.set_ylabel("log test loss"); ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _bayes_line(ax, log_bayes: float, lowest: float):
    """The Bayes predictor's log loss, dashed. On noiseless data it is the GP's jitter (about
    -18), far below any trained model: then it is drawn one unit below the lowest model point
    (``lowest``, at most -8) so that the models' axis stays readable, and its label gives its value."""
    floor = min(-8.0, np.floor(lowest) - 1)
    if log_bayes >= floor:
        ax.axhline(log_bayes, color="black", ls="--", label="Bayes")
    else:
        ax.axhline(floor, color="black", ls="--", label=f"Bayes ({log_bayes:.1f}, drawn at {floor:.0f})")


def depth_sweep(result: Result, label: str = "", models=None):
    """``cheng.figure4`` (one or two heads): log test loss against the number of layers, one
    panel per data kernel, the Bayes predictor dashed."""
    label = label or result_label(result)
    a, cfg = result.arrays, result.config
    models = models or cfg.get("activations") or cfg.get("heads") or ["linear", "exp", "linear+exp"]
    fig, axes = plt.subplots(1, len(cfg["kernels"]), figsize=(min(4.4 * len(cfg["kernels"]), MAX_WIDTH_IN), 3.6), squeeze=False)
    for ax, kernel in zip(axes[0], cfg["kernels"]):
        for name in models:
            logs = a[f"{kernel}/{name}"]
            heads = "2 heads: " if "+" in name else ("1 head: " if "activations" not in cfg else "h = ")
            ax.errorbar(a["depths"], logs.mean(1), yerr=logs.std(1), fmt="o-", ms=4, color=COLORS[name],
                        label=heads + name)
        _bayes_line(ax, float(np.log(a[f"{kernel}/bayes"])),
                    min(float((a[f"{kernel}/{m}"].mean(1) - a[f"{kernel}/{m}"].std(1)).min()) for m in models))
        n = f", n = {cfg['n']}" if "n" in cfg else ""
        ax.set_title(f"data: {kernel}-kernel GP{n} ({label})", fontsize=9)
        ax.set_xlabel("layers L"); ax.set_ylabel("log test loss"); ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure3(result: Result, label: str = "", mode: str | None = None):
    """``cheng.figure3``: dist(M, I) during training for Sigma^1/2 B_l^T C_l Sigma^1/2 (solid)
    and A_0, A_1 (dashed), with A fixed at 0 (Figure 5) and free (Figure 6). Up to three pairs:
    one column per pair, a row per mode; more (the paper's nine): a row per (mode, data
    kernel), a column per activation. ``mode``: "A0" or "Afree" draws that mode alone."""
    label = label or result_label(result)
    a3, pairs = result.arrays, [tuple(p) for p in result.config["pairs"]]
    if mode not in (None, "A0", "Afree"):
        raise ValueError(f"mode must be None, 'A0' or 'Afree', got {mode!r}")
    modes = [mode] if mode else list(result.config.get("a_modes", ["A0", "Afree"]))
    if len(pairs) <= 3:
        cells = [[(k, act, m) for k, act in pairs] for m in modes]
    else:
        kernels = list(dict.fromkeys(k for k, _ in pairs))
        acts = list(dict.fromkeys(act for _, act in pairs))
        cells = [[(k, act, m) if (k, act) in pairs else None for act in acts] for m in modes for k in kernels]
    rows, cols = len(cells), len(cells[0])
    fig, axes = plt.subplots(rows, cols, figsize=(min(4.3 * cols, MAX_WIDTH_IN), 3.1 * rows), squeeze=False)
    for ax, cell in zip(axes.flat, (c for row in cells for c in row)):
        if cell is None:
            ax.axis("off")
            continue
        kernel, act, m = cell
        key = f"{kernel}_{act}_{m}"
        d = a3[f"{key}/dist"].mean(1)                     # mean over seeds: (steps, matrices)
        names = [f"B{l}'C{l}" for l in range(3)] + ([] if m == "A0" else ["A0", "A1"])
        for k, name in enumerate(names):
            ax.semilogy(a3[f"{key}/steps"], d[:, k], ls="-" if name.startswith("B") else "--", label=name)
        ax.set_title(f"{kernel} data, h = {act}, {'A = 0' if m == 'A0' else 'A free'}", fontsize=9)
        ax.set_xlabel("training step"); ax.set_ylabel("dist(M, I)"); ax.legend(fontsize=7)
    which = {"A0": "Figure 5 (A = 0)", "Afree": "Figure 6 (A free)"}
    whole = "Figure 3" if pairs == [("exp", "softmax")] else "Figures 3 / 5 / 6"     # Figure 3 is that pair alone
    only = modes[0] if len(modes) == 1 else None
    title = which[only] if only else whole
    if only and whole == "Figure 3":
        title = f"Figure 3({'a' if only == 'A0' else 'b'}), {'A = 0' if only == 'A0' else 'A free'}"
    fig.suptitle(f"{title} ({label})", fontsize=10)
    fig.tight_layout()
    return fig


def drift_table(result: Result, mode: str = "A0") -> str:
    """The gradient-or-noise probe a ``cheng.figure3`` result records (``drift_batches``;
    :func:`icl_core.recipes.cheng.drift_probe`) as a text table: per pair, its distances at the
    probed step (mean over seeds), how many (seed, matrix) cells the all-batch Adam step pulls
    towards I, away from it, or neither beyond two standard errors, and the median ratio of one
    batch's spread to the pull ("" where the result has no probe)."""
    if mode not in ("A0", "Afree"):
        raise ValueError(f"mode must be 'A0' or 'Afree', got {mode!r}")
    rows, batches = [], None
    for kernel, act in result.config["pairs"]:
        got = result.metrics.get(f"{kernel}_{act}_{mode}_drift")
        if got is None:
            continue
        batches = got["batches"]
        cells = [c for row in got["adam"] for c in row]
        count = {p: sum(c["pull"] == p for c in cells) for p in ("down", "up", "none")}
        ratio = np.median([c["sd"] / max(abs(c["mean"]), 1e-300) for c in cells])
        rows.append(f"{kernel + '/' + act:15s} {got['step']:>7,}  "
                    + ", ".join(f"{x:.2f}" for x in np.mean(got["dist"], 0))
                    + f"  | towards I {count['down']}, away {count['up']}, neither {count['none']} of {len(cells)}"
                    + f"  | one batch's spread / pull: {ratio:.0f}")
    if not rows:
        return ""
    head = (f"data/attention     step  dist(M, I), mean over seeds  | Adam's all-batch step "
            f"({batches} batches of {result.config['batch_size']:,}) beyond 2 SE")
    return "\n".join([head] + rows)


def score_table(spectra: dict, log_losses) -> str:
    """Per seed, its log test loss and, per layer, the eigenvalue range of its whitened score
    matrix and its read-out weight (:func:`icl_core.recipes.cheng.score_spectra`) as a text table.
    A layer is marked "+" when every eigenvalue is above 0 (it weights tokens that point the same
    way, as functional GD does), "flipped" when its largest eigenvalue is at most a tenth of its
    most negative one's size (negative semi-definite up to that; ours), else "mixed".
    ``log_losses``: one per seed."""
    losses = list(np.asarray(log_losses, dtype=float))
    if len(losses) != len(spectra["eig"]):
        raise ValueError(f"log_losses must hold one value per seed ({len(spectra['eig'])}), got {len(losses)}")

    def cell(ev, r):
        mark = "+" if ev[0] > 0 else "flipped" if ev[1] <= 0.1 * -ev[0] else "mixed"
        return f"[{ev[0]:+.2f}, {ev[1]:+.2f}] r {r:+.2f} {mark:7s}"
    depth = len(spectra["eig"][0])
    head = ("seed  log loss  " + "  ".join(f"layer {l + 1}: eig of S B'C S, r".ljust(34) for l in range(depth))
            + f"   (step {spectra['step']:,})")
    rows = [f"{i:4d}  {x:8.3f}  " + "  ".join(cell(ev, r).ljust(34) for ev, r in zip(eig, rs))
            for i, (x, eig, rs) in enumerate(zip(losses, spectra["eig"], spectra["r"]))]
    return "\n".join([head] + rows)
