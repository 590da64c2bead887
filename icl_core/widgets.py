"""Interactive explorers used by the chapters.

Each explorer is a plain ipywidgets layout whose sliders ``observe`` a redraw of a PNG in
an ``Image`` widget (no ``interact``, no ``Output`` widget: under nbclient those can stall
a cell for its whole timeout, see ``shared/specs/toolchain.md``). Each also exposes
``figure()`` for the static view shown in the HTML book, where no kernel runs.
"""
from __future__ import annotations

import io
from functools import partial

import matplotlib.pyplot as plt
import numpy as np

from .baselines import averaging, knn, ols, ridge
from .evaluation import error_vs_context
from .plotting import error_curves
from .tasks import LinearRegression
from .theory.linear import ols_excess_risk


class BaselineExplorer:
    """Error of OLS, ridge (the posterior mean), 3-NN and averaging against the number of
    examples, for Gaussian linear regression in dimension ``d`` with label noise ``sigma``;
    the dashed line is the exact OLS risk ``sigma^2 + sigma^2 d/(n-d-1)`` (divided by d).

    Args:
        d, noise, n_max: initial slider values. n_prompts: Monte Carlo prompts per redraw.
    """

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

    def _png(self) -> bytes:
        fig = self.figure()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        return buf.getvalue()

    def widget(self):
        """The live explorer: sliders for d, n_max and noise over the figure."""
        import ipywidgets as W
        d = W.IntSlider(value=self.d, min=1, max=20, description="d")
        n_max = W.IntSlider(value=self.n_max, min=5, max=60, description="n max")
        noise = W.FloatSlider(value=self.noise, min=0.0, max=2.0, step=0.1, description="noise")
        image = W.Image(value=self._png(), format="png")

        def redraw(_change):
            self.d, self.n_max, self.noise = d.value, n_max.value, noise.value
            image.value = self._png()

        for s in (d, n_max, noise):
            s.observe(redraw, names="value")
        self._widget = W.VBox([W.HBox([d, n_max, noise]), image])
        return self._widget
