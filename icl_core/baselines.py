"""Classical in-context predictors, the references every figure is drawn against.

Every baseline has the signature ``f(x_ctx, y_ctx, x_q, ...) -> y_hat`` with shapes
``x_ctx (B, n, d)``, ``y_ctx (B, n)``, ``x_q (B, q, d)`` and returns ``(B, q)``.
``n = 0`` is allowed and predicts 0 (the prior mean). :func:`prefix_predictions` turns any
baseline into Garg et al.'s curve format: the prediction for point i from the i points
before it, shape ``(B, T)``, the same as the interleaved transformer's output.

Least squares runs in float64 (on the CPU for ``lstsq``, whose GPU driver mishandles
rank-deficient systems, as Garg et al. note).
"""
from __future__ import annotations

import torch

from .validation import check_float, check_int


def _check(x_ctx, y_ctx, x_q):
    if x_ctx.dim() != 3 or x_q.dim() != 3 or y_ctx.shape != x_ctx.shape[:2]:
        raise ValueError("expected x_ctx (B, n, d), y_ctx (B, n), x_q (B, q, d); got "
                         f"{tuple(x_ctx.shape)}, {tuple(y_ctx.shape)}, {tuple(x_q.shape)}")
    if x_ctx.shape[-1] != x_q.shape[-1]:
        raise ValueError(f"x_ctx has d={x_ctx.shape[-1]} but x_q has d={x_q.shape[-1]}")
    for name, t in (("x_ctx", x_ctx), ("y_ctx", y_ctx), ("x_q", x_q)):
        if not torch.isfinite(t).all():
            raise ValueError(f"{name} must be finite; it holds {int((~torch.isfinite(t)).sum())} NaN or "
                             "infinite values")


def _linear_predict(w, x_q):
    return torch.einsum("bqd,bd->bq", x_q.to(w.dtype), w).to(x_q.dtype)


def ols_weights(x_ctx: torch.Tensor, y_ctx: torch.Tensor) -> torch.Tensor:
    """Minimum-norm least squares ``w = X^+ y``: ``(B, n, d), (B, n) -> (B, d)``, float64."""
    X = x_ctx.detach().to("cpu", torch.float64)
    y = y_ctx.detach().to("cpu", torch.float64)
    if X.shape[1] == 0:
        return torch.zeros(X.shape[0], X.shape[2], dtype=torch.float64)
    return torch.linalg.lstsq(X, y.unsqueeze(-1), driver="gelsd").solution.squeeze(-1)


def ols(x_ctx, y_ctx, x_q):
    """Ordinary least squares (minimum-norm when n < d): ``x_q^T X^+ y``."""
    _check(x_ctx, y_ctx, x_q)
    return _linear_predict(ols_weights(x_ctx, y_ctx), x_q.cpu()).to(x_q.device)


def ridge_weights(x_ctx: torch.Tensor, y_ctx: torch.Tensor, lam: float) -> torch.Tensor:
    """``w = (X^T X + lam I)^{-1} X^T y`` (unnormalised, scikit-learn's convention):
    ``(B, n, d), (B, n) -> (B, d)``, float64. The normalised form
    ``(X^T X / n + lam' I)^{-1} X^T y / n`` of some papers is this with ``lam = n lam'``."""
    lam = check_float("lam", lam, minimum=0.0, strict=True)
    X, y = x_ctx.to(torch.float64), y_ctx.to(torch.float64)
    A = X.transpose(1, 2) @ X + lam * torch.eye(X.shape[-1], dtype=X.dtype, device=X.device)
    return torch.linalg.solve(A, (X.transpose(1, 2) @ y.unsqueeze(-1))).squeeze(-1)


def ridge(x_ctx, y_ctx, x_q, lam: float = 1.0):
    """Ridge regression ``x_q^T w`` with :func:`ridge_weights` (unnormalised ``lam``). With
    ``w ~ N(0, tau^2 I)`` and noise ``sigma``, ``lam = sigma^2 / tau^2`` gives the posterior
    mean, the Bayes-optimal predictor under squared loss."""
    _check(x_ctx, y_ctx, x_q)
    return _linear_predict(ridge_weights(x_ctx, y_ctx, lam), x_q)


def lasso_weights(x_ctx: torch.Tensor, y_ctx: torch.Tensor, alpha: float,
                  iters: int = 3000) -> torch.Tensor:
    """Lasso ``argmin_w (1/2n)||y - X w||^2 + alpha ||w||_1`` (scikit-learn's objective, no
    intercept, as in Garg et al.'s baseline) by FISTA, batched over prompts, float64.

    Args: x_ctx ``(B, n, d)``, y_ctx ``(B, n)``; alpha > 0; iters >= 1 (after the default
    3000, the KKT conditions hold to ~1e-4 or better at d = 16, n = 10, alpha >= 1e-4).

    Returns: ``(B, d)``.
    """
    alpha = check_float("alpha", alpha, minimum=0.0, strict=True)
    iters = check_int("iters", iters, minimum=1)
    X = x_ctx.detach().to(torch.float64)
    y = y_ctx.detach().to(torch.float64)
    B, n, d = X.shape
    w = torch.zeros(B, d, dtype=X.dtype, device=X.device)
    if n == 0:
        return w
    G = X.transpose(1, 2) @ X / n                                    # (B, d, d)
    c = (X.transpose(1, 2) @ y.unsqueeze(-1)).squeeze(-1) / n        # (B, d)
    step = 1.0 / torch.linalg.eigvalsh(G)[:, -1].clamp(min=1e-12).unsqueeze(-1)  # 1 / Lipschitz
    z, t = w, 1.0
    for _ in range(iters):
        grad = (G @ z.unsqueeze(-1)).squeeze(-1) - c
        u = z - step * grad
        w_next = torch.sign(u) * (u.abs() - step * alpha).clamp(min=0.0)
        t_next = (1 + (1 + 4 * t * t) ** 0.5) / 2
        z = w_next + (t - 1) / t_next * (w_next - w)
        w, t = w_next, t_next
    return w


def lasso(x_ctx, y_ctx, x_q, alpha: float = 0.01, iters: int = 3000):
    """Lasso prediction ``x_q^T w_lasso`` (see :func:`lasso_weights`)."""
    _check(x_ctx, y_ctx, x_q)
    return _linear_predict(lasso_weights(x_ctx, y_ctx, alpha, iters), x_q)


def knn(x_ctx, y_ctx, x_q, k: int = 3):
    """Average label of the ``k`` nearest context points in Euclidean distance (all of them
    when ``n < k``), as Garg et al.'s 3-NN baseline."""
    _check(x_ctx, y_ctx, x_q)
    k = check_int("k", k, minimum=1)
    B, n, _ = x_ctx.shape
    if n == 0:
        return torch.zeros(x_q.shape[:2], dtype=x_q.dtype, device=x_q.device)
    dist = torch.cdist(x_q, x_ctx)  # (B, q, n)
    idx = dist.topk(min(k, n), dim=-1, largest=False).indices
    return torch.gather(y_ctx.unsqueeze(1).expand(-1, x_q.shape[1], -1), 2, idx).mean(-1)


def averaging(x_ctx, y_ctx, x_q):
    """Garg et al.'s averaging estimator ``w = (1/n) sum_i y_i x_i``; equals one step of
    gradient descent from 0 with step size 1 (:func:`gd` with ``steps=1, lr=1``)."""
    _check(x_ctx, y_ctx, x_q)
    n = x_ctx.shape[1]
    if n == 0:
        return torch.zeros(x_q.shape[:2], dtype=x_q.dtype, device=x_q.device)
    w = (y_ctx.unsqueeze(-1) * x_ctx).mean(1)
    return _linear_predict(w, x_q)


def gd(x_ctx, y_ctx, x_q, steps: int = 1, lr: float = 1.0, preconditioner=None):
    """``steps`` iterations of (preconditioned) gradient descent from ``w_0 = 0`` on
    ``L(w) = (1/2n) ||X w - y||^2``:  ``w <- w - lr * P (1/n) X^T (X w - y)``.

    Args:
        preconditioner: ``(d, d)`` or ``(B, d, d)`` matrix P; identity when ``None``.
            Zhang et al.'s trained LSA is one step with ``P = Gamma^{-1}`` (Theorem 4).
    """
    _check(x_ctx, y_ctx, x_q)
    steps = check_int("steps", steps, minimum=0)
    lr = check_float("lr", lr, minimum=0.0)
    X, y = x_ctx.to(torch.float64), y_ctx.to(torch.float64)
    B, n, d = X.shape
    w = torch.zeros(B, d, dtype=X.dtype, device=X.device)
    if n == 0:
        return _linear_predict(w, x_q)
    P = None if preconditioner is None else torch.as_tensor(
        preconditioner, dtype=X.dtype, device=X.device)
    for _ in range(steps):
        grad = torch.einsum("bnd,bn->bd", X, torch.einsum("bnd,bd->bn", X, w) - y) / n
        if P is not None:
            grad = torch.einsum("...ij,...j->...i", P, grad)
        w = w - lr * grad
    return _linear_predict(w, x_q)


def nadaraya_watson(x_ctx, y_ctx, x_q, bandwidth: float = 1.0):
    """Nadaraya-Watson kernel smoother ``sum_i K(x_q, x_i) y_i / sum_j K(x_q, x_j)`` with the
    Gaussian kernel ``K = exp(-||x - x'||^2 / bandwidth)``. On the unit sphere it equals the
    softmax unit with ``M = w I``, ``w = 2 / bandwidth`` (Collins et al. Section B.1)."""
    _check(x_ctx, y_ctx, x_q)
    bandwidth = check_float("bandwidth", bandwidth, minimum=0.0, strict=True)
    if x_ctx.shape[1] == 0:
        return torch.zeros(x_q.shape[:2], dtype=x_q.dtype, device=x_q.device)
    dist = torch.cdist(x_q, x_ctx, compute_mode="donot_use_mm_for_euclid_dist")
    logits = -dist ** 2 / bandwidth                                # (B, q, n)
    return (torch.softmax(logits, -1) @ y_ctx.unsqueeze(-1)).squeeze(-1)


def _kernel_inputs(x_ctx, y_ctx, x_q):
    """Accept one prompt ``(n, d), (n,), (q, d)`` or a batch; return batched float64 tensors
    and whether to squeeze the batch dimension."""
    x_ctx, y_ctx, x_q = (torch.as_tensor(t) for t in (x_ctx, y_ctx, x_q))
    single = x_ctx.dim() == 2
    if single:
        x_ctx, y_ctx, x_q = x_ctx[None], y_ctx[None], x_q[None]
    _check(x_ctx, y_ctx, x_q)
    return x_ctx.double(), y_ctx.double(), x_q.double(), single


def functional_gd(x_context, y_context, x_query, kernel="exp", steps: int = 1,
                  step_size=0.1):
    """``steps`` iterations of functional gradient descent in the RKHS of ``kernel`` on the
    in-context loss ``sum_i (y_i - f(x_i))^2``, from ``f_0 = 0`` (Cheng et al. eq. 9):
    ``f_{l+1} = f_l + r_l sum_i (y_i - f_l(x_i)) K(., x_i)``; returns ``f_steps`` at the queries.

    Args:
        x_context: ``(n, d)`` or ``(B, n, d)``; y_context: ``(n,)`` or ``(B, n)``;
            x_query: ``(q, d)`` or ``(B, q, d)``. Output ``(q,)`` or ``(B, q)``, float64.
        kernel: ``"linear"``, ``"relu"``, ``"exp"``, ``"composite"`` or a callable
            ``(U, W) -> Gram`` (:func:`icl_core.kernels.gram`).
        steps: number of iterations (>= 0); step_size: one r, a sequence of ``steps`` values,
            or a ``(B,)`` tensor of per-prompt steps used at every iteration.
    """
    from .kernels import gram
    steps = check_int("steps", steps, minimum=0)
    x_ctx, y_ctx, x_q, single = _kernel_inputs(x_context, y_context, x_query)
    if torch.is_tensor(step_size) and step_size.dim() == 1 and not single:
        if len(step_size) != x_ctx.shape[0]:
            raise ValueError(f"a per-prompt step_size must have B = {x_ctx.shape[0]} entries, "
                             f"got {len(step_size)}")
        rs = [step_size.double()[:, None]] * steps
    else:
        rs = list(step_size) if hasattr(step_size, "__len__") else [float(step_size)] * steps
    if len(rs) != steps:
        raise ValueError(f"step_size must be a number or have {steps} entries, got {len(rs)}")
    K = gram(x_ctx, x_ctx, kernel)                       # (B, n, n)
    kq = gram(x_q, x_ctx, kernel)                        # (B, q, n)
    resid = y_ctx.clone()                                # y_i - f_l(x_i)
    f_q = torch.zeros(x_q.shape[:2], dtype=torch.float64)
    for r in rs:
        f_q = f_q + r * (kq @ resid.unsqueeze(-1)).squeeze(-1)
        resid = resid - r * (K @ resid.unsqueeze(-1)).squeeze(-1)
    return f_q[0] if single else f_q


def gp_posterior_mean(x_context, y_context, x_query, kernel="exp", jitter: float = 0.0):
    """The Bayes predictor for labels ``N(0, K_+)`` (Cheng et al. eq. 13): for each query,
    partition the flipped Gram of (context, query) as ``[[K_hat, nu], [nu^T, mu]]`` and return
    ``nu^T K_hat^+ y`` (pseudo-inverse, so a rank-deficient linear kernel is fine). For a PSD
    kernel this is the noiseless GP posterior mean. Shapes as :func:`functional_gd`."""
    from .kernels import flip, gram
    x_ctx, y_ctx, x_q, single = _kernel_inputs(x_context, y_context, x_query)
    jitter = check_float("jitter", jitter, minimum=0.0)
    n = x_ctx.shape[1]
    out = []
    for j in range(x_q.shape[1]):
        pts = torch.cat([x_ctx, x_q[:, j:j + 1]], 1)
        Kp = flip(gram(pts, pts, kernel)) + jitter * torch.eye(n + 1, dtype=torch.float64)
        nu = Kp[:, :n, n]
        out.append((nu.unsqueeze(1) @ torch.linalg.pinv(Kp[:, :n, :n], hermitian=True)
                    @ y_ctx.unsqueeze(-1))[:, 0, 0])
    f_q = torch.stack(out, 1)
    return f_q[0] if single else f_q


def prefix_predictions(baseline, x: torch.Tensor, y: torch.Tensor, **kwargs) -> torch.Tensor:
    """Predict every point from the points before it: ``(B, T, d), (B, T) -> (B, T)``;
    entry ``[:, i]`` is ``baseline(x[:, :i], y[:, :i], x[:, i:i+1])``."""
    cols = [baseline(x[:, :i], y[:, :i], x[:, i:i + 1], **kwargs)[:, 0] for i in range(x.shape[1])]
    return torch.stack(cols, dim=1)


BASELINES = {"ols": ols, "ridge": ridge, "knn": knn, "averaging": averaging, "gd": gd,
             "nadaraya_watson": nadaraya_watson}
