"""Closed forms for Zhang, Frei, Bartlett, *Trained Transformers Learn Linear Models
In-Context* (JMLR 2024). Everything in float64 NumPy.

Notation: Lambda (d, d) the covariance of x; N the training prompt length; M the test prompt
length; U11 (d, d) and u (scalar u_-1) the reduced variables of Lemma 9; P = u * U11.
Losses carry the paper's 1/2 (eq. 8) unless said otherwise; *errors* (Theorem 5, Figure 1)
have no 1/2.
"""
from __future__ import annotations

import numpy as np

from ..validation import check_float, check_int


def _lam(Lam) -> np.ndarray:
    """Lambda as a float64 array: a (d, d) symmetric positive-definite matrix (numpy or torch)."""
    if hasattr(Lam, "detach"):
        Lam = Lam.detach().cpu().numpy()
    Lam = np.atleast_2d(np.asarray(Lam, dtype=np.float64))
    if Lam.ndim != 2 or Lam.shape[0] != Lam.shape[1]:
        raise ValueError(f"Lambda must be a square (d, d) matrix, got shape {Lam.shape}")
    if not np.allclose(Lam, Lam.T, rtol=1e-10, atol=1e-12):
        raise ValueError("Lambda must be symmetric")
    if np.linalg.eigvalsh(Lam).min() <= 0:
        raise ValueError(f"Lambda must be positive definite (smallest eigenvalue "
                         f"{np.linalg.eigvalsh(Lam).min():.3g})")
    return Lam


def gamma(Lam, N: int) -> np.ndarray:
    """Gamma = (1 + 1/N) Lambda + tr(Lambda)/N I (the matrix of Theorem 4); E[Lhat^2] = Gamma Lambda."""
    Lam = _lam(Lam)
    N = check_int("N", N, minimum=1)
    return (1 + 1 / N) * Lam + np.trace(Lam) / N * np.eye(len(Lam))


def limit_matrices(Lam, N: int) -> tuple[np.ndarray, np.ndarray]:
    """Theorem 4's limit ``(W_KQ*, W_PV*)``, both (d+1, d+1):
    ``||G^-1||_F^{-1/2} [[G^-1, 0], [0, 0]]`` and ``||G^-1||_F^{1/2} e_{d+1} e_{d+1}^T``."""
    Gi = np.linalg.inv(gamma(Lam, N))
    d, s = len(Gi), np.linalg.norm(Gi) ** 0.5
    kq, pv = np.zeros((d + 1, d + 1)), np.zeros((d + 1, d + 1))
    kq[:d, :d] = Gi / s
    pv[d, d] = s
    return kq, pv


def global_minimum(Lam, N: int) -> tuple[np.ndarray, np.ndarray]:
    """The (d+1) x (d+1) matrices ``(W_KQ, W_PV)`` of eq. 11, the global minimum gradient flow
    converges to (Theorem 4); the same as :func:`limit_matrices`."""
    return limit_matrices(Lam, N)


def lsa_error(Lam, N: int, M: int) -> float:
    """Exact expected squared error (no Monte Carlo) of the LSA at :func:`global_minimum` on a
    fresh noiseless prompt with M examples, x ~ N(0, Lambda), w ~ N(0, I_d); the same as
    :func:`averaged_error` (whose arguments are ordered ``M, N, Lam``)."""
    return averaged_error(M, N, Lam)


def lsa_predict(x_ctx, y_ctx, x_q, Lam, N: int) -> np.ndarray:
    """Eq. 13: the trained LSA's prediction ``x_q^T Gamma^{-1} (1/M) sum_i y_i x_i``.
    Shapes ``(B, M, d), (B, M), (B, q, d) -> (B, q)``."""
    Gi = np.linalg.inv(gamma(Lam, N))
    g = np.einsum("bm,bmd->bd", np.asarray(y_ctx, float), np.asarray(x_ctx, float)) / np.shape(x_ctx)[1]
    return np.einsum("bqd,de,be->bq", np.asarray(x_q, float), Gi, g)


# --- the reduced gradient flow (Lemmas 10, 15, 17, Corollary 16) ---------------------------

def reduced_loss(U11, u, Lam, N: int) -> float:
    """Lemma 15: l~(U11, u) = tr[u^2/2 Gamma Lambda U11 Lambda U11^T - u Lambda^2 U11^T]
    = L - tr(Lambda)/2 on the invariant subspace."""
    Lam, G = _lam(Lam), gamma(Lam, N)
    return float(np.trace(0.5 * u ** 2 * G @ Lam @ U11 @ Lam @ U11.T - u * Lam @ Lam @ U11.T))


def reduced_grad(U11, u, Lam, N: int) -> tuple[np.ndarray, float]:
    """The gradient of :func:`reduced_loss`; gradient flow is ``d/dt (U11, u) = -grad`` (eq. 27)."""
    Lam, G = _lam(Lam), gamma(Lam, N)
    gU = u ** 2 * G @ Lam @ U11 @ Lam - u * Lam @ Lam
    gu = float(np.trace(u * G @ Lam @ U11 @ Lam @ U11.T - Lam @ Lam @ U11.T))
    return gU, gu


def min_reduced_loss(Lam, N: int) -> float:
    """Corollary 16: min l~ = -tr(Lambda^2 Gamma^{-1}) / 2."""
    Lam = _lam(Lam)
    return float(-0.5 * np.trace(Lam @ Lam @ np.linalg.inv(gamma(Lam, N))))


def init_assumption3(d: int, sigma: float, theta=None, seed: int = 0) -> tuple[np.ndarray, float]:
    """Assumption 3: ``U11(0) = sigma Theta Theta^T`` with ``||Theta Theta^T||_F = 1`` (a
    random Gaussian Theta if none is given), ``u(0) = sigma``."""
    d = check_int("d", d, minimum=1)
    sigma = check_float("sigma", sigma, minimum=0.0, strict=True)
    if theta is None:
        theta = np.random.default_rng(seed).standard_normal((d, d))
    tt = np.asarray(theta, float) @ np.asarray(theta, float).T
    return sigma * tt / np.linalg.norm(tt), sigma


def sigma_max(Lam, N: int) -> float:
    """Theorem 4's scale condition: sigma^2 sqrt(d) ||Gamma||_op < 2, i.e. sigma < this."""
    G = gamma(Lam, N)
    return float(np.sqrt(2 / (np.sqrt(len(G)) * np.linalg.norm(G, 2))))


def gradient_flow(Lam, N: int, U11_0, u_0: float, t_max: float = 60.0, dt: float = 0.01,
                  grad=None) -> dict:
    """Integrate the reduced ODE (27) with classical RK4 from ``(U11_0, u_0)``.

    Args:
        grad: ``f(U11, u) -> (dU, du)`` gradient to follow (default :func:`reduced_grad` for
            fixed Lambda; pass the random-covariance gradient for Theorem 8).

    Returns:
        dict with ``t (S,)``, ``U11 (S, d, d)``, ``u (S,)``, ``loss (S,)`` (the reduced loss
        when ``grad`` is the default, else NaN), sampled every step.
    """
    t_max = check_float("t_max", t_max, minimum=0.0, strict=True)
    dt = check_float("dt", dt, minimum=0.0, strict=True)
    g = grad or (lambda U, u: reduced_grad(U, u, Lam, N))
    U, u = np.array(U11_0, float), float(u_0)
    steps = int(round(t_max / dt))
    ts, Us, us = [0.0], [U.copy()], [u]
    for k in range(steps):
        k1 = g(U, u)
        k2 = g(U - dt / 2 * k1[0], u - dt / 2 * k1[1])
        k3 = g(U - dt / 2 * k2[0], u - dt / 2 * k2[1])
        k4 = g(U - dt * k3[0], u - dt * k3[1])
        U = U - dt / 6 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        u = u - dt / 6 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        ts.append((k + 1) * dt); Us.append(U.copy()); us.append(u)
    Us, us = np.array(Us), np.array(us)
    loss = (np.array([reduced_loss(Ut, ut, Lam, N) for Ut, ut in zip(Us, us)])
            if grad is None else np.full(len(us), np.nan))
    return {"t": np.array(ts), "U11": Us, "u": us, "loss": loss}


def pl_rate(Lam, N: int, theta_tt, sigma: float) -> float:
    """Lemma 12's PL constant mu (eq. 30); ``theta_tt`` is Theta Theta^T (unit Frobenius norm)."""
    Lam, G = _lam(Lam), gamma(Lam, N)
    d = len(Lam)
    op = np.linalg.norm(Lam, 2)
    Li = np.linalg.inv(Lam)
    # ||Lambda Theta||_F^2 = tr(Theta^T Lambda^2 Theta) = tr(Lambda^2 Theta Theta^T)
    lt = float(np.trace(Lam @ Lam @ theta_tt))
    return float(sigma ** 2 / (np.sqrt(d) * op ** 2 * np.trace(np.linalg.inv(G) @ Li) * np.trace(Li))
                 * lt * (2 - np.sqrt(d) * sigma ** 2 * np.linalg.norm(G, 2)))


# --- prediction errors (Theorem 5, Corollary 6, shifts) -------------------------------------

def averaged_error(M: int, N: int, Lam) -> float:
    """Exact E[(y_hat - <w, x_q>)^2] of the trained LSA on a length-M prompt, averaged over
    w ~ N(0, I), noiseless (Theorem 5 averaged; no 1/2, not divided by d)."""
    Lam = _lam(Lam)
    M = check_int("M", M, minimum=1)
    Gi = np.linalg.inv(gamma(Lam, N))
    G2 = Gi @ Gi
    t = np.trace(Lam)
    L2, L3 = Lam @ Lam, Lam @ Lam @ Lam
    return float((t * np.trace(G2 @ L2) + np.trace(G2 @ L3)) / M
                 + (np.trace(G2 @ L3) + 2 * t * np.trace(G2 @ L2) + t ** 2 * np.trace(G2 @ Lam)) / N ** 2)


def corollary6_bound(M: int, N: int, Lam) -> float:
    """Corollary 6: error <= (d+1) tr(Lambda)/M + (1 + 2d + d^2 kappa) tr(Lambda) / N^2."""
    M, N = check_int("M", M, minimum=1), check_int("N", N, minimum=1)
    Lam = _lam(Lam)
    ev = np.linalg.eigvalsh(Lam)
    d, t = len(Lam), float(np.trace(Lam))
    return (d + 1) * t / M + (1 + 2 * d + d ** 2 * ev[-1] / ev[0]) * t / N ** 2


def theorem5_error(M: int, N: int, Lam, a, Sigma, best_linear_error: float) -> float:
    """Theorem 5 (an equality): the trained LSA's error on a task with best linear predictor
    ``a = Lambda^{-1} E[xy]``, ``Sigma = Cov(xy)`` and ``best_linear_error = min_w E(<w,x>-y)^2``."""
    Lam = _lam(Lam)
    Gi = np.linalg.inv(gamma(Lam, N))
    G2 = Gi @ Gi
    a = np.asarray(a, float)
    t = np.trace(Lam)
    q = lambda A: float(a @ A @ a)
    return float(best_linear_error + np.trace(np.asarray(Sigma) @ G2 @ Lam) / M
                 + (q(G2 @ Lam @ Lam @ Lam) + 2 * t * q(G2 @ Lam @ Lam) + t ** 2 * q(G2 @ Lam)) / N ** 2)


def error_at_P(P, M: int, Lam_test, Lam_query=None) -> float:
    """Exact error of the predictor ``y_hat = x_q^T P (1/M) sum_i y_i x_i`` (an LSA whose
    product is ``P^T``) on length-M prompts with context covariates ~ N(0, Lambda_test), an
    independent query ~ N(0, Lambda_query) (default Lambda_test), w ~ N(0, I), noiseless:
    ``tr(Lq [P E(Lhat^2) P^T - P L - L P^T + I])``, ``E Lhat^2 = (1+1/M) L^2 + tr(L)/M L``."""
    P = np.asarray(P, float)
    Lt = _lam(Lam_test)
    Lq = Lt if Lam_query is None else _lam(Lam_query)
    M = check_int("M", M, minimum=1)
    E2 = (1 + 1 / M) * Lt @ Lt + np.trace(Lt) / M * Lt
    return float(np.trace(Lq @ (P @ E2 @ P.T - P @ Lt - Lt @ P.T + np.eye(len(Lt)))))


def shifted_error(N: int, Lam_train, M: int, Lam_test, Lam_query=None) -> float:
    """:func:`error_at_P` at the trained limit P = Gamma^{-1}(Lambda_train, N): covariate shift
    (Lambda_test != Lambda_train) and query shift (Lambda_query != Lambda_test)."""
    return error_at_P(np.linalg.inv(gamma(Lam_train, N)), M, Lam_test, Lam_query)


def linear_task_error_at_P(P, M: int, Lam, w0, s: float) -> float:
    """Exact error ``E(y_hat - y_q)^2`` of ``y_hat = x_q^T P (1/M) sum y_i x_i`` on the task
    ``y = <w0, x> + s eps`` (fixed w0, x ~ N(0, Lambda)): with ``g = (1/M) sum y_i x_i``,
    ``E g = Lambda w0`` and ``Cov g = Sigma / M``,
    ``s^2 + tr(Lambda P Sigma P^T)/M + ||P Lambda w0 - w0||^2_Lambda``,
    ``Sigma = ||w0||^2_Lambda Lambda + Lambda w0 w0^T Lambda + s^2 Lambda``. At P = Gamma^{-1}
    this is Theorem 5."""
    P, Lam, w0 = np.asarray(P, float), _lam(Lam), np.asarray(w0, float)
    Sigma = (w0 @ Lam @ w0) * Lam + Lam @ np.outer(w0, w0) @ Lam + s ** 2 * Lam
    bias = P @ Lam @ w0 - w0
    return float(s ** 2 + np.trace(Lam @ P @ Sigma @ P.T) / M + bias @ Lam @ bias)


def task_error_at_P(P, M: int, Lam, a, Sigma, best_linear_error: float) -> float:
    """Exact error ``E(y_hat - y_q)^2`` of ``y_hat = x_q^T P (1/M) sum y_i x_i`` on any task
    ``(x, y) ~ D`` with ``x ~ N(0, Lambda)`` (Theorem 5's setting, e.g. a non-linear one), given
    its best linear predictor ``a = Lambda^{-1} E[xy]``, ``Sigma = Cov(xy)`` and
    ``best_linear_error = min_w E(<w, x> - y)^2``: with ``m = Lambda a``,
    ``best + ||P m - a||^2_Lambda + tr(Lambda P Sigma P^T) / M`` (the residual ``y - <a, x>`` is
    uncorrelated with x). At ``P = Gamma^{-1}`` this is Theorem 5's equality."""
    P, Lam, a, Sigma = np.asarray(P, float), _lam(Lam), np.asarray(a, float), np.asarray(Sigma, float)
    M = check_int("M", M, minimum=1)
    bias = P @ Lam @ a - a
    return float(best_linear_error + bias @ Lam @ bias + np.trace(Lam @ P @ Sigma @ P.T) / M)


def relu_task_moments(w0, Lam) -> tuple[np.ndarray, np.ndarray, float]:
    """The moments Theorem 5 needs for the non-linear task ``y = max(<w0, x>, 0)``,
    ``x ~ N(0, Lambda)``, in closed form (z = <w0, x> ~ N(0, s^2), s^2 = w0^T Lambda w0):
    ``a = Lambda^{-1} E[xy] = w0 / 2``, ``Sigma = Cov(xy) = 3/4 Lambda w0 w0^T Lambda + s^2/2 Lambda``
    and ``min_w E(<w, x> - y)^2 = s^2 / 4``. Returns ``(a, Sigma, best_linear_error)``."""
    Lam, w0 = _lam(Lam), np.asarray(w0, float)
    s2 = float(w0 @ Lam @ w0)
    Lw = Lam @ w0
    return w0 / 2, 0.75 * np.outer(Lw, Lw) + s2 / 2 * Lam, s2 / 4


def relu_task_labels(x, w0):
    """Labels of the non-linear task of :func:`relu_task_moments`: ``max(<w0, x>, 0)`` for
    ``x (..., d)`` (a torch tensor), in x's dtype."""
    import torch
    return torch.clamp(x @ torch.as_tensor(np.asarray(w0, float), dtype=x.dtype), min=0)


# --- random covariance, Exp(1) diagonal (Theorem 8, Figure 1) -------------------------------

def kappa_random(d: int, N: int) -> float:
    """The trained LSA's preconditioner on Exp(1)-diagonal covariances: P* = kappa_N I with
    kappa_N = 2 / (6 + (2d + 10)/N) -> 1/3 (Theorem 8 with Exp(1) moments)."""
    return 2.0 / (6.0 + (2 * d + 10) / N)


def kappa_identity(d: int, N: int) -> float:
    """P* = kappa I for Lambda = I: Gamma^{-1} = N / (N + d + 1) I."""
    return N / (N + d + 1)


def fig1_lsa_error(kappa: float, d: int, M: int, test: str = "random", c: float = 1.0) -> float:
    """Normalised error (squared error / d) of an LSA with P = kappa I on Figure 1's test
    prompts of length M: ``kappa^2 c^3 [6 + (2d+10)/M] - 4 kappa c^2 + c`` on
    c * diag(Exp(1)), ``kappa^2 (1 + (d+1)/M) - 2 kappa + 1`` on the identity."""
    if test == "random":
        return kappa ** 2 * c ** 3 * (6 + (2 * d + 10) / M) - 4 * kappa * c ** 2 + c
    if test == "identity":
        return kappa ** 2 * (1 + (d + 1) / M) - 2 * kappa + 1
    raise ValueError(f"test must be 'random' or 'identity', got {test!r}")


def exp1_moments(d: int, N: int) -> tuple[np.ndarray, np.ndarray]:
    """For Lambda = diag(lambda_i), lambda_i ~ Exp(1) i.i.d.: ``Z[i, j] = E[(Gamma Lambda)_ii
    lambda_j]`` (diagonal ``gamma_i = 6 + (2d+10)/N``, off-diagonal ``zeta = 2 + (d+4)/N``) and
    ``xi_i = E[lambda_i^2] = 2``."""
    Z = np.full((d, d), 2 + (d + 4) / N)
    np.fill_diagonal(Z, 6 + (2 * d + 10) / N)
    return Z, np.full(d, 2.0)


def random_diag_moments_mc(d: int, N: int, n: int = 200_000, seed: int = 0,
                           sampler=None) -> tuple[np.ndarray, np.ndarray]:
    """Monte Carlo of :func:`exp1_moments` for any law of the diagonal (default Exp(1))."""
    rng = np.random.default_rng(seed)
    lam = rng.exponential(size=(n, d)) if sampler is None else sampler(rng, n, d)
    g = (1 + 1 / N) * lam ** 2 + lam.sum(1, keepdims=True) * lam / N      # (Gamma Lambda)_ii
    return g.T @ lam / n, (lam ** 2).mean(0)


def sigma_max_random(d: int, N: int, theta, n: int = 200_000, seed: int = 0) -> float:
    """Theorem 8's scale condition (21) for Exp(1)-diagonal covariances: the initialisation
    scale must satisfy ``sigma < sqrt(2 ||E[Lambda] Theta||_F^2 / (sqrt(d) E[||Gamma_tau||_op
    ||Lambda_tau||_F^2]))``, with Theta normalised as in Assumption 3 (``||Theta Theta^T||_F = 1``)
    and ``Gamma_tau = (N+1)/N Lambda_tau + tr(Lambda_tau)/N I``; the expectation by Monte Carlo
    (``n`` draws). Returns the bound."""
    d, N = check_int("d", d, minimum=1), check_int("N", N, minimum=1)
    theta = np.asarray(theta, float)
    Th = theta / np.sqrt(np.linalg.norm(theta @ theta.T))          # ||Th Th^T||_F = 1
    lam = np.random.default_rng(seed).exponential(size=(check_int("n", n, minimum=100), d))
    gamma_op = ((N + 1) / N * lam + lam.sum(1, keepdims=True) / N).max(1)      # Gamma_tau is diagonal
    denom = np.sqrt(d) * float(np.mean(gamma_op * (lam ** 2).sum(1)))
    return float(np.sqrt(2 * np.linalg.norm(Th, "fro") ** 2 / denom))     # E[Lambda] = I for Exp(1)


def random_diag_grad(U11, u, Z, xi) -> tuple[np.ndarray, float]:
    """Gradient of the random-diagonal-covariance reduced loss (Theorem 8's setting),
    ``E_Lambda l~ = u^2/2 sum_ij Z_ij U_ij^2 - u sum_i xi_i U_ii``."""
    gU = u ** 2 * Z * U11 - u * np.diag(xi)
    gu = float(u * np.sum(Z * U11 ** 2) - np.sum(xi * np.diag(U11)))
    return gU, gu
