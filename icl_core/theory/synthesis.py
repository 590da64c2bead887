"""The four mechanisms of the book on one shared set of task families: the families, the
constructed / closed-form counterpart of each mechanism and the reference estimators (the
synthesis chapter; its recipe ``synthesis.compare`` trains the mechanisms and compares).

Families (all in dimension ``d``, labels scaled so the zero predictor has error about 1):
``linear`` (Garg et al.; Zhang et al.), ``sparse`` (Chen et al.), ``lipschitz`` (ReLU on the
sphere, Collins et al.), ``gp`` (exp-kernel GP on the sphere, Cheng et al.); covariates have
``E||x||^2 = 1`` in every family. See :mod:`icl_core.recipes.synthesis` for the full account.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from ..baselines import functional_gd, gp_posterior_mean, lasso_weights, ols_weights
from ..models import SoftmaxUnit
from ..prompts import derive_seed
from ..tasks import GPTask, LinearRegression, LipschitzTask, SparseLinearRegression
from ..validation import check_choice
from .chen import pre_gd_weights, ridge_weights
from .zhang import lsa_predict

FAMILIES = ("linear", "sparse", "lipschitz", "gp")
MECHANISMS = ("lsa", "softmax", "multihead", "kernel")
REFERENCES = ("ols", "ridge", "lasso", "gp posterior")


def family_task(name: str, d: int):
    """The task sampler of a family (see the module docstring)."""
    check_choice("family", name, set(FAMILIES))
    if name == "linear":
        return LinearRegression(d, 0.1, cov_scale=1.0 / d)
    if name == "sparse":
        return _ScaledSparse(d, max(1, d // 4), 0.1)
    if name == "lipschitz":
        return LipschitzTask(d, "relu", L=2.0, noise_std=0.1)
    return GPTask(d, "exp", sigma="identity", seed=0)


class _ScaledSparse(SparseLinearRegression):
    """Sparse regression with ``x ~ N(0, I/d)`` and nonzeros ``N(0, d/s)`` (so ``E y^2 = 1``)."""

    def sample_x(self, batch_size, n_points, g):
        return super().sample_x(batch_size, n_points, g) / self.d ** 0.5

    def sample_task(self, batch_size, g):
        task = super().sample_task(batch_size, g)
        task["w"] = task["w"] * (self.d / self.s) ** 0.5
        return task


@lru_cache(maxsize=None)
def second_moment(family: str, d: int, seed: int = 0) -> np.ndarray:
    """``E[x x^T]`` of a family's covariates (Monte Carlo, 22k points; computed once per
    family, d and seed)."""
    x = family_task(family, d).sample(2000, 11, seed=seed).x.reshape(-1, d).double()
    return (x.T @ x / len(x)).numpy()


class Counterparts:
    """The closed-form / constructed counterparts of the four mechanisms for one family and one
    context length ``n``, their free constants (window, step sizes, step count) tuned on
    ``tune_prompts`` separate prompts with ``n`` examples. The LSA counterpart uses the
    training length ``n_train`` in ``Gamma``, as the trained LSA does."""

    def __init__(self, family: str, d: int, n: int, n_train: int, kernel_steps: int = 3,
                 tune_prompts: int = 300, seed: int = 0):
        self.family, self.d, self.n, self.n_train, self.kernel_steps = family, d, n, n_train, kernel_steps
        self.task = family_task(family, d)
        self.Lam = second_moment(family, d, seed)
        tune = self.task.sample(tune_prompts, n + 1, n_context=n, seed=derive_seed(seed, 11, n))
        x, y = tune.x.double(), tune.y.double()
        yq = y[:, n]
        err = lambda pred: float(((pred - yq) ** 2).mean())  # noqa: E731
        ws = np.r_[0.0, np.logspace(-1, 2.5, 30)]
        self.window = float(ws[np.argmin([err(self._softmax(x, y, n, w)[:, 0]) for w in ws])])
        ts = np.unique(np.r_[0, np.round(np.logspace(0, 3, 20)).astype(int)])
        best = (np.inf, 0.5, 0)
        for lr in (0.05, 0.15, 0.5, 0.95):     # fractions of 2 / lambda_max: never diverges
            u = pre_gd_weights(x[:, :n + 1], y[:, :n + 1], n, lr, ts, relative=True)[1]   # (T, B, d)
            risks = ((torch.einsum("tbd,bd->tb", u, x[:, n]) - yq) ** 2).mean(1).numpy()
            risks = np.where(np.isfinite(risks), risks, np.inf)
            if risks.min() < best[0]:
                best = (float(risks.min()), lr, int(ts[int(np.argmin(risks))]))
        _, self.pregd_lr, self.pregd_steps = best
        steps = [1.5, 1.0, 0.5, 0.3, 0.1]      # r * n (the functional step r is this over n)
        self.kernel_step = steps[int(np.argmin([err(functional_gd(x[:, :n], y[:, :n], x[:, n:], "exp",
                                                                  kernel_steps, s / n)[:, 0]) for s in steps]))]

    @staticmethod
    def _softmax(x, y, n, w):
        """The softmax unit itself with ``M = w I`` (float64)."""
        unit = SoftmaxUnit(x.shape[-1], param="M", init_scale=float(w)).double()
        with torch.no_grad():
            return unit(x, y, n)

    def predict(self, mechanism: str, x: torch.Tensor, y: torch.Tensor, n: int) -> torch.Tensor:
        """``(B, q)`` predictions of the counterpart of ``mechanism`` at the queries."""
        x, y = x.double(), y.double()
        if mechanism == "lsa":
            return torch.as_tensor(lsa_predict(x[:, :n], y[:, :n], x[:, n:], self.Lam, self.n_train))
        if mechanism == "softmax":
            return self._softmax(x, y, n, self.window)
        if mechanism == "multihead":
            u = pre_gd_weights(x, y, n, self.pregd_lr, [self.pregd_steps], relative=True)[1][0]
            return torch.einsum("bqd,bd->bq", x[:, n:], u)
        if mechanism == "kernel":
            return functional_gd(x[:, :n], y[:, :n], x[:, n:], "exp", self.kernel_steps, self.kernel_step / n)
        raise ValueError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")


def reference_predictions(name: str, x: torch.Tensor, y: torch.Tensor, n: int, lams=(1.0, 0.1, 0.01, 0.001),
                          alphas=(0.1, 0.03, 0.01, 0.003), lasso_iters: int = 300) -> torch.Tensor:
    """``(B, q)`` predictions of a reference estimator; ridge and Lasso take the grid value
    with the lowest error on these prompts (an oracle tuning, stated in the chapter)."""
    x, y = x.double(), y.double()
    X, Y, Q = x[:, :n], y[:, :n], x[:, n:]
    lin = lambda w: torch.einsum("bqd,bd->bq", Q, w)  # noqa: E731
    if name == "ols":
        return lin(ols_weights(X, Y))
    if name == "gp posterior":
        return gp_posterior_mean(X, Y, Q, "exp", jitter=1e-6)
    if name in ("ridge", "lasso"):
        fits = [ridge_weights(X, Y, lam) for lam in lams] if name == "ridge" else \
            [lasso_weights(X, Y, a, lasso_iters) for a in alphas]
        preds = [lin(w) for w in fits]
        return min(preds, key=lambda p: float(((p - y[:, n:]) ** 2).mean()))
    raise ValueError(f"reference must be one of {REFERENCES}, got {name!r}")
