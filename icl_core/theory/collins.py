"""Monte Carlo theory for Collins et al., *Softmax Attention Adapts to Function
Lipschitzness* (NeurIPS 2024).

The softmax unit with ``M = w I`` on the unit sphere predicts
``y_hat = sum_i y_i a_i``, ``a_i = exp(w x_i^T x) / sum_j exp(w x_j^T x)``. Its ICL loss against
the clean target splits exactly (the noise is independent of the weights):

    L(w) = E (sum_i a_i f(x_i) - f(x))^2  +  sigma^2 E sum_i a_i^2
         =        signal S(w)             +     sigma^2 N(w).

All functions use common random numbers: one set of tasks and points (from ``seed``) serves
every ``w``, so differences between windows are not Monte Carlo noise.
Convention: the library's ``w`` is the scale of ``M``; the weights are
``exp(-(w/2) ||x_i - x||^2)`` up to a constant, so the paper's appendix ``w_KQ`` is ``w/2``.
"""
from __future__ import annotations

import numpy as np
import torch

from ..tasks.lipschitz import FAMILIES, LipschitzTask
from ..validation import check_choice, check_float, check_int

DEFAULT_WS = np.concatenate([[0.0], np.geomspace(0.02, 300.0, 90)])


def _check(family, L, sigma, n, d):
    check_choice("family", family, set(FAMILIES) - {"hills"} | ({"hills"} if d == 2 else set()))
    check_float("L", L, minimum=0.0, strict=True)
    check_float("sigma", sigma, minimum=0.0)
    check_int("n", n, minimum=1)
    check_int("d", d, minimum=1)


def _draw(family, L, n, d, num_tasks, seed, covariates="sphere", n_queries=1):
    """Clean values on common random points: ``x (T, n+q, d)``, ``f (T, n+q)``, float64."""
    s = LipschitzTask(d, family, L, 0.0, covariates)
    p = s.sample(check_int("num_tasks", num_tasks, minimum=1), n + n_queries, seed=seed,
                 n_context=n)
    return p.x.double(), p.y.double()


def loss_terms(ws, family: str, L: float, n: int, d: int, num_tasks: int = 2000,
               seed: int = 0, covariates: str = "sphere", n_queries: int = 1):
    """``(S(w), N(w))`` for every ``w`` in ``ws`` (arrays): the signal (bias) term and the
    noise term per unit noise variance, ``N(w) = E sum_i a_i^2``."""
    _check(family, L, 0.0, n, d)
    return window_terms(ws, *_draw(family, L, n, d, num_tasks, seed, covariates, n_queries), n)


def window_terms(ws, x: torch.Tensor, f: torch.Tensor, n: int):
    """``(S(w), N(w))`` of the unit ``M = w I`` on given points: ``x (T, n+q, d)`` and clean
    values ``f (T, n+q)``, the first n of each prompt the context (any task family)."""
    cos = x[:, n:] @ x[:, :n].transpose(1, 2)                  # (T, q, n) = x_q^T x_i
    S, N = [], []
    for w in np.atleast_1d(ws):
        a = torch.softmax(float(w) * cos, dim=-1)
        S.append(float(((a @ f[:, :n, None]).squeeze(-1) - f[:, n:]).pow(2).mean()))
        N.append(float(a.pow(2).sum(-1).mean()))
    return np.array(S), np.array(N)


def pretraining_loss(w, family: str, L: float, sigma: float, n: int, d: int,
                     num_tasks: int = 2000, seed: int = 0, covariates: str = "sphere",
                     n_queries: int = 1):
    """Monte Carlo ICL loss (eq. ICL) of the softmax unit with ``M = w I_d``, covariates
    uniform on the sphere (or ``covariates="nonisotropic"``), clean targets; a float for a
    scalar ``w``, an array for an array of ``w``.

    Raises ``ValueError`` for an unknown family, ``L <= 0``, ``sigma < 0`` or ``n < 1``."""
    _check(family, L, sigma, n, d)
    S, N = loss_terms(w, family, L, n, d, num_tasks, seed, covariates, n_queries)
    total = S + sigma ** 2 * N
    return float(total[0]) if np.ndim(w) == 0 else total


def refined_argmin(ws, loss) -> float:
    """The grid argmin of ``loss(ws)``, refined by a parabola in log w through the three grid
    points around it (the grid value itself at the ends or at w = 0)."""
    ws, loss = np.asarray(ws, float), np.asarray(loss, float)
    i = int(np.argmin(loss))
    if 0 < i < len(ws) - 1 and ws[i - 1] > 0:
        lw, l3 = np.log(ws[i - 1:i + 2]), loss[i - 1:i + 2]
        den = (lw[0] - lw[1]) * (lw[0] - lw[2]) * (lw[1] - lw[2])
        a = (lw[2] * (l3[1] - l3[0]) + lw[1] * (l3[0] - l3[2]) + lw[0] * (l3[2] - l3[1])) / den
        b = (lw[2] ** 2 * (l3[0] - l3[1]) + lw[1] ** 2 * (l3[2] - l3[0])
             + lw[0] ** 2 * (l3[1] - l3[2])) / den
        if a > 0:
            return float(np.exp(np.clip(-b / (2 * a), lw[0], lw[2])))
    return float(ws[i])


def optimal_window(family: str, L: float, sigma: float, n: int, d: int, ws=None,
                   num_tasks: int = 2000, seed: int = 0, covariates: str = "sphere") -> float:
    """The minimising ``w`` of :func:`pretraining_loss` on the grid ``ws`` (default 0 and 90
    log-spaced values in [0.02, 300]), refined by :func:`refined_argmin`."""
    _check(family, L, sigma, n, d)
    ws = DEFAULT_WS if ws is None else np.asarray(ws, float)
    return refined_argmin(ws, pretraining_loss(ws, family, L, sigma, n, d, num_tasks, seed, covariates))


def unit_loss(M, sampler, n: int, num_tasks: int = 4000, seed: int = 0) -> float:
    """ICL loss of the softmax unit with a given ``M (d, d)`` on tasks from ``sampler`` (any
    task family; its ``noise_std`` is the sigma): clean-target signal term plus the exact noise
    term ``sigma^2 E sum_i a_i^2`` (one query per task, common random numbers via ``seed``)."""
    p = sampler.sample(num_tasks, n + 1, seed=seed)
    x = p.x.double()
    f = sampler.evaluate(p.x, p.task).double()
    a = torch.softmax((x[:, n:] @ torch.as_tensor(M, dtype=torch.float64)) @ x[:, :n].transpose(1, 2), -1)
    signal = ((a @ f[:, :n, None]).squeeze(-1) - f[:, n:]).pow(2).mean()
    return float(signal + sampler.noise_std ** 2 * a.pow(2).sum(-1).mean())


def linear_attention_optimum(family: str, L: float, sigma: float, n: int, d: int,
                             num_tasks: int = 20000, seed: int = 0, covariates: str = "sphere"):
    """The best linear attention ``y_hat = sum_i y_i x_i^T M x`` (Remark 2.2): its loss is
    linear least squares in ``vec(M)`` with features ``vec(sum_i y_i x_i x^T)``. Fitted on
    ``num_tasks`` tasks, scored on as many fresh ones. Returns ``(loss, M (d, d))``."""
    _check(family, L, sigma, n, d)

    def data(s):
        x, f = _draw(family, L, n, d, num_tasks, s, covariates)
        g = torch.Generator().manual_seed(s + 7919)
        y = f[:, :n] + sigma * torch.randn(f[:, :n].shape, generator=g, dtype=torch.float64)
        return x, y, f[:, n]
    return linear_attention_fit(data(seed), data(seed + 1), n)


def linear_attention_fit(fit, test, n: int):
    """Least-squares best linear attention: ``fit`` and ``test`` are ``(x (T, n+1, d),
    y (T, >= n) noisy context labels, target (T,) clean query values)``; M is fitted on
    ``fit`` and scored on ``test``. Returns ``(test loss, M (d, d))``."""
    def features(x, y, target):
        phi = torch.einsum("ti,tid,te->tde", y[:, :n], x[:, :n], x[:, n]).reshape(len(x), -1)
        return phi, target
    phi, target = features(*fit)
    m = torch.linalg.lstsq(phi, target.unsqueeze(-1), driver="gelsd").solution.squeeze(-1)
    phi2, target2 = features(*test)
    d = fit[0].shape[-1]
    return float((phi2 @ m - target2).pow(2).mean()), m.reshape(d, d).numpy()


def rho(M, B) -> float:
    """Figure 9's representation error ``||B_perp^T M B_perp||_2 / sigma_min(B^T M B)``: 0 for
    ``M = c B B^T``, 1 for ``M = c I``."""
    M, B = np.asarray(M, float), np.asarray(B, float)
    q, _ = np.linalg.qr(B, mode="complete")
    B_perp = q[:, B.shape[1]:]
    return float(np.linalg.norm(B_perp.T @ M @ B_perp, 2) / np.linalg.svd(B.T @ M @ B, compute_uv=False).min())


def best_subspace_ratio(sampler, n: int, rs=(0.0, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0),
                        cs=(2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0), num_tasks: int = 3000,
                        seed: int = 0) -> dict:
    """Is the projection ``M = c B B^T`` the best window on a :class:`~icl_core.tasks.LowRankTask`?

    Scores ``M = c (B B^T + r B_perp B_perp^T)`` (``rho(M, B) = r``) by :func:`unit_loss` over the
    grids ``rs`` x ``cs`` (common random numbers) and returns ``{"r": best r, "c": its c,
    "loss_by_r": best loss over c for each r}``. Theorem 4.4 says r = 0 is optimal under
    Assumption 4.3's covariates; under other covariates on the sphere (Appendix J.1's random J)
    the theorem says nothing, and this measures what is optimal there."""
    B, Bp = sampler.B.double().numpy(), sampler.B_perp.double().numpy()
    table = np.array([[unit_loss(c * (B @ B.T + r * Bp @ Bp.T), sampler, n, num_tasks, seed) for c in cs]
                      for r in rs])                                    # (len(rs), len(cs))
    i, j = np.unravel_index(np.argmin(table), table.shape)
    return {"r": float(rs[i]), "c": float(cs[j]), "loss_by_r": table.min(1).tolist()}


def matrix_loss(M, x: torch.Tensor, f: torch.Tensor, n: int, sigma: float) -> float:
    """ICL loss of the softmax unit with key-query matrix ``M (d, d)`` on given points
    (``x (T, n+q, d)``, clean values ``f (T, n+q)``, float64): ``E(sum_i a_i f_i - f_q)^2 +
    sigma^2 E sum_i a_i^2`` with ``a = softmax(x_q^T M x_i)`` (the split of eq. ICL)."""
    M = torch.as_tensor(np.asarray(M), dtype=x.dtype)
    a = torch.softmax((x[:, n:] @ M) @ x[:, :n].transpose(1, 2), dim=-1)
    signal = ((a @ f[:, :n, None]).squeeze(-1) - f[:, n:]).pow(2).mean()
    return float(signal + sigma ** 2 * a.pow(2).sum(-1).mean())


def lemma_b5_check(Sigma, family: str = "relu", L: float = 1.0, sigma: float = 0.5, n: int = 20,
                   ws=None, n_dirs: int = 6, eps: float = 0.3, num_tasks: int = 4000, seed: int = 0) -> dict:
    """Lemma B.5 with a non-identity covariance: covariates ``x = Sigma^{1/2} x~`` with ``x~``
    uniform on the sphere, tasks ``f(x) = g(Sigma^{-1/2} x)`` with g from the rotation-invariant
    class ``family`` (so f is L-Lipschitz in the Sigma^{-1} norm, Assumption B.4). The lemma:
    every minimiser of the ICL loss is ``M* = w Sigma^{-1}``.

    Computed directly on the x's (common random numbers for every M), the best loss over the
    scales ``ws`` of four shapes: ``Sigma^{-1}`` (the lemma's), ``I`` (what an isotropic guess
    gives), and ``n_dirs`` perturbed shapes ``Sigma^{-1/2} (I + eps E) Sigma^{-1/2}`` (E a random
    symmetric matrix of unit spectral norm). Returns ``{"sigma_inv": loss, "identity": loss,
    "perturbed": [loss, ...], "w_sigma_inv": its best scale}``."""
    Sigma = np.asarray(Sigma, dtype=float)
    d = Sigma.shape[0]
    _check(family, L, sigma, n, d)
    evals, evecs = np.linalg.eigh(Sigma)
    if evals.min() <= 0 or not np.allclose(Sigma, Sigma.T):
        raise ValueError(f"Sigma must be symmetric positive definite, got eigenvalues {evals}")
    half, ihalf = (evecs * evals ** 0.5) @ evecs.T, (evecs * evals ** -0.5) @ evecs.T
    xt, f = _draw(family, L, n, d, num_tasks, seed)                   # x~ on the sphere, f = g(x~)
    x = xt @ torch.as_tensor(half)                                      # x = Sigma^{1/2} x~
    ws = np.geomspace(0.5, 100.0, 40) if ws is None else np.asarray(ws, float)
    best = lambda shape: min((matrix_loss(w * shape, x, f, n, sigma), w) for w in ws)
    rng = np.random.default_rng(seed)
    perturbed = []
    for _ in range(n_dirs):
        E = rng.standard_normal((d, d)); E = (E + E.T) / 2; E /= np.linalg.norm(E, 2)
        perturbed.append(best(ihalf @ (np.eye(d) + eps * E) @ ihalf)[0])
    loss_si, w_si = best(np.linalg.inv(Sigma))
    return {"sigma_inv": loss_si, "w_sigma_inv": float(w_si), "identity": best(np.eye(d))[0],
            "perturbed": perturbed}


def bias_bounds(ws, S, n: int, d: int, L: float = 1.0) -> dict:
    """Figure 7's bias bounds against a measured bias ``S(w)`` (Appendix E; the slides give
    ``Omega(L^2 / w^2) < bias < Theta(L^2 / w + L^2 / n)``), over the range where a window of
    scale w still holds points, ``1 <= w <= n^{2/d}``: the largest ``c_lo`` with
    ``S >= c_lo L^2 / w^2``, the smallest ``c_hi`` with ``S <= c_hi L^2 (1/w + 1/n)``, and the
    steepest local log-log slope of S there (the lower bound says it is never below -2)."""
    ws, S = np.asarray(ws, float), np.asarray(S, float)
    keep = (ws >= 1.0) & (ws <= n ** (2 / d))
    if keep.sum() < 3:
        raise ValueError(f"ws must hold at least 3 values in [1, n^(2/d)] = [1, {n ** (2 / d):.3g}], got {keep.sum()}")
    w, s = ws[keep], S[keep]
    slopes = np.diff(np.log(s)) / np.diff(np.log(w))
    return {"c_lo": float((s * w ** 2).min() / L ** 2), "c_hi": float((s / (1 / w + 1 / n)).max() / L ** 2),
            "steepest_slope": float(slopes.min()), "w_range": [float(w[0]), float(w[-1])]}
