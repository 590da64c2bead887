"""Figures of the Zhang, Frei, Bartlett chapter (recipes ``zhang.*``)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..plotting import MAX_WIDTH_IN, result_label
from ..results import Result

from ..recipes.zhang import FIG1_PANELS


def training(result: Result, label: str = ""):
    """``zhang.training``: the three ways to train the LSA reach u U11 = Gamma^-1 (left), with
    different splits u (middle); Gamma^-1 next to Adam's product (right)."""
    label = label or result_label(result)
    m, a = result.metrics, result.arrays
    fig, axes = plt.subplots(1, 3, figsize=(MAX_WIDTH_IN, 3.4))
    ax = axes[0]
    ax.semilogy(a["ode_t"] / 0.05, a["ode_product_err"], label="(a) ODE, t / 0.05")
    ax.semilogy(np.arange(1, len(a["gd_product_err"]) + 1), a["gd_product_err"], "--", label="(b) population GD")
    ax.semilogy(a["adam_trace"][:, 0], a["adam_trace"][:, 1], "o-", label="(c) Adam, sampled prompts")
    ax.set_xlabel("step"); ax.set_ylabel(r"$\|u_{-1}U_{11} - \Gamma^{-1}\|_F / \|\Gamma^{-1}\|_F$")
    ax.set_xlim(0, len(a["gd_product_err"])); ax.legend(fontsize=8)
    ax = axes[1]
    ax.plot(a["ode_t"] / 0.05, a["ode_u"], label="(a) ODE")
    ax.plot(np.arange(1, len(a["gd_u"]) + 1), a["gd_u"], "--", label="(b) population GD")
    ax.plot(a["adam_trace"][:, 0], a["adam_trace"][:, 2], "o-", label="(c) Adam")
    ax.axhline(m["u_limit"], color="0.5", ls=":", label=r"$\|\Gamma^{-1}\|_F^{1/2}$")
    ax.set_xlim(0, len(a["gd_u"])); ax.set_xlabel("step"); ax.set_ylabel("$u_{-1} = w^{PV}_{22}$")
    ax.legend(fontsize=8)
    ax = axes[2]
    G = a["Gamma_inv"]
    vmax = np.abs(G).max()
    ax.imshow(np.hstack([G, np.full((len(G), 1), np.nan), a["adam_product"]]), cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    ax.set_title(r"$\Gamma^{-1}$ (left) and Adam's $u_{-1}U_{11}$ (right)"); ax.axis("off")
    fig.suptitle(label, fontsize=10)
    fig.tight_layout()
    return fig


def error_vs_M(result: Result, label: str = ""):
    """``zhang.error_vs_M``: the trained LSA's error against the test length M, with the exact
    formula (Thm. 5), Corollary 6's bound (dotted) and the 1/N^2 floor (dashed)."""
    label = label or result_label(result)
    a = result.arrays
    Ms = a["Ms"]
    fig, ax = plt.subplots(figsize=(7, 4))
    for N, color in zip(a["Ns"], ("#1f4e9c", "#2a9d4b", "#d9822b", "#9c1f7a")):
        mc, lo, hi = (a[f"N{N}/{k}"] for k in ("mc", "lo", "hi"))
        ax.errorbar(Ms, mc, yerr=[mc - lo, hi - mc], fmt="o", ms=4, color=color, label=f"trained LSA, N={N}")
        ax.plot(Ms, a[f"N{N}/theory"], color=color, lw=1.2, label=f"exact (Thm 5), N={N}")
        ax.plot(Ms, a[f"N{N}/bound"], ":", color=color, lw=1)
        ax.axhline(result.metrics[f"N{N}_floor"], color=color, ls="--", lw=0.8)
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("test prompt length M"); ax.set_ylabel(r"$E(\hat y - \langle w, x_q\rangle)^2$")
    ax.set_title(f"dotted: Corollary 6 bound; dashed: the 1/N^2 floor ({label})", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def shifts(result: Result, label: str = ""):
    """``zhang.shifts``: task shift (noisy linear labels and a non-linear task), query shift
    (Monte Carlo against the exact formulas) and covariate shift (the LSA against the zero
    predictor and OLS)."""
    label = label or result_label(result)
    a = result.arrays
    fig, axes = plt.subplots(1, 3, figsize=(MAX_WIDTH_IN, 3.6))
    for key, color in (("task_w1_s0.1", "#1f4e9c"), ("task_w1_s1", "#2a9d4b"),
                       ("task_w3_s0.1", "#d9822b"), ("task_w3_s1", "#9c1f7a")):
        axes[0].plot(a["Ms"], a[f"{key}/mc"], "o", color=color, ms=4)
        axes[0].plot(a["Ms"], a[f"{key}/theory"], color=color, lw=1,
                     label=key.replace("task_w", "|w0|=").replace("_s", ", s="))
    if "nonlinear/mc" in a:                              # Theorem 5 on a non-linear task
        axes[0].plot(a["Ms"], a["nonlinear/mc"], "s", color="black", ms=4)
        axes[0].plot(a["Ms"], a["nonlinear/theory"], color="black", lw=1, label="max(<w0, x>, 0), |w0|=1")
        axes[0].axhline(result.metrics["nonlinear_best_linear"], color="black", ls=":", lw=0.8,
                        label="its best linear predictor")
    axes[0].set_xscale("log"); axes[0].set_yscale("log"); axes[0].set_xlabel("M")
    axes[0].set_ylabel("error"); axes[0].set_title("task shift (markers: trained LSA; lines: exact)", fontsize=9)
    axes[0].legend(fontsize=7)
    axes[1].plot(a["Ms"], a["query_shift/mc"], "o", color="#1f4e9c", ms=4, label="Monte Carlo")
    axes[1].plot(a["Ms"], a["query_shift/theory"], color="#1f4e9c", label="exact")
    axes[1].set_xscale("log"); axes[1].set_yscale("log"); axes[1].set_xlabel("M"); axes[1].set_ylabel("error")
    axes[1].set_title("query shift: x_q ~ N(0, 4I)"); axes[1].legend(fontsize=8)
    axes[2].semilogy(a["cs"], a["cov_shift/mc"], "o", color="#9c1f7a", ms=4, label="trained LSA")
    axes[2].semilogy(a["cs"], a["cov_shift/theory"], color="#9c1f7a", lw=1, label="exact")
    axes[2].semilogy(a["cs"], a["cov_shift/zero"], "--", color="0.5", label="zero predictor")
    axes[2].semilogy(a["cs"], np.maximum(a["cov_shift/ols"], 1e-30), "k-", lw=1,
                     label=f"OLS (max {a['cov_shift/ols'].max():.0e}: below the axis)")
    axes[2].set_ylim(1e-3, None); axes[2].set_xlabel("covariate scale c"); axes[2].set_ylabel("error")
    axes[2].set_title(f"covariate shift, M = {result.config['M_shift']}"); axes[2].legend(fontsize=8)
    fig.suptitle(label, fontsize=10)
    fig.tight_layout()
    return fig


def figure1(result: Result, label: str = ""):
    """``zhang.figure1``: normalised error against the number of in-context examples M for the
    transformers trained on fixed or random covariances, with OLS, the zero estimator, the LSA
    limit (M, N -> infinity) and the trained LSA's formula; one panel per test law."""
    label = label or result_label(result)
    a, m, cfg = result.arrays, result.metrics, result.config
    M = a["M"]
    colors = {"fixed": ("#9ecae1", "#3182bd", "#08519c"), "random": ("#fdae6b", "#e6550d", "#a63603")}
    fig, axes = plt.subplots(2, 2, figsize=(MAX_WIDTH_IN, 7.5))
    for ax, (test, c) in zip(axes.flat, FIG1_PANELS):
        panel = f"{test}_c{c:g}"
        for kind in ("fixed", "random"):
            for N, col in zip(cfg["Ns"], colors[kind]):
                key = f"{panel}/tf {kind} N={N}"
                ax.plot(M[1:], a[f"{key}/mean"][1:], color=col, label=f"TF trained {kind}, N={N}")
                ax.fill_between(M[1:], a[f"{key}/lo"][1:], a[f"{key}/hi"][1:], color=col, alpha=0.2, lw=0)
        ax.plot(M[1:], np.maximum(a[f"{panel}/ols/mean"][1:], 1e-4), color="black", lw=1.2, label="OLS")
        ax.axhline(m[f"{panel}_zero"], color="0.5", ls="--", label="zero estimator")
        ax.axhline(m[f"{panel}_lsa_limit"], color="black", ls="--", lw=1, label="LSA limit (M, N -> inf)")
        Nmax = max(cfg["Ns"])
        ax.plot(M[1:], a[f"{panel}/lsa theory N={Nmax}"], color="#9c1f7a", lw=1, ls="-.",
                label=f"LSA trained random, N={Nmax} (formula)")
        pt = a[f"{panel}/lsa random N={Nmax}/M{Nmax}"]
        ax.errorbar([Nmax], [pt[0]], yerr=[[pt[0] - pt[1]], [pt[2] - pt[0]]], fmt="s", color="#9c1f7a", ms=4)
        ax.set_yscale("log"); ax.set_ylim(1e-2, max(2 * m[f"{panel}_lsa_limit"], 3 * c))
        ax.set_title(f"test: {'identity' if test == 'identity' else f'random, c = {c:g}'}")
        ax.set_xlabel("in-context examples M"); ax.set_ylabel("squared error / d")
    axes[0, 0].legend(fontsize=6.5, ncol=2)
    fig.suptitle(label)
    fig.tight_layout()
    return fig
