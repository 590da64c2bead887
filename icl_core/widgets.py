"""Interactive explorers used by the chapters.

Each explorer is a plain ipywidgets layout whose sliders ``observe`` a redraw of a PNG in
an ``Image`` widget (no ``interact``, no ``Output`` widget: under nbclient those can stall
a cell for its whole timeout, see ``shared/specs/toolchain.md``). Each also exposes
``figure()`` (the figure at its current settings) and ``show()``, the one call a page makes:
an object that displays as the live widget where a kernel runs (Jupyter, Colab) and, where
none does (the HTML book), as a static player: the figure precomputed over a small grid of
each control's values (the explorer's ``STATIC``), with sliders that swap the frames in the
browser. The grid is drawn only when ``ICL_BOOK_STATIC_PLAYER=1`` (set by the book's build);
elsewhere the static part is the current figure alone, so a reader's kernel does not pay for it.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import html
import io
import itertools
import json
import os
from functools import partial

import matplotlib.pyplot as plt
import numpy as np

from .baselines import averaging, knn, ols, ridge
from .evaluation import error_vs_context
from .plotting import error_curves
from .tasks import LinearRegression
from .theory.linear import ols_excess_risk
from .theory.synthesis import FAMILIES

STATIC_ENV = "ICL_BOOK_STATIC_PLAYER"
VIEW_MIME = "application/vnd.jupyter.widget-view+json"
PLAYER_DPI = 72          # frames of the static player: small PNGs (about 30-60 KB each)


class _Explorer:
    """What every explorer shares: ``show()`` and the static player over ``STATIC``."""

    STATIC: dict = {}            # control name -> the values the static player offers

    def show(self, static: bool | None = None) -> "Shown":
        """The one call a page makes: displays as the live widget in Jupyter or Colab and as
        the static player in the HTML book (``static``: draw the player's frames; default:
        when the environment variable ``ICL_BOOK_STATIC_PLAYER`` is ``1``)."""
        if static is None:
            static = os.environ.get(STATIC_ENV) == "1"
        return Shown(self, bool(static))

    def frames(self) -> tuple[dict, dict]:
        """``(grid, frames)``: the ``STATIC`` grid and ``{"i,j,...": png bytes}`` for every
        combination of grid indices (the explorer itself is left as it was)."""
        if not self.STATIC:
            raise ValueError(f"{type(self).__name__} has no STATIC grid to precompute")
        grid = {name: list(values) for name, values in self.STATIC.items()}
        frames = {}
        for combo in itertools.product(*(range(len(v)) for v in grid.values())):
            copy_ = copy.copy(self)
            for (name, values), i in zip(grid.items(), combo):
                setattr(copy_, name, values[i])
            frames[",".join(map(str, combo))] = _png(copy_.figure(), dpi=PLAYER_DPI)
        return grid, frames

    def start(self, grid: dict) -> list[int]:
        """Indices into each grid list nearest this explorer's settings (the first frame)."""
        out = []
        for name, values in grid.items():
            now = getattr(self, name)
            if isinstance(now, str) or isinstance(values[0], str):
                out.append(values.index(now) if now in values else 0)
            else:
                out.append(int(np.argmin([abs(float(v) - float(now)) for v in values])))
        return out


class Shown:
    """An explorer on a page: ``_repr_mimebundle_`` offers the live widget (Jupyter and
    Colab pick it) and ``text/html`` (the HTML book picks it: the static player, or the
    current figure when ``static`` is False), so the figure appears once everywhere."""

    def __init__(self, explorer: _Explorer, static: bool):
        self.explorer, self.static = explorer, static

    def html(self, current: bytes | None = None) -> str:
        """The ``text/html`` part: a self-contained player (sliders and menus over the
        precomputed frames, a few lines of JavaScript) or one ``<img>`` (``current``: the
        PNG of the figure at the current settings, when the live widget has drawn it)."""
        name = type(self.explorer).__name__
        if not self.static:
            data = base64.b64encode(current or _png(self.explorer.figure())).decode()
            return f'<img class="icl-explorer" alt="{name} at its default setting" src="data:image/png;base64,{data}"/>'
        grid, frames = self.explorer.frames()
        return player_html(name, grid, frames, self.explorer.start(grid))

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": f"<{type(self.explorer).__name__}: run the notebook for the live explorer>"}
        try:
            widget = self.explorer.widget()
        except ImportError:           # no ipywidgets: the static part alone
            widget = None
        if widget is not None:      # ipywidgets 8 has _repr_mimebundle_; 7 (Colab's) has the model id
            view = (widget._repr_mimebundle_() if hasattr(widget, "_repr_mimebundle_") else
                    {VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": widget._model_id}})
            bundle.update({k: v for k, v in view.items() if k != "text/plain"})
        image = getattr(widget, "icl_image", None)        # the live widget's figure: not drawn twice
        bundle["text/html"] = self.html(image.value if image is not None else None)
        return bundle


def player_html(name: str, grid: dict, frames: dict, start: list[int]) -> str:
    """A static player: one range slider per numeric control and one menu per text control,
    over ``frames`` (``{"i,j,...": png}``), starting at the indices ``start``; moving a control
    shows the frame of the new combination. No kernel, no network: the frames are data URIs."""
    uid = "icl-player-" + hashlib.sha1(f"{name}{sorted(frames)}".encode()).hexdigest()[:8]
    controls = []
    for k, (cname, values) in enumerate(grid.items()):
        label = html.escape(cname.replace("_", " "))
        if isinstance(values[0], str):
            options = "".join(f'<option value="{i}"{" selected" if i == start[k] else ""}>{html.escape(v)}</option>'
                              for i, v in enumerate(values))
            controls.append(f'<label>{label} <select data-k="{k}">{options}</select></label>')
        else:
            controls.append(f'<label>{label} <input type="range" data-k="{k}" min="0" max="{len(values) - 1}" '
                            f'step="1" value="{start[k]}"/> <output>{values[start[k]]:g}</output></label>')
    data = {key: "data:image/png;base64," + base64.b64encode(png).decode() for key, png in frames.items()}
    labels = [[v if isinstance(v, str) else f"{v:g}" for v in values] for values in grid.values()]
    first = ",".join(map(str, start))
    shape = " x ".join(str(len(v)) for v in grid.values())
    return (f'<div class="icl-player" id="{uid}" data-frames="{len(frames)}">'
            f'<div class="icl-player-controls">{" ".join(controls)}</div>'
            f'<img class="icl-player-frame" alt="{html.escape(name)}, precomputed" src="{data[first]}"/>'
            f'<p class="icl-player-note">Precomputed when the book was built ({len(frames)} frames: {shape} '
            f'values). Open the notebook (Colab button above) for the live explorer over every value.</p>'
            f'<script>(function(){{const root=document.getElementById("{uid}");'
            f'const frames={json.dumps(data)};const labels={json.dumps(labels)};'
            f'const controls=[...root.querySelectorAll("[data-k]")];const img=root.querySelector("img");'
            f'function update(){{const key=controls.map(c=>c.value).join(",");'
            f'controls.forEach(c=>{{const o=c.parentElement.querySelector("output");'
            f'if(o)o.textContent=labels[+c.dataset.k][+c.value];}});img.src=frames[key];}}'
            f'controls.forEach(c=>{{c.addEventListener("input",update);c.addEventListener("change",update);}});'
            f'}})();</script></div>')


class BaselineExplorer(_Explorer):
    """Error of OLS, ridge (the posterior mean), 3-NN and averaging against the number of
    examples, for Gaussian linear regression in dimension ``d`` with label noise ``sigma``;
    the dashed line is the exact OLS risk ``sigma^2 + sigma^2 d/(n-d-1)`` (divided by d).

    Args:
        d, noise, n_max: initial slider values. n_prompts: Monte Carlo prompts per redraw.
    """

    STATIC = {"d": [2, 5, 10, 20], "noise": [0.0, 0.5, 1.0]}

    def __init__(self, d: int = 5, noise: float = 0.5, n_max: int = 30, n_prompts: int = 400,
                 seed: int = 0):
        self.d, self.noise, self.n_max = d, noise, n_max
        self.n_prompts, self.seed = n_prompts, seed
        self._widget = None

    def curves(self):
        sampler = LinearRegression(self.d, noise_std=self.noise)
        lam = max(self.noise ** 2, 1e-3)
        return error_vs_context({"ols": ols, "ridge": partial(ridge, lam=lam),
                                 "3-nn": partial(knn, k=3), "averaging": averaging},
                                sampler, self.n_max + 1, n_prompts=self.n_prompts,
                                seed=self.seed, n_boot=200)

    def figure(self):
        """The explorer's figure at its current settings."""
        n = np.arange(self.n_max + 1)
        risk = np.array([ols_excess_risk(k, self.d, self.noise) if abs(k - self.d) > 1
                         else np.nan for k in n])
        fig, ax = plt.subplots(figsize=(6, 3.8))
        error_curves(self.curves(), ax=ax,
                     theory={"ols theory": (n, (risk + self.noise ** 2) / self.d)},
                     title=f"d = {self.d}, noise sigma = {self.noise:g}", ylim=(-0.05, 2.0))
        fig.tight_layout()
        return fig

    def widget(self):
        """The live explorer: sliders for d, n_max and noise over the figure."""
        import ipywidgets as W
        controls = {"d": W.IntSlider(value=self.d, min=1, max=20, description="d"),
                    "n_max": W.IntSlider(value=self.n_max, min=5, max=60, description="n max"),
                    "noise": W.FloatSlider(value=self.noise, min=0.0, max=2.0, step=0.1,
                                           description="noise")}
        return _live(self, controls, [["d", "n_max", "noise"]])


class LSAExplorer(_Explorer):
    """Zhang et al.'s trained LSA, ``y_hat = x_q^T (kappa I) (1/M) sum y_i x_i`` with the kappa
    its training distribution gives (identity: N/(N+d+1); Exp(1) random diagonal:
    2/(6+(2d+10)/N)), tested on identity or c * diag(Exp(1)) covariances.

    Left: normalised error against the test length M: the closed form (line), a Monte Carlo of
    the same predictor (dots), the zero estimator (dashed). Right: the LSA's predictions
    against the true labels at the chosen M: under covariate scaling the slope is about
    kappa * c (times E lambda^2 / E lambda = 2 for Exp(1)) instead of 1.
    """

    STATIC = {"N": [5, 20, 80], "c": [1.0, 4.0, 9.0], "test": ["identity", "random"]}

    def __init__(self, d: int = 5, N: int = 20, M: int = 40, c: float = 1.0,
                 train: str = "random", test: str = "random", n_prompts: int = 2000, seed: int = 0):
        self.d, self.N, self.M, self.c = d, N, M, c
        self.train, self.test, self.n_prompts, self.seed = train, test, n_prompts, seed

    def kappa(self) -> float:
        from .theory import zhang as Z
        return (Z.kappa_random(self.d, self.N) if self.train == "random"
                else Z.kappa_identity(self.d, self.N))

    def _sampler(self):
        if self.test == "random":
            return LinearRegression(self.d, cov="random_diag", cov_scale=self.c)
        return LinearRegression(self.d, cov_scale=self.c)

    def figure(self):
        """The explorer's figure at its current settings."""
        import torch

        from .plotting import use_style
        from .theory import zhang as Z
        use_style()
        kap, d, c = self.kappa(), self.d, self.c
        Ms = np.unique(np.geomspace(1, 200, 25).astype(int))
        test = self.test
        theory = [Z.fig1_lsa_error(kap, d, int(M), test, c) if test == "random"
                  else Z.error_at_P(kap * np.eye(d), int(M), c * np.eye(d)) / d for M in Ms]
        sampler = self._sampler()
        mc = []
        for M in Ms[::3]:
            p = sampler.sample(self.n_prompts, int(M) + 1, seed=self.seed + int(M))
            g = (p.y[:, :-1, None] * p.x[:, :-1]).mean(1)
            pred = kap * (p.x[:, -1] * g).sum(-1)
            mc.append(float(((pred - p.y[:, -1]) ** 2).mean() / d))
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8))
        ax.loglog(Ms, theory, color="#9c1f7a", label=f"LSA, closed form (kappa={kap:.3f})")
        ax.loglog(Ms[::3], mc, "o", color="#9c1f7a", ms=4, label="LSA, Monte Carlo")
        ax.axhline(c, color="0.5", ls="--", label="zero estimator")
        ax.axvline(self.M, color="0.7", lw=0.8, ls=":")
        ax.set_xlabel("test prompt length M"); ax.set_ylabel("squared error / d")
        ax.set_title(f"trained on {self.train} cov., N={self.N}; tested on {test} cov., c={c:g}")
        ax.legend(fontsize=8)
        p = sampler.sample(400, self.M + 1, seed=self.seed)
        g = (p.y[:, :-1, None] * p.x[:, :-1]).mean(1)
        pred = kap * (p.x[:, -1] * g).sum(-1)
        lim = float(torch.quantile(p.y[:, -1].abs(), 0.98)) * 1.2
        bx.scatter(p.y[:, -1], pred, s=6, alpha=0.5, color="#9c1f7a")
        bx.plot([-lim, lim], [-lim, lim], color="black", lw=1, label="y_hat = y")
        slope = float((pred * p.y[:, -1]).sum() / (p.y[:, -1] ** 2).sum())
        bx.set_xlim(-lim, lim); bx.set_ylim(-lim, lim)
        bx.set_xlabel("true label <w, x_q>"); bx.set_ylabel("LSA prediction")
        bx.set_title(f"M = {self.M}: regression slope {slope:.2f}")
        bx.legend(fontsize=8)
        fig.tight_layout()
        return fig

    def widget(self):
        """The live explorer: sliders for N, M, c and the train / test covariance kinds."""
        import ipywidgets as W
        kinds = ["identity", "random"]
        controls = {"N": W.IntSlider(value=self.N, min=2, max=200, description="train N"),
                    "M": W.IntSlider(value=self.M, min=1, max=200, description="test M"),
                    "c": W.FloatSlider(value=self.c, min=0.25, max=9.0, step=0.25, description="scale c"),
                    "train": W.Dropdown(options=kinds, value=self.train, description="train cov"),
                    "test": W.Dropdown(options=kinds, value=self.test, description="test cov")}
        return _live(self, controls, [["N", "M", "c"], ["train", "test"]])


class WindowExplorer(_Explorer):
    """Collins et al.'s softmax unit as a nearest-neighbour smoother on the circle (d = 2).

    A two-piece ReLU task of Lipschitz constant L, n noisy context points, and the unit with
    the population-optimal window ``M = w* I`` for (L, sigma, n) (Monte Carlo). Left: the
    task, the context, the attention weights the query at angle 0.5 puts on each context point
    (bars, right axis) and the unit's estimate around the whole circle. Right: the loss, its
    bias and noise parts against w, with w* marked.
    """

    STATIC = {"L": [0.3, 1.0, 2.0, 5.0], "n": [15, 60, 200]}

    def __init__(self, L: float = 1.0, sigma: float = 0.3, n: int = 40, seed: int = 0,
                 num_tasks: int = 800):
        self.L, self.sigma, self.n, self.seed, self.num_tasks = L, sigma, n, seed, num_tasks

    def figure(self):
        import torch

        from .plotting import use_style
        from .tasks import LipschitzTask
        from .theory import collins as C
        use_style()
        ws = C.DEFAULT_WS
        S, N = C.loss_terms(ws, "relu", self.L, self.n, 2, self.num_tasks, self.seed)
        loss = S + self.sigma ** 2 * N
        w = float(ws[np.argmin(loss)])
        task = LipschitzTask(2, "relu", self.L, self.sigma)
        p = task.sample(1, self.n + 1, seed=self.seed + 1)
        ctx_theta = torch.atan2(p.x[0, :-1, 1], p.x[0, :-1, 0]).numpy()
        grid = np.linspace(-np.pi, np.pi, 400)
        gx = torch.tensor(np.stack([np.cos(grid), np.sin(grid)], -1), dtype=torch.float32)[None]
        clean = task.evaluate(gx, p.task)[0].numpy()
        a = torch.softmax(w * gx[0] @ p.x[0, :-1].T, -1)              # (400, n)
        estimate = (a @ p.y[0, :-1]).numpy()
        q = 0.5
        xq = torch.tensor([[np.cos(q), np.sin(q)]], dtype=torch.float32)
        aq = torch.softmax(w * xq @ p.x[0, :-1].T, -1)[0].numpy()
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(10.5, 3.8))
        ax.plot(grid, clean, color="black", lw=1.2, label="task f")
        ax.scatter(ctx_theta, p.y[0, :-1], s=14, color="0.45", label="noisy context")
        ax.plot(grid, estimate, color="#1f4e9c", lw=1.5, label=f"softmax estimate, w* = {w:.2f}")
        ax.axvline(q, color="#c0392b", lw=1, ls=":", label="query")
        ax2 = ax.twinx()
        ax2.bar(ctx_theta, aq, width=0.04, color="#d9822b", alpha=0.6)
        ax2.set_ylabel("attention weight of the query", color="#d9822b")
        ax2.set_ylim(0, max(0.05, 2.5 * aq.max()))
        ax.set_xlabel("angle on the circle"); ax.set_ylabel("label")
        ax.set_title(f"L = {self.L:g}, sigma = {self.sigma:g}, n = {self.n}")
        ax.legend(fontsize=7, loc="lower left")
        wsp = ws[1:]
        bx.loglog(wsp, loss[1:], color="black", label="ICL loss")
        bx.loglog(wsp, S[1:], "--", color="#1f4e9c", label="bias (signal)")
        bx.loglog(wsp, self.sigma ** 2 * N[1:], ":", color="#d9822b", label="noise")
        bx.axvline(max(w, wsp[0]), color="#c0392b", lw=1, label="w*")
        bx.set_xlabel("window scale w (M = w I)"); bx.set_ylabel("loss")
        bx.set_title(f"Monte Carlo over {self.num_tasks} tasks"); bx.legend(fontsize=7)
        fig.tight_layout()
        return fig

    def widget(self):
        """The live explorer: sliders for L, sigma and n."""
        import ipywidgets as W
        controls = {"L": W.FloatLogSlider(value=self.L, base=10, min=-1, max=1, step=0.1, description="L"),
                    "sigma": W.FloatSlider(value=self.sigma, min=0.0, max=2.0, step=0.05, description="sigma"),
                    "n": W.IntSlider(value=self.n, min=4, max=200, description="n")}
        return _live(self, controls, [["L", "sigma", "n"]])


class FunctionalGDExplorer(_Explorer):
    """Cheng et al.'s functional gradient descent on the circle (d = 2): a GP draw with the
    data kernel (on a fine grid and at n context points, jointly), functional GD in the RKHS
    of the activation's kernel with step 1/lambda_max for L steps (= an L-layer transformer,
    Proposition 3.1), and the Bayes predictor (the GP posterior mean), along the circle."""

    STATIC = {"data_kernel": ["relu", "exp"], "activation": ["linear", "relu", "exp"], "depth": [1, 5, 50]}

    def __init__(self, data_kernel: str = "exp", activation: str = "exp", depth: int = 3,
                 n: int = 8, seed: int = 0):
        self.data_kernel, self.activation, self.depth, self.n, self.seed = data_kernel, activation, depth, n, seed

    def figure(self):
        import torch

        from .baselines import functional_gd, gp_posterior_mean
        from .kernels import flipped_root, gram
        from .plotting import use_style
        use_style()
        g = torch.Generator().manual_seed(self.seed)
        grid = np.linspace(-np.pi, np.pi, 200)
        ang = np.concatenate([np.sort(torch.rand(self.n, generator=g).numpy() * 2 * np.pi - np.pi), grid])
        pts = torch.tensor(np.stack([np.cos(ang), np.sin(ang)], -1), dtype=torch.float64)
        root = flipped_root(gram(pts, pts, self.data_kernel), 1e-9)
        f = root @ torch.randn(len(pts), generator=g, dtype=torch.float64)
        xc, yc, xg = pts[:self.n], f[:self.n], pts[self.n:]
        act = self.activation
        lam = torch.linalg.eigvalsh(gram(xc, xc, act)).max().item()
        fgd = functional_gd(xc, yc, xg, act, self.depth, 1.0 / max(lam, 1e-12))
        bayes = gp_posterior_mean(xc, yc, xg, self.data_kernel)
        fig, ax = plt.subplots(figsize=(7, 3.6))
        ax.plot(grid, f[self.n:], color="0.6", lw=1, label=f"GP draw ({self.data_kernel} kernel)")
        ax.plot(grid, bayes, color="black", lw=1.5, label="Bayes (posterior mean)")
        ax.plot(grid, fgd, color="#1f4e9c", lw=1.5, ls="--",
                label=f"functional GD, {act} kernel, {self.depth} steps")
        ax.scatter(ang[:self.n], yc, color="#c0392b", zorder=3, s=18, label=f"context (n = {self.n})")
        ax.set_xlabel("angle on the circle"); ax.set_ylabel("label")
        gap = float(((fgd - bayes) ** 2).mean())
        ax.set_title(f"mean squared gap to Bayes along the circle: {gap:.3g}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        return fig

    def widget(self):
        """Dropdowns for the data kernel and the activation, sliders for depth and n."""
        import ipywidgets as W
        controls = {"data_kernel": W.Dropdown(options=["linear", "relu", "exp"], value=self.data_kernel, description="data kernel"),
                    "activation": W.Dropdown(options=["linear", "relu", "exp"], value=self.activation, description="activation"),
                    "depth": W.IntSlider(value=self.depth, min=0, max=50, description="depth L"),
                    "n": W.IntSlider(value=self.n, min=2, max=30, description="n")}
        return _live(self, controls, [["data_kernel", "activation"], ["depth", "n"]])


class PreGDExplorer(_Explorer):
    """Chen et al.'s pre-GD against plain GD and ridge on sparse regression: excess risk
    ``||w_hat - w*||^2`` against the number of GD steps, each method at its best step size on
    the paper's grid (lowest mean risk over the steps) and ridge at its best lambda (a flat
    line), for ``d``, ``s`` nonzeros (Gaussian), ``n`` examples and noise ``sigma``."""

    STATIC = {"s": [1, 4, 16], "n": [5, 10, 40], "sigma": [0.1, 1.0]}

    def __init__(self, d: int = 16, s: int = 4, n: int = 10, sigma: float = 0.1,
                 n_prompts: int = 400, seed: int = 0):
        self.d, self.s, self.n, self.sigma, self.n_prompts, self.seed = d, s, n, sigma, n_prompts, seed

    def curves(self):
        """``(steps, {method: curve}, ridge_risk)``."""
        from .theory.chen import LRS, step_grid
        from .tasks import SparseLinearRegression
        from .theory.chen import excess_risk, ridge_weights, tuned_curves
        s = min(self.s, self.d)
        p = SparseLinearRegression(self.d, s, self.sigma).sample(
            self.n_prompts, self.n + 1, n_context=self.n, seed=self.seed)
        ts = step_grid(10000, 25)
        out = {k: v["curve"] for k, v in tuned_curves(p.x, p.y, p.task["w"], self.n, LRS, ts).items()}
        X, y = p.x[:, :self.n], p.y[:, :self.n]
        ridge_risk = min(float(excess_risk(ridge_weights(X, y, lam), p.task["w"]).mean())
                         for lam in (1.0, 0.1, 0.01, 0.001, 1e-4))
        return ts, out, ridge_risk

    def figure(self):
        from .plotting import use_style
        use_style()
        ts, out, ridge_risk = self.curves()
        fig, ax = plt.subplots(figsize=(7, 3.6))
        ax.plot(ts[1:], out["gd"][1:], color="#1f4e9c", label="gd (raw x)")
        ax.plot(ts[1:], out["pre-gd"][1:], color="#c0392b", label="pre-gd (Algorithm 1, then GD)")
        ax.axhline(ridge_risk, color="0.4", ls="--", label="ridge, best lambda")
        ax.set_xscale("log")
        ax.set_xlabel("GD steps t"); ax.set_ylabel("excess risk")
        ax.set_title(f"d = {self.d}, s = {min(self.s, self.d)}, n = {self.n}, sigma = {self.sigma:g}: "
                     f"best pre-gd {np.min(out['pre-gd']):.2f} vs gd {np.min(out['gd']):.2f}", fontsize=9)
        ax.legend(fontsize=7)
        fig.tight_layout()
        return fig

    def widget(self):
        """Sliders for d, s, n and sigma."""
        import ipywidgets as W
        controls = {"d": W.IntSlider(value=self.d, min=2, max=64, description="d"),
                    "s": W.IntSlider(value=self.s, min=1, max=64, description="s"),
                    "n": W.IntSlider(value=self.n, min=2, max=200, description="n"),
                    "sigma": W.FloatSlider(value=self.sigma, min=0.0, max=2.0, step=0.05, description="sigma")}
        return _live(self, controls, [["d", "s"], ["n", "sigma"]], at_most={"s": "d"})


class MechanismExplorer(_Explorer):
    """The synthesis chapter's explorer: one prompt of a task family with ``n`` examples, and
    the prediction of each mechanism's constructed counterpart (and the references) at 24
    query points, against the true labels (sorted). Counterparts are tuned for this family and
    n on separate prompts (:class:`icl_core.theory.synthesis.Counterparts`)."""

    STATIC = {"family": list(FAMILIES), "n": [4, 10, 30]}

    def __init__(self, family: str = "sparse", n: int = 10, d: int = 8, seed: int = 0):
        self.family, self.n, self.d, self.seed = family, n, d, seed

    def figure(self):
        from .plotting import use_style
        from .theory.synthesis import MECHANISMS, Counterparts, reference_predictions
        use_style()
        cp = Counterparts(self.family, self.d, self.n, n_train=20, tune_prompts=200, seed=self.seed)
        p = cp.task.sample(1, self.n + 24, n_context=self.n, seed=self.seed + 1000)
        yq = p.y[0, self.n:].double()
        order = yq.argsort()
        preds = {f"{m} (constructed)": cp.predict(m, p.x, p.y, self.n)[0] for m in MECHANISMS}
        refs = ["ridge"] + (["gp posterior"] if self.family in ("lipschitz", "gp") else ["lasso"])
        preds.update({r: reference_predictions(r, p.x, p.y, self.n)[0] for r in refs})
        fig, ax = plt.subplots(figsize=(7.5, 3.8))
        ax.plot(range(24), yq[order], "k-", lw=2, label="true label")
        markers = "os^dvx*"
        for (name, pr), mk in zip(preds.items(), markers):
            err = float(((pr - yq) ** 2).mean() / (yq ** 2).mean())
            ax.plot(range(24), pr[order], mk, ms=4, label=f"{name}: {err:.2f}")
        ax.set_xlabel("query (sorted by its label)"); ax.set_ylabel("prediction")
        ax.set_title(f"{self.family} family, n = {self.n} examples (legend: normalised error on these 24)", fontsize=9)
        ax.legend(fontsize=6, ncol=2)
        fig.tight_layout()
        return fig

    def widget(self):
        """A dropdown for the family and a slider for n."""
        import ipywidgets as W
        from .theory.synthesis import FAMILIES
        controls = {"family": W.Dropdown(options=list(FAMILIES), value=self.family, description="family"),
                    "n": W.IntSlider(value=self.n, min=2, max=60, description="n")}
        return _live(self, controls, [["family", "n"]])


def _live(explorer, controls: dict, rows: list[list[str]], at_most: dict | None = None):
    """Controls over the explorer's figure (a PNG in an ``Image`` widget): each change sets
    the explorer's attribute of the same name and redraws. Sliders update on release, not on
    every value a drag passes (``continuous_update=False``: one redraw per move).
    ``at_most``: ``{"s": "d"}`` keeps slider s's maximum at slider d's value (s <= d), so no
    slider offers a value the explorer would clamp silently."""
    import ipywidgets as W
    for control in controls.values():
        if hasattr(control, "continuous_update"):
            control.continuous_update = False
    for low, high in (at_most or {}).items():
        def follow(change, low=low):
            controls[low].max = change["new"]        # ipywidgets clamps the value to the new max
        controls[low].max = controls[high].value
        controls[high].observe(follow, names="value")
    image = W.Image(value=_png(explorer.figure()), format="png")

    def redraw(_change):
        for name, control in controls.items():
            setattr(explorer, name, control.value)
        image.value = _png(explorer.figure())

    for control in controls.values():
        control.observe(redraw, names="value")
    box = W.VBox([*(W.HBox([controls[n] for n in row]) for row in rows), image])
    box.icl_image = image
    return box


def _png(fig, dpi=None) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
