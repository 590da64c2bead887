import math

import numpy as np
import pytest
import torch

from icl_core import LinearRegression
from icl_core.baselines import averaging, gd, knn, ols, ols_weights, prefix_predictions, ridge
from icl_core.theory.linear import bayes_excess_risk, gaussian_posterior, ols_excess_risk


@pytest.fixture
def prompt():
    return LinearRegression(4, noise_std=0.3).sample(6, 12, seed=0, n_context=9).to(dtype=torch.float64)


def test_ols_matches_normal_equations(prompt):
    xc, yc = prompt.context
    xq = prompt.queries[0]
    w = np.stack([np.linalg.solve(X.T @ X, X.T @ y) for X, y in zip(xc.numpy(), yc.numpy())])
    expected = np.einsum("bqd,bd->bq", xq.numpy(), w)
    assert np.allclose(ols(xc, yc, xq).numpy(), expected, atol=1e-10)


def test_ols_min_norm_when_underdetermined():
    p = LinearRegression(6).sample(3, 3, seed=1, n_context=2).to(dtype=torch.float64)
    xc, yc = p.context
    w = ols_weights(xc, yc).numpy()
    expected = np.stack([np.linalg.pinv(X) @ y for X, y in zip(xc.numpy(), yc.numpy())])
    assert np.allclose(w, expected, atol=1e-10)
    assert np.allclose(np.einsum("bnd,bd->bn", xc.numpy(), w), yc.numpy(), atol=1e-10)  # interpolates


def test_ridge_closed_form_and_posterior(prompt):
    xc, yc = prompt.context
    xq = prompt.queries[0]
    lam = 0.7
    w = np.stack([np.linalg.solve(X.T @ X + lam * np.eye(4), X.T @ y) for X, y in zip(xc.numpy(), yc.numpy())])
    assert np.allclose(ridge(xc, yc, xq, lam=lam).numpy(), np.einsum("bqd,bd->bq", xq.numpy(), w), atol=1e-10)
    mu, _ = gaussian_posterior(xc, yc, sigma=0.3, tau=1.0)
    assert torch.allclose(ridge(xc, yc, xq, lam=0.09), torch.einsum("bqd,bd->bq", xq, mu), atol=1e-10)


def test_knn_by_hand():
    xc = torch.tensor([[[0.0], [1.0], [2.0], [10.0]]])
    yc = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    xq = torch.tensor([[[0.9], [11.0]]])
    assert torch.allclose(knn(xc, yc, xq, k=3), torch.tensor([[2.0, (100 + 3 + 2) / 3]]))
    assert torch.allclose(knn(xc[:, :2], yc[:, :2], xq, k=3), torch.tensor([[1.5, 1.5]]))


def test_averaging_is_one_gd_step(prompt):
    xc, yc = prompt.context
    xq = prompt.queries[0]
    w = (yc.unsqueeze(-1) * xc).mean(1)
    assert torch.allclose(averaging(xc, yc, xq), torch.einsum("bqd,bd->bq", xq, w))
    assert torch.allclose(gd(xc, yc, xq, steps=1, lr=1.0), averaging(xc, yc, xq), atol=1e-12)


def test_gd_converges_to_ols_and_preconditioned_step_is_newton(prompt):
    xc, yc = prompt.context
    xq = prompt.queries[0]
    assert torch.allclose(gd(xc, yc, xq, steps=3000, lr=0.5), ols(xc, yc, xq), atol=1e-6)
    n = xc.shape[1]
    P = torch.linalg.inv(xc.transpose(1, 2) @ xc / n)          # (B, d, d)
    assert torch.allclose(gd(xc, yc, xq, steps=1, lr=1.0, preconditioner=P), ols(xc, yc, xq), atol=1e-10)
    assert torch.all(gd(xc, yc, xq, steps=0) == 0)


def test_prefix_predictions(prompt):
    out = prefix_predictions(ols, prompt.x, prompt.y)
    assert out.shape == (6, 12) and torch.all(out[:, 0] == 0)
    assert torch.allclose(out[:, 7], ols(prompt.x[:, :7], prompt.y[:, :7], prompt.x[:, 7:8])[:, 0])


@pytest.mark.parametrize("call, match", [
    (lambda p: ridge(*p.context, p.queries[0], lam=0), "lam"),
    (lambda p: knn(*p.context, p.queries[0], k=0), "k must be"),
    (lambda p: gd(*p.context, p.queries[0], steps=-1), "steps"),
    (lambda p: gd(*p.context, p.queries[0], lr=-1.0), "lr"),
    (lambda p: ols(p.x[..., :3], p.y, p.queries[0]), "d="),
    (lambda p: ols(p.x, p.y[:, :3], p.queries[0]), "expected"),
])
def test_baseline_bad_arguments(prompt, call, match):
    with pytest.raises(ValueError, match=match):
        call(prompt)


def test_ols_excess_risk_branches():
    assert ols_excess_risk(12, 5, 0.5) == pytest.approx(0.25 * 5 / 6)
    assert ols_excess_risk(2, 5, 0.0) == pytest.approx(3.0)              # (1 - n/d) d tau^2
    assert ols_excess_risk(0, 5, 1.0, tau=2.0) == pytest.approx(20.0)
    assert all(math.isinf(ols_excess_risk(n, 5, 0.1)) for n in (4, 5, 6))
    with pytest.raises(ValueError, match="n must be"):
        ols_excess_risk(-1, 5, 0.1)
    with pytest.raises(ValueError, match="sigma"):
        ols_excess_risk(10, 5, -0.1)


def test_ols_risk_by_monte_carlo():
    d, n, sigma = 3, 12, 0.5
    p = LinearRegression(d, noise_std=sigma).sample(40_000, n + 1, seed=7)
    err = ((ols_weights(*p.context) - p.task["w"].double()) ** 2).sum(-1).mean().item()
    assert err == pytest.approx(ols_excess_risk(n, d, sigma), rel=0.05)


def test_bayes_risk_below_ols_and_matches_ridge_error():
    d, n, sigma = 3, 12, 0.5
    p = LinearRegression(d, noise_std=sigma).sample(40_000, n + 1, seed=8)
    xc, yc = p.context
    bayes = bayes_excess_risk(xc, sigma).mean().item()
    mu, _ = gaussian_posterior(xc, yc, sigma)
    mc = ((mu - p.task["w"].double()) ** 2).sum(-1).mean().item()
    assert mc == pytest.approx(bayes, rel=0.03)
    assert bayes < ols_excess_risk(n, d, sigma)
