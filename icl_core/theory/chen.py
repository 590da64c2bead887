"""Chen, Zhao, Zou (NeurIPS 2024): preprocess-then-optimize for in-context sparse regression.

Conventions (the library's; the paper's differences are converted here and stated once):

* prompts are batch first, ``x (B, n+q, d)``, ``y (B, n+q)``; the first ``n_context`` points
  are labelled (the paper's n), the rest are queries (its q);
* Algorithm 1: ``r_hat = X^T y / n`` from the context only, ``x~ = diag(r_hat) x`` for every
  point (context and queries);
* GD runs on ``L(w) = (1/2n) sum_i (y_i - <w, x_i>)^2`` from ``w = 0`` (Proposition 4.2);
* excess risk ``E (yhat - y)^2 - sigma^2 = ||Sigma^{1/2}(w_eff - w*)||^2`` without the 1/2 of
  the paper's Section 5 (its appendix drops it too);
* ridge in the theory's normalised form ``(X^T X / n + lam I)^{-1} X^T y / n`` (Appendix F.2).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..validation import check_float, check_int


def _check_prompts(x, y, n_context):
    if x.dim() != 3:
        raise ValueError(f"x must have shape (B, n+q, d), got {tuple(x.shape)}")
    if y.shape != x.shape[:2]:
        raise ValueError(f"y must have shape (B, n+q) = {tuple(x.shape[:2])}, got {tuple(y.shape)}")
    return check_int("n_context", n_context, minimum=1, maximum=x.shape[1])


def correlations(x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
    """``r_hat_j = (1/n) sum_{i<=n} x_ij y_i``: ``(B, d)`` (Algorithm 1, line 2)."""
    n = _check_prompts(x, y, n_context)
    return (x[:, :n] * y[:, :n].unsqueeze(-1)).mean(1)


def preprocess(x: torch.Tensor, y: torch.Tensor, n_context: int) -> torch.Tensor:
    """Algorithm 1: ``x~_k = diag(r_hat) x_k`` for all ``n+q`` points, with ``r_hat`` from the
    first ``n_context`` points.

    Args:
        x: ``(B, n+q, d)``; y: ``(B, n+q)`` (query labels are never read);
        n_context: n, in [1, n+q].

    Returns:
        ``(B, n+q, d)`` preprocessed covariates.
    """
    return x * correlations(x, y, n_context).unsqueeze(1)


def gd_path(X: torch.Tensor, y: torch.Tensor, lr: float, steps) -> torch.Tensor:
    """Gradient descent from 0 on ``(1/2n)||y - X w||^2``, in closed form.

    With ``X^T X / n = V diag(lam) V^T``, ``w_t = V diag((1 - (1 - lr lam)^t) / lam) V^T X^T y / n``
    (``lr t`` where ``lam = 0``), so any step count costs one eigendecomposition (the spec's
    trick that makes 10^4-step curves instant). When ``D > n`` (features wider than the
    examples, e.g. a trained model's hidden states) the iterates stay in the row space of ``X``
    and the same closed form is taken from the ``n x n`` Gram matrix instead:
    ``X X^T / n = U diag(mu) U^T``, ``w_t = X^T U diag((1 - (1 - lr mu)^t) / mu) U^T y / n``.

    Args:
        X: ``(B, n, D)``; y: ``(B, n)``; lr: step size > 0, or a ``(B,)`` tensor of per-prompt
            step sizes; steps: an int K (returns steps 0..K) or a sequence of step counts.

    Returns:
        ``(len(steps), B, D)`` iterates (non-finite where GD diverged).
    """
    if torch.is_tensor(lr):
        if lr.shape != X.shape[:1] or not bool((lr > 0).all()):
            raise ValueError(f"lr as a tensor must be positive with shape (B,) = ({X.shape[0]},)")
        lr = lr.double().unsqueeze(-1)                                   # (B, 1)
    else:
        lr = check_float("lr", lr, minimum=0.0, strict=True)
    ts = np.arange(check_int("steps", steps, minimum=0) + 1) if np.isscalar(steps) \
        else np.asarray(steps)
    if (ts < 0).any():
        raise ValueError(f"steps must be >= 0, got {ts.min()}")
    X, y = X.double(), y.double()
    n, D = X.shape[1], X.shape[2]
    t = torch.as_tensor(ts, dtype=torch.float64).view(-1, 1, 1)

    def factor(lam):                                                   # (T, B, k)
        return torch.where(lam > 1e-12, (1 - (1 - lr * lam) ** t) / lam.clamp(min=1e-12), lr * t)
    if D > n:                                    # the dual form: an n x n eigendecomposition
        mu, U = torch.linalg.eigh(X @ X.transpose(1, 2) / n)           # (B, n), (B, n, n)
        mu = mu.clamp(min=0.0)
        c = (U.transpose(1, 2) @ y.unsqueeze(-1)).squeeze(-1) / n     # (B, n)
        alpha = torch.einsum("tbk,bik->tbi", factor(mu) * c, U)        # (T, B, n)
        return torch.einsum("tbi,bid->tbd", alpha, X)
    lam, V = torch.linalg.eigh(X.transpose(1, 2) @ X / n)          # (B, D), (B, D, D)
    lam = lam.clamp(min=0.0)
    b = (V.transpose(1, 2) @ (X.transpose(1, 2) @ y.unsqueeze(-1))).squeeze(-1) / n  # (B, D)
    return torch.einsum("tbk,bdk->tbd", factor(lam) * b, V)


def preconditioned_gd_path(X: torch.Tensor, y: torch.Tensor, P: torch.Tensor, lr: float,
                           steps: int) -> torch.Tensor:
    """``u <- u - lr P grad L_n(u)`` from 0 with a diagonal preconditioner ``P (B, d)``:
    ``(steps + 1, B, d)``. With ``P = r_hat^2`` this is pre-GD seen on the raw covariates
    (``u^t = diag(r_hat) w~^t``, the spec's reparametrisation, Section 4.3)."""
    X, y, P = X.double(), y.double(), P.double()
    n = X.shape[1]
    u = torch.zeros(X.shape[0], X.shape[2], dtype=torch.float64)
    out = [u]
    for _ in range(check_int("steps", steps, minimum=0)):
        grad = -(X.transpose(1, 2) @ (y - (X @ u.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)).squeeze(-1) / n
        u = u - lr * P * grad
        out.append(u)
    return torch.stack(out)


def gd_iterative(X: torch.Tensor, y: torch.Tensor, lr: float, steps: int) -> torch.Tensor:
    """The iterates of :func:`gd_path` by the explicit recursion ``w <- w + (lr/n) X^T (y - X w)``
    (the preconditioned recursion with ``P = 1``): ``(steps + 1, B, D)``."""
    return preconditioned_gd_path(X, y, torch.ones(X.shape[0], X.shape[2]), lr, steps)


def pre_gd_weights(x: torch.Tensor, y: torch.Tensor, n_context: int, lr, steps,
                   relative: bool = False):
    """Algorithm 1 then GD from 0 on the preprocessed context.

    ``relative=True`` reads ``lr`` as a fraction of ``2 / lambda_max`` of each prompt's
    preprocessed covariance (``lr`` in (0, 1) never diverges), for data whose scale varies.

    Returns ``(w_tilde, u)``, both ``(len(steps), B, d)``: the GD iterates on ``x~`` and the
    effective weights on the raw covariates, ``u = diag(r_hat) w_tilde`` (the prediction at a
    query is ``<w_tilde, x~_q> = <u, x_q>``)."""
    n = _check_prompts(x, y, n_context)
    r = correlations(x, y, n).double()
    Xt = x[:, :n].double() * r.unsqueeze(1)
    if relative:
        if not 0 < lr < 1:
            raise ValueError(f"lr must be in (0, 1) with relative=True, got {lr}")
        top = torch.linalg.eigvalsh(Xt.transpose(1, 2) @ Xt / n)[:, -1].clamp(min=1e-300)
        lr = 2 * lr / top
    W = gd_path(Xt, y[:, :n], lr, steps)
    return W, W * r


def bias_variance_path(X: torch.Tensor, w_star: torch.Tensor, eps: torch.Tensor, lr: float, steps,
                       cov: torch.Tensor | None = None) -> dict:
    """Pre-GD's excess risk split into bias and variance along the GD steps (App. D.1, eq. D.4
    and D.6), exactly: with ``r_hat`` from the labels ``y = X w* + eps`` and fixed, GD on
    ``X~ = X diag(r_hat)`` from 0 is linear in its labels, so the effective weights split as
    ``u^t = u^t(X w*) + u^t(eps)``.

    Args: ``X (B, n, d)`` context covariates, ``w_star (B, d)``, ``eps (B, n)`` label noise,
    ``lr`` the GD step on ``X~``, ``steps`` the step counts, ``cov`` Sigma (None: I).
    Returns ``{"bias", "variance", "total", "bound_var"}``, each ``(len(steps), B)``:
    ``||Sigma^{1/2}(u^t(X w*) - w*)||^2``, ``||Sigma^{1/2} u^t(eps)||^2``, the excess risk of
    ``u^t(y)`` (bias + variance + a cross term that averages out only as r_hat's dependence
    on eps fades), and eq. D.7's shape ``lr t log t ||r_hat * X^T eps||^2 / n^2`` (the variance
    bound without its constant; log t read as 1 + log t so that t = 1 is defined)."""
    X, w, e = X.double(), w_star.double(), eps.double()
    n = X.shape[1]
    signal = (X @ w.unsqueeze(-1)).squeeze(-1)                              # (B, n)
    r = correlations(X, signal + e, n)                                       # (B, d) r_hat
    Xt = X * r.unsqueeze(1)
    u_sig = gd_path(Xt, signal, lr, steps) * r                               # (T, B, d)
    u_eps = gd_path(Xt, e, lr, steps) * r
    t = torch.as_tensor(np.asarray(steps), dtype=torch.float64).unsqueeze(-1)     # (T, 1)
    rx = ((r * (X.transpose(1, 2) @ e.unsqueeze(-1)).squeeze(-1)) ** 2).sum(-1)   # (B,)
    return {"bias": excess_risk(u_sig, w, cov), "variance": excess_risk(u_eps, torch.zeros_like(w), cov),
            "total": excess_risk(u_sig + u_eps, w, cov), "bound_var": lr * t * (1 + torch.log(t)) * rx / n ** 2}


def excess_risk(w_hat: torch.Tensor, w_star: torch.Tensor, cov: torch.Tensor | None = None):
    """``||Sigma^{1/2}(w_hat - w*)||^2 = E(<w_hat, x> - y)^2 - sigma^2`` over the last axis
    (``cov=None``: Sigma = I). Broadcasts ``w_hat (..., B, d)`` against ``w* (B, d)``."""
    diff = w_hat.double() - w_star.double()
    if cov is None:
        return (diff ** 2).sum(-1)
    return torch.einsum("...i,ij,...j->...", diff, cov.double(), diff)


def risk_curves(x, y, w_star, n_context, lrs, steps, method="gd", cov=None) -> np.ndarray:
    """Mean excess risk of GD (``method="gd"``) or pre-GD (``"pre-gd"``) from 0 on the first
    ``n_context`` points, for each step size and step count: ``(len(lrs), len(steps))``
    (``inf`` where GD diverged). Exact over the query (closed form in ``w``), Monte Carlo over
    prompts."""
    if method not in ("gd", "pre-gd"):
        raise ValueError(f"method must be 'gd' or 'pre-gd', got {method!r}")
    n = _check_prompts(x, y, n_context)
    out = []
    for lr in lrs:
        if method == "gd":
            u = gd_path(x[:, :n], y[:, :n], lr, steps)
        else:
            u = pre_gd_weights(x, y, n, lr, steps)[1]
        risk = excess_risk(u, w_star, cov).mean(-1).numpy()
        out.append(np.where(np.isfinite(risk), risk, np.inf))
    return np.array(out)


def best_curve(curves: np.ndarray) -> int:
    """Index of the step size whose curve has the lowest mean over the steps (the selection
    rule of the spec for Chen et al. Fig. 2b/2c: "tuned for the lowest average risk")."""
    with np.errstate(invalid="ignore"):
        return int(np.argmin(np.where(np.isfinite(curves), curves, np.inf).mean(1)))


def tuned_curves(x, y, w_star, n_context, lrs, steps, cov=None) -> dict:
    """GD and pre-GD (Fig. 2c) on the same prompts, each at its :func:`best_curve` step size:
    ``{method: {"curve": (len(steps),), "lr": float, "min": float}}``, where ``min`` is the
    lowest risk over every step size and step count."""
    out = {}
    for method in ("gd", "pre-gd"):
        curves = risk_curves(x, y, w_star, n_context, lrs, steps, method, cov=cov)
        b = best_curve(curves)
        out[method] = dict(curve=curves[b], lr=lrs[b], min=float(np.min(curves)))
    return out


def ridge_weights(X: torch.Tensor, y: torch.Tensor, lam: float) -> torch.Tensor:
    """The theory's normalised ridge ``(X^T X/n + lam I)^{-1} X^T y / n``: ``(B, d)`` (the
    library's unnormalised :func:`~icl_core.baselines.ridge_weights` at ``n lam``)."""
    from ..baselines import ridge_weights as unnormalised
    return unnormalised(X, y, lam * X.shape[1])


def ols_expected_risk(d: int, n: int, noise_std: float, w_norm2: float = 1.0) -> float:
    """Expected excess risk of (min-norm) OLS with ``x ~ N(0, I_d)`` (classical; consistent
    with Theorem 5.3's lower bounds): ``sigma^2 d / (n - d - 1)`` for ``n >= d + 2``,
    ``(1 - n/d) ||w||^2 + sigma^2 n / (d - n - 1)`` for ``n <= d - 2``, infinite in between
    (the double-descent spike)."""
    if n >= d + 2:
        return noise_std ** 2 * d / (n - d - 1)
    if n <= d - 2:
        return (1 - n / d) * w_norm2 + noise_std ** 2 * n / (d - n - 1)
    return math.inf


def log_slope(ns, values) -> float:
    """Least-squares slope of ``log(values)`` against ``log(ns)``."""
    return float(np.polyfit(np.log(np.asarray(ns, float)), np.log(np.asarray(values, float)), 1)[0])


def constructed_transformer(d: int, gd_steps: int, step_size: float, n_context: int | None = None,
                            dtype=torch.float64):
    """The transformer of Propositions 4.1 and 4.2: layer 1 has ``d`` heads of size 3 and
    computes Algorithm 1; each of the ``gd_steps`` following single-head layers takes one GD
    step of size ``step_size`` on the preprocessed context. ``d_hid = 3d``.

    Weights (1-indexed as in the paper; the code is 0-indexed):

    * ``W_E``: block i of the hidden state (coordinates 3i-2, 3i-1, 3i) holds ``(x_i, y, 0)``;
    * head i of layer 1: ``W_Q = W_V`` with third row ``e_{3i-2}`` (selects ``x_i``), ``W_K``
      with third row ``e_{3i-1}`` (selects ``y``), so the head adds ``r_hat_i x_i = x~_i`` to
      coordinate 3i; ``W_1`` moves ``x~`` to rows 1..d and ``y`` to row d+1, zero elsewhere;
    * GD layers (eq. C.7): ``W_K = W_Q = diag(I_d, 0)``, ``W_V = -step_size e_{d+1} e_{d+1}^T``,
      ``W_1 = I``: the y-slot of token j becomes ``rho_j - (eta/n) sum_k rho_k <x~_k, x~_j>``;
    * read-out ``W_O = -e_{d+1}``: the query's y-slot holds ``-<w^t, x~_q>`` (the sign the
      paper glosses over, as in Ahn et al. and Cheng et al.).

    Args:
        d: covariate dimension >= 1; gd_steps: t >= 0; step_size: eta > 0;
        n_context: ``None`` gives ``normalize="1/n"`` (one set of weights for every n);
            an integer folds 1/n into ``W_K`` and ``W_V`` as the paper does (``"none"``),
            exact only for prompts with that many examples.

    Returns:
        a :class:`~icl_core.models.MultiHeadLinearTransformer` whose prediction equals
        Algorithm 1 followed by ``gd_steps`` steps of GD (:func:`pre_gd_weights`).
    """
    from ..models.multihead_linear import MultiHeadLinearTransformer
    d = check_int("d", d, minimum=1)
    t = check_int("gd_steps", gd_steps, minimum=0)
    eta = check_float("step_size", step_size, minimum=0.0, strict=True)
    scale = 1.0 if n_context is None else 1.0 / check_int("n_context", n_context, minimum=1)
    D = 3 * d
    model = MultiHeadLinearTransformer(d, D, [d] + [1] * t,
                                       normalize="1/n" if n_context is None else "none", dtype=dtype)
    with torch.no_grad():
        for i in range(d):
            model.W_E[3 * i, i] = 1.0          # x_i
            model.W_E[3 * i + 1, d] = 1.0      # y
            model.W_Q[0][i, 2, 3 * i] = 1.0
            model.W_V[0][i, 2, 3 * i] = 1.0
            model.W_K[0][i, 2, 3 * i + 1] = scale
            model.W_1[0][i, 3 * i + 2] = 1.0   # x~_i -> row i
        model.W_1[0][d, 1] = 1.0               # y -> row d
        for layer in range(1, t + 1):
            model.W_Q[layer][0, :d, :d] = torch.eye(d, dtype=dtype)
            model.W_K[layer][0, :d, :d] = torch.eye(d, dtype=dtype)
            model.W_V[layer][0, d, d] = -eta * scale
            model.W_1[layer].copy_(torch.eye(D, dtype=dtype))
        model.W_O[d] = -1.0
    return model


def correlation_lemmas(d: int, s: int, ns, n_tasks: int, noise_std: float,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Lemmas D.1 and D.2 on the same prompts, for each n (Sigma = I, Theorem 5.3's prior, so
    r = w*): the mean of ``max_j |r_hat_j - r_j|`` (D.1's ``sqrt(s log(d) / n)`` rate) and the
    probability of D.2's event ``|r_hat_i| >= |r_i| / 2`` for all i in S."""
    from ..tasks import SparseLinearRegression
    task = SparseLinearRegression(d, s, noise_std, nonzero="rademacher")
    dev, prob = [], []
    for n in ns:
        p = task.sample(n_tasks, n + 1, seed=seed + n)
        r, w, S = correlations(p.x, p.y, n), p.task["w"], p.task["support"]
        dev.append(float((r - w).abs().max(1).values.mean()))
        prob.append(float(((r.abs() >= w.abs() / 2) | ~S).all(1).double().mean()))
    return np.array(dev), np.array(prob)


LRS = [10.0 ** -k for k in range(7)]   # the paper's step-size grid 1, 0.1, ..., 1e-6


def step_grid(max_steps: int, points: int = 40) -> np.ndarray:
    """Step counts 0 and a log grid up to ``max_steps`` (the x-axis of Fig. 2c)."""
    return np.unique(np.r_[0, np.round(np.logspace(0, np.log10(max_steps), points)).astype(int)])
