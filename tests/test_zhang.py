"""Zhang, Frei, Bartlett: the LSA module and the closed forms of icl_core.theory.zhang."""
import numpy as np
import pytest
import torch

from icl_core import LinearRegression, train
from icl_core.models import LSA
from icl_core.theory import zhang as Z

LAM = np.diag([0.5, 0.8, 1.0, 1.5, 2.2])


def test_gamma_and_isotropic_kappa():
    G = Z.gamma(np.eye(3), 10)
    assert np.allclose(G, (1 + 0.1 + 0.3) * np.eye(3))
    assert Z.kappa_identity(3, 10) == pytest.approx(1 / 1.4)
    with pytest.raises(ValueError, match="N must be"):
        Z.gamma(np.eye(3), 0)
    with pytest.raises(ValueError, match="square"):
        Z.gamma(np.ones((2, 3)), 5)


def test_lsa_module_matches_the_paper_formula_with_query_column():
    """y_hat = e_{d+1}^T W^PV (E E^T / N) W^KQ (x_q; 0) with E including the query column."""
    rng = np.random.default_rng(0)
    kq, pv = rng.standard_normal((6, 6)), rng.standard_normal((6, 6))
    m = LSA.from_matrices(kq, pv)
    p = LinearRegression(5).sample(4, 9, seed=1, n_context=8).to(dtype=torch.float64)
    out = m.predict(p).detach().numpy()[:, 0]
    for b in range(4):
        E = np.vstack([p.x[b].numpy().T, np.r_[p.y[b, :8].numpy(), 0.0]])   # (d+1, N+1)
        f = E + pv @ E @ (E.T @ kq @ E) / 8
        assert out[b] == pytest.approx(f[5, 8], abs=1e-10)


def test_limit_prediction_identity_and_unused_entries():
    kq, pv = Z.limit_matrices(LAM, 20)
    p = LinearRegression(5, noise_std=0.5).sample(50, 31, seed=2, n_context=30).to(dtype=torch.float64)
    pred = LSA.from_matrices(kq, pv).predict(p).detach().numpy()
    ref = Z.lsa_predict(p.x[:, :30].numpy(), p.y[:, :30].numpy(), p.x[:, 30:].numpy(), LAM, 20)
    assert np.abs(pred - ref).max() < 1e-10
    kq[:, 5] += 1.0
    pv[:5] += 1.0
    assert np.abs(LSA.from_matrices(kq, pv).predict(p).detach().numpy() - pred).max() < 1e-10


def test_structured_lsa_init_is_assumption3():
    theta = np.random.default_rng(0).standard_normal((5, 5))
    U0, u0 = Z.init_assumption3(5, 0.3, theta=theta)
    m = LSA(5, sigma=0.3, theta=theta, dtype=torch.float64)
    assert np.allclose(m.U11.detach().numpy(), U0) and float(m.u.detach()) == pytest.approx(u0)
    assert np.linalg.norm(U0) == pytest.approx(0.3)         # balanced at t = 0
    with pytest.raises(ValueError, match="theta must have shape"):
        LSA(5, theta=np.eye(4))
    with pytest.raises(ValueError, match="param"):
        LSA(5, param="lowrank")


def test_gradient_flow_reaches_theorem4_limit_and_stays_balanced():
    U0, u0 = Z.init_assumption3(5, 0.5 * Z.sigma_max(LAM, 20), seed=1)
    fl = Z.gradient_flow(LAM, 20, U0, u0, t_max=60, dt=0.01)
    Gi = np.linalg.inv(Z.gamma(LAM, 20))
    assert np.abs(fl["u"][-1] * fl["U11"][-1] - Gi).max() < 1e-8
    assert fl["u"][-1] == pytest.approx(np.linalg.norm(Gi) ** 0.5, rel=1e-8)
    assert np.abs(fl["u"] ** 2 - (fl["U11"] ** 2).sum((1, 2))).max() < 1e-6
    assert fl["loss"][-1] == pytest.approx(Z.min_reduced_loss(LAM, 20), abs=1e-10)
    assert np.all(np.diff(fl["loss"]) <= 1e-12)             # gradient flow never increases the loss


def test_reduced_grad_is_the_gradient_of_reduced_loss():
    rng = np.random.default_rng(3)
    U, u, eps = rng.standard_normal((5, 5)), 0.7, 1e-6
    gU, gu = Z.reduced_grad(U, u, LAM, 20)
    E = np.zeros((5, 5)); E[1, 3] = eps
    fd = (Z.reduced_loss(U + E, u, LAM, 20) - Z.reduced_loss(U - E, u, LAM, 20)) / (2 * eps)
    assert fd == pytest.approx(gU[1, 3], rel=1e-6)
    fdu = (Z.reduced_loss(U, u + eps, LAM, 20) - Z.reduced_loss(U, u - eps, LAM, 20)) / (2 * eps)
    assert fdu == pytest.approx(gu, rel=1e-6)


def test_error_formulas_agree_with_each_other():
    Gi = np.linalg.inv(Z.gamma(LAM, 20))
    for M in (3, 20, 100):
        assert Z.error_at_P(Gi, M, LAM) == pytest.approx(Z.averaged_error(M, 20, LAM), rel=1e-12)
        assert Z.averaged_error(M, 20, LAM) <= Z.corollary6_bound(M, 20, LAM)
    w0 = np.array([0.3, -1.0, 0.5, 2.0, 0.1])
    Sigma = (w0 @ LAM @ w0) * LAM + LAM @ np.outer(w0, w0) @ LAM + 0.49 * LAM
    assert Z.linear_task_error_at_P(Gi, 7, LAM, w0, 0.7) == pytest.approx(
        Z.theorem5_error(7, 20, LAM, w0, Sigma, 0.49), rel=1e-12)
    d, N = 5, 20
    assert Z.averaged_error(N, N, LAM) == pytest.approx(np.trace(LAM) - np.trace(LAM @ LAM @ Gi), rel=1e-12)
    iso = Z.averaged_error(30, N, np.eye(d))
    g = 1 + (d + 1) / N
    assert iso == pytest.approx(d * (d + 1) / g ** 2 * (1 / 30 + (d + 1) / N ** 2), rel=1e-12)


def test_averaged_error_by_monte_carlo():
    M, N = 10, 20
    p = LinearRegression(5, cov=torch.tensor(LAM)).sample(100_000, M + 1, seed=4).to(dtype=torch.float64)
    pred = Z.lsa_predict(p.x[:, :M].numpy(), p.y[:, :M].numpy(), p.x[:, M:].numpy(), LAM, N)[:, 0]
    err = (pred - p.y[:, M].numpy()) ** 2
    assert abs(err.mean() - Z.averaged_error(M, N, LAM)) < 4 * err.std() / np.sqrt(len(err))


def test_exp1_closed_forms_and_figure1_limits():
    Zm, xi = Z.exp1_moments(5, 20)
    Zmc, ximc = Z.random_diag_moments_mc(5, 20, n=400_000)
    assert np.abs(Zmc - Zm).max() / Zm.max() < 0.02 and np.allclose(ximc, 2, rtol=0.02)
    assert Z.kappa_random(5, 20) == pytest.approx(2 / 7)
    lims = [Z.fig1_lsa_error(1 / 3, 5, 10 ** 12, "random", c) for c in (1, 4, 9)]
    assert lims == pytest.approx([1 / 3, 76 / 3, 387], rel=1e-9)
    assert Z.fig1_lsa_error(1 / 3, 5, 10 ** 12, "identity") == pytest.approx(4 / 9, rel=1e-9)
    with pytest.raises(ValueError, match="test must be"):
        Z.fig1_lsa_error(0.3, 5, 10, "diag")


def test_structured_lsa_trains_towards_gamma_inverse():
    torch.manual_seed(0)
    m = LSA(5, sigma=0.3)
    train(m, LinearRegression(5, cov=torch.tensor(LAM)), steps=400, batch_size=1024, lr=0.02,
          lr_decay=0.995, n_points=21)
    Gi = np.linalg.inv(Z.gamma(LAM, 20))
    assert np.linalg.norm(m.product().detach().numpy() - Gi) / np.linalg.norm(Gi) < 0.1


def test_public_api_on_hand_worked_cases():
    # isotropic, d = 2, N = 3: Gamma = (1 + 1/3) I + 2/3 I = 2 I
    assert np.allclose(Z.gamma(np.eye(2), 3), 2 * np.eye(2))
    kq, pv = Z.global_minimum(np.eye(2), 3)
    # Gamma^-1 = I/2, ||Gamma^-1||_F = 1/sqrt 2: W_KQ block = 2^{1/4} I / 2, w_PV = 2^{-1/4}
    assert np.allclose(kq[:2, :2], 2 ** 0.25 / 2 * np.eye(2)) and np.allclose(kq[2], 0) and np.allclose(kq[:, 2], 0)
    assert pv[2, 2] == pytest.approx(2 ** -0.25) and np.count_nonzero(pv) == 1
    assert np.allclose(pv[2, 2] * kq[:2, :2], 0.5 * np.eye(2))       # the product is Gamma^-1
    # error for Lambda = I: d(d+1)/g^2 (1/M + (d+1)/N^2), g = 1 + (d+1)/N = 2
    assert Z.lsa_error(np.eye(2), 3, 6) == pytest.approx(2 * 3 / 4 * (1 / 6 + 3 / 9))
    assert Z.lsa_error(torch.eye(2, dtype=torch.float64), 3, 6) == pytest.approx(Z.lsa_error(np.eye(2), 3, 6))


@pytest.mark.parametrize("Lam, match", [
    (np.ones((2, 3)), "square"), (np.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric"),
    (np.diag([1.0, -1.0]), "positive definite"), (np.zeros((2, 2)), "positive definite"),
])
def test_bad_lambda(Lam, match):
    for call in (lambda: Z.gamma(Lam, 5), lambda: Z.global_minimum(Lam, 5), lambda: Z.lsa_error(Lam, 5, 5)):
        with pytest.raises(ValueError, match=match):
            call()


def test_task_error_at_P_is_theorem5_at_the_limit_and_relu_moments_are_exact():
    Lam = np.diag([0.5, 0.8, 1.0, 1.5, 2.2])
    w0 = np.array([1.0, -0.5, 0.3, 0.8, -1.2])
    a, Sigma, best = Z.relu_task_moments(w0, Lam)
    Gi = np.linalg.inv(Z.gamma(Lam, 20))
    for M in (5, 40):
        assert Z.task_error_at_P(Gi, M, Lam, a, Sigma, best) == pytest.approx(
            Z.theorem5_error(M, 20, Lam, a, Sigma, best), rel=1e-12)
    # the closed-form moments against a large Monte Carlo
    x = torch.randn(400_000, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64) @ torch.tensor(Lam ** 0.5)
    y = Z.relu_task_labels(x, w0)
    xy = (x * y[:, None]).numpy()
    assert np.allclose(np.linalg.solve(Lam, xy.mean(0)), a, atol=0.01)
    assert np.allclose(np.cov(xy.T), Sigma, atol=0.03 * np.abs(Sigma).max())
    w_ls = np.linalg.lstsq(x.numpy(), y.numpy(), rcond=None)[0]
    assert ((x.numpy() @ w_ls - y.numpy()) ** 2).mean() == pytest.approx(best, rel=0.02)


def test_theorem8_scale_condition():
    theta = np.random.default_rng(0).standard_normal((5, 5))
    bound = Z.sigma_max_random(5, 20, theta, n=20_000)
    assert 0 < bound < Z.sigma_max(np.eye(5), 20) * 2
    assert Z.sigma_max_random(5, 20, 3 * theta, n=20_000) == pytest.approx(bound)     # scale-free in Theta
    with pytest.raises(ValueError, match="n must be"):
        Z.sigma_max_random(5, 20, theta, n=10)
