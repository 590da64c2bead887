"""Figures of the Collins et al. chapter (recipes ``collins.*``)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..plotting import MAX_WIDTH_IN, result_label
from ..results import Result
from ..tasks import LipschitzTask

SOFTMAX, LINEAR = "#1f4e9c", "#d9822b"


def figure1(result: Result, label: str = ""):
    """``collins.figure1``: per nu, a task with the softmax window at n = 64 (top), the
    attention weights against the angle from the query (middle) and the ICL error against n for
    softmax and linear attention (bottom; errors floored at 1e-6 for the log axis)."""
    label = label or result_label(result)
    a, ns, cfg = result.arrays, result.arrays["ns"], result.config
    fig, axes = plt.subplots(3, len(cfg["nus"]), figsize=(MAX_WIDTH_IN, 8.6), squeeze=False)
    theta = np.linspace(-np.pi, np.pi, 400)
    grid = torch.tensor(np.stack([np.cos(theta), np.sin(theta)], -1), dtype=torch.float32)[None]
    n_show = 64 if 64 in list(ns) else int(ns[-1])
    for k, nu in enumerate(cfg["nus"]):
        key = f"nu{nu:g}"
        w = a[f"{key}/wstar"][list(ns).index(n_show)]
        task = LipschitzTask(2, "hills", nu, cfg["sigma"], hills=cfg.get("hills", "literal"))
        p = task.sample(1, n_show + 1, seed=k)
        ax = axes[0, k]
        ax.plot(theta, task.evaluate(grid, p.task)[0], color="black", label="task")
        ax.scatter(torch.atan2(p.x[0, :n_show, 1], p.x[0, :n_show, 0]), p.y[0, :n_show], s=8, color="0.55",
                   label="noisy context")
        q = float(torch.atan2(p.x[0, n_show, 1], p.x[0, n_show, 0]))
        half = 1 / np.sqrt(w) if w > 0 else np.pi
        ax.axvspan(q - half, q + half, color=SOFTMAX, alpha=0.15, label="window |angle| < 1/sqrt(w)")
        ax.axvline(q, color=SOFTMAX, lw=1)
        ax.set_xlim(-np.pi, np.pi); ax.set_xlabel("angle on the circle"); ax.set_ylabel("f(x), y")
        ax.set_title(f"nu = {nu:g}: a task, n = {n_show}", fontsize=9); ax.legend(fontsize=6.5)
        ax = axes[1, k]
        ax.plot(theta, np.exp(w * (np.cos(theta) - 1)), color=SOFTMAX, label=f"softmax, w = {w:.1f}")
        ax.plot(theta, (np.cos(theta) + 1) / 2, color=LINEAR, label="linear (any M = wI)")
        ax.set_title(f"attention weight vs angle from the query (n = {n_show})", fontsize=9)
        ax.set_xlabel("angle from the query"); ax.set_ylabel("weight (unnormalised)"); ax.legend(fontsize=7)
        ax = axes[2, k]
        ax.loglog(ns, np.maximum(a[f"{key}/softmax"], 1e-6), "o-", color=SOFTMAX, label="softmax")
        ax.loglog(ns, np.maximum(a[f"{key}/linear"], 1e-6), "s-", color=LINEAR, label="linear")
        ax.set_xlabel("context length n"); ax.set_ylabel("ICL error"); ax.legend(fontsize=7)
    fig.suptitle(f"Figure 1 ({label}; errors floored at 1e-6 for the log axis)")
    fig.tight_layout()
    return fig


def _groups(ax, steps, traj, groups, seeds, names, colors, wstar=None):
    """Seed-mean curves of a (steps, groups * seeds) trajectory, one line per group."""
    for i, name in enumerate(names):
        ax.plot(steps, traj[:, i * seeds:(i + 1) * seeds].mean(1), color=colors[i], label=name)
        if wstar is not None:
            ax.axhline(wstar[i], color=colors[i], ls="--", lw=0.8)


def figures3_4(f3: Result, f4: Result, label: str = "", panel: str = "relu_sphere"):
    """``collins.figure3`` / ``figure4`` at ci: tr(M)/d during pretraining for each L (ReLU,
    sphere), sigma and n, with the Monte Carlo optimum w* dashed."""
    label = label or result_label(f3)
    fig, axes = plt.subplots(1, 3, figsize=(MAX_WIDTH_IN, 3.4))
    colors = plt.cm.viridis(np.linspace(0, 0.9, 6))
    a3, c3 = f3.arrays, f3.config
    Ls = a3[f"{panel}/Ls"]
    _groups(axes[0], a3[f"{panel}/steps"], a3[f"{panel}/traj"][:, :, 1], len(Ls), c3["seeds"],
            [f"L = {L:g}" for L in Ls], colors, a3[f"{panel}/wstar"])
    axes[0].set_title(f"Fig. 3: {panel.replace('_', ', ')}, sigma = {c3['sigma']} ({label})", fontsize=9)
    a4, c4 = f4.arrays, f4.config
    _groups(axes[1], a4["relu/sigma/steps"], a4["relu/sigma/traj"][:, :, 1], len(c4["sigmas"]), c4["seeds"],
            [f"sigma = {s:g}" for s in c4["sigmas"]], colors, a4["relu/sigma/wstar"])
    axes[1].set_title(f"Fig. 4 left: vary sigma, n = {c4['n_sigma']}", fontsize=9)
    for i, n in enumerate(c4["ns"]):
        axes[2].plot(a4[f"relu/n{n}/steps"], a4[f"relu/n{n}/traj"][:, :, 1].mean(1), color=colors[i], label=f"n = {n}")
        axes[2].axhline(a4["relu/n/wstar"][i], color=colors[i], ls="--", lw=0.8)
    axes[2].set_title(f"Fig. 4 right: vary n, sigma = {c4['sigma_n']}, 1 query", fontsize=9)
    for ax in axes:
        ax.set_xlabel("pretraining step"); ax.set_ylabel("tr(M) / d  (mean over seeds)"); ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figures3_4_paper(p3: Result, p4: Result, label: str = ""):
    """``collins.figure3`` / ``figure4`` at paper scale: ||M||_2 during pretraining (seed
    means), Figure 3's four panels (top, each panel's optimal window w* dashed) and Figure 4's
    sigma and n ablations (bottom)."""
    label = label or result_label(p3)
    colors = plt.cm.viridis(np.linspace(0, 0.9, 6))
    fig, grid = plt.subplots(4, 2, figsize=(MAX_WIDTH_IN, 12.4))
    axes = np.array([list(grid[:2].flat), list(grid[2:].flat)])      # Fig. 3 (4 panels), then Fig. 4
    S3 = p3.config["seeds"]
    for ax, (family, cov) in zip(axes[0], p3.config["panels"]):
        key = f"{family}_{cov}"
        Ls = p3.arrays[f"{key}/Ls"]
        _groups(ax, p3.arrays[f"{key}/steps"], p3.arrays[f"{key}/traj"][:, :, 0], len(Ls), S3,
                [f"L = {L:g}" for L in Ls], colors, p3.arrays[f"{key}/wstar"])
        ax.set_title(f"Fig. 3: {family}, {cov} (sigma = {p3.config['sigma']})", fontsize=9)
    sig, S4 = p4.config["sigmas"], p4.config["seeds"]
    for ax, fam in zip(axes[1, :2], p4.config["families"]):
        _groups(ax, p4.arrays[f"{fam}/sigma/steps"], p4.arrays[f"{fam}/sigma/traj"][:, :, 0], len(sig), S4,
                [f"sigma = {s:g}" for s in sig], colors)
        ax.set_title(f"Fig. 4: {fam}, vary sigma (n = {p4.config['n_sigma']})", fontsize=9)
    for ax, fam in zip(axes[1, 2:], p4.config["families"]):
        for i, n in enumerate(p4.config["ns"]):
            ax.plot(p4.arrays[f"{fam}/n{n}/steps"], p4.arrays[f"{fam}/n{n}/traj"][:, :, 0].mean(1),
                    color=colors[i], label=f"n = {n}")
        ax.set_title(f"Fig. 4: {fam}, vary n (sigma = {p4.config['sigma_n']}, 1 query)", fontsize=9)
    for ax in axes.flat:
        ax.set_xlabel("pretraining step"); ax.set_ylabel(r"$\|M\|_2$ (mean of seeds)"); ax.legend(fontsize=7)
    fig.suptitle(f"Figures 3 and 4 ({label}: {S3} seeds, 1 task per step)", fontsize=10)
    fig.tight_layout()
    return fig


def figure3_vs_L(p3: Result, label: str = ""):
    """``collins.figure3``: the trained window at the end of pretraining against L, per panel:
    ||M||_2 and tr(M)/d (seed mean, bars: one standard deviation over seeds) beside the
    theory's optimal window w*(L) (Monte Carlo, M = w* I, so ||M||_2 = tr(M)/d = w*)."""
    label = label or result_label(p3)
    panels = p3.config["panels"]
    cols = len(panels) if len(panels) <= 3 else 2
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(min(3.6 * cols, MAX_WIDTH_IN), 3.4 * rows), squeeze=False)
    S = p3.config["seeds"]
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (family, cov) in zip(axes.flat, panels):
        key = f"{family}_{cov}"
        Ls, traj = p3.arrays[f"{key}/Ls"], p3.arrays[f"{key}/traj"][-1]       # (R, [norm, trace])
        for col, name, marker, color in ((0, r"trained $\|M\|_2$", "o", SOFTMAX), (1, "trained tr(M)/d", "s", LINEAR)):
            v = traj[:, col].reshape(len(Ls), S)
            ax.errorbar(Ls, v.mean(1), v.std(1), fmt=marker, ms=4, capsize=2, color=color, label=name)
        ax.plot(p3.arrays[f"{key}/wstar_curve_L"], p3.arrays[f"{key}/wstar_curve"], "k-", lw=1, label="optimal w*(L)")
        ax.set_xscale("log"); ax.set_xlabel("Lipschitz constant L"); ax.set_ylabel("window scale")
        ax.set_title(f"{family}, {cov}", fontsize=9); ax.legend(fontsize=7)
    fig.suptitle(f"Figure 3: the trained window against L, sigma = {p3.config['sigma']}, n = {p3.config['n']} "
                 f"({label}; {S} seeds)", fontsize=10)
    fig.tight_layout()
    return fig


def figure5(result: Result, label: str = ""):
    """``collins.figure5``: test error during pretraining on each L = 1 class for units
    pretrained on each class (same L), and on cosine tasks for mismatched L (right)."""
    label = label or result_label(result)
    a5, m5 = result.arrays, result.metrics
    R, seeds = len(m5["pretrain_labels"]), result.config["seeds"]
    curves = a5["curves"].reshape(len(a5["curve_steps"]), 3, R, seeds).mean(-1)  # (steps, test, pretrain)
    fig, grid = plt.subplots(2, 2, figsize=(MAX_WIDTH_IN, 6.6))
    axes = list(grid.flat)
    colors = ["#1f4e9c", "#2a9d4b", "#d9822b", "#9c1f7a", "#7a7a7a"]
    for t, test in enumerate(m5["test_labels"]):
        for r in range(3):
            axes[t].semilogy(a5["curve_steps"], curves[:, t, r], color=colors[r], label=f"pretrained {m5['pretrain_labels'][r]}")
        axes[t].set_title(f"test: {test}, L = 1", fontsize=9)
    for r in (0, 3, 4):
        axes[3].semilogy(a5["curve_steps"], curves[:, 2, r], color=colors[r], label=f"pretrained {m5['pretrain_labels'][r]}")
    axes[3].set_title("test: cosine, L = 1 (mismatched L)", fontsize=9)
    for ax in axes:
        ax.set_xlabel("pretraining step"); ax.set_ylabel("test error"); ax.legend(fontsize=6.5)
    fig.suptitle(f"Figure 5 ({label}, n = {result.config['n']}, {seeds} seeds)", fontsize=10)
    fig.tight_layout()
    return fig


def figure9(result: Result, label: str = ""):
    """``collins.figure9``: rho(M, B) (top) and test error (bottom) during pretraining for
    softmax and linear units on the three low-rank classes (seed means)."""
    label = label or result_label(result)
    a9, fams, seeds = result.arrays, result.metrics["families"], result.config["seeds"]
    fig, axes = plt.subplots(2, len(fams), figsize=(MAX_WIDTH_IN, 6), squeeze=False)
    for attention, color in (("softmax", SOFTMAX), ("linear", LINEAR)):
        traj = a9[f"{attention}/traj"].reshape(len(a9[f"{attention}/steps"]), len(fams), seeds, 2)
        for k, fam in enumerate(fams):
            axes[0, k].semilogy(a9[f"{attention}/steps"], traj[:, k, :, 0].mean(1), color=color, label=attention)
            axes[1, k].semilogy(a9[f"{attention}/steps"], traj[:, k, :, 1].mean(1), color=color, label=attention)
            axes[0, k].set_title(f"{fam}", fontsize=9)
    for k in range(len(fams)):
        axes[0, k].set_ylabel(r"$\rho(M, B)$ (mean of seeds)"); axes[1, k].set_ylabel("test error")
        axes[1, k].set_xlabel("pretraining step"); axes[0, k].set_xlabel("pretraining step")
        axes[0, k].legend(fontsize=7)
    fig.suptitle(f"Figure 9 ({label}, covariates: {result.config['covariates']})", fontsize=10)
    fig.tight_layout()
    return fig


def figure1_paper(result: Result, label: str = ""):
    """``collins.figure1`` at paper scale: trained units' ICL error against n, per nu."""
    label = label or result_label(result)
    a, ns = result.arrays, result.arrays["ns"]
    nus = result.config["nus"]
    fig, axes = plt.subplots(1, len(nus), figsize=(MAX_WIDTH_IN, 3.3), squeeze=False)
    for ax, nu in zip(axes[0], nus):
        key = f"nu{nu:g}"
        ax.loglog(ns, np.maximum(a[f"{key}/softmax"], 1e-6), "o-", color=SOFTMAX, label="softmax (trained)")
        ax.loglog(ns, np.maximum(a[f"{key}/linear"], 1e-6), "s-", color=LINEAR, label="linear (trained)")
        ax.set_title(f"nu = {nu:g}", fontsize=9); ax.set_xlabel("context length n"); ax.set_ylabel("ICL error")
        ax.legend(fontsize=7)
    fig.suptitle(f"Figure 1, bottom row ({label}: {result.config['steps']:,} steps, "
                 f"{result.config['seeds']} units per point; errors floored at 1e-6)", fontsize=10)
    fig.tight_layout()
    return fig


def figure7(ws, S, N, n: int, d: int, sigma: float, bounds: dict, L: float = 1.0):
    """Appendix E's Figure 7 drawn with the measured terms: the bias ``S(w)`` between its lower
    bound ``c_lo L^2 / w^2`` and upper bound ``c_hi L^2 (1/w + 1/n)`` (constants from
    :func:`~icl_core.theory.collins.bias_bounds`, over the shaded range ``1 <= w <= n^{2/d}``), the
    noise ``sigma^2 N(w)``, and their sum with its minimiser."""
    ws, S, N = (np.asarray(a, float) for a in (ws, S, N))
    keep = ws > 0
    w, s, nn = ws[keep], S[keep], N[keep]
    fig, axes = plt.subplots(1, 2, figsize=(MAX_WIDTH_IN, 3.8))
    ax = axes[0]
    ax.loglog(w, s, color=SOFTMAX, lw=2, label="bias S(w), measured")
    ax.loglog(w, bounds["c_lo"] * L ** 2 / w ** 2, "--", color="0.35", label=f"lower bound {bounds['c_lo']:.2g} L^2/w^2")
    ax.loglog(w, bounds["c_hi"] * L ** 2 * (1 / w + 1 / n), ":", color="0.35",
              label=f"upper bound {bounds['c_hi']:.2g} L^2 (1/w + 1/n)")
    ax.loglog(w, sigma ** 2 * nn, color=LINEAR, lw=2, label=f"noise sigma^2 N(w), sigma = {sigma:g}")
    ax.axvspan(*bounds["w_range"], color="0.9", zorder=0, label="1 <= w <= n^(2/d)")
    ax.set_ylim(min(s.min(), (sigma ** 2 * nn).min()) / 3, 3 * max(s.max(), (sigma ** 2 * nn).max()))
    ax.set_xlabel("window scale w"); ax.set_ylabel("loss term"); ax.legend(fontsize=7)
    ax.set_title(f"bias and noise, ReLU, d = {d}, n = {n}", fontsize=9)
    ax = axes[1]
    total = s + sigma ** 2 * nn
    ax.loglog(w, total, color="black", label="total loss")
    i = int(np.argmin(total))
    ax.axvline(w[i], color="black", ls="--", lw=0.8, label=f"optimal w* = {w[i]:.3g}")
    ax.set_xlabel("window scale w"); ax.set_ylabel("ICL loss"); ax.legend(fontsize=7)
    ax.set_title("their sum: the optimal window balances them", fontsize=9)
    fig.suptitle("Figure 7 (App. E) with measured terms", fontsize=10)
    fig.tight_layout()
    return fig
