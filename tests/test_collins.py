"""Collins et al.: task families, the softmax unit as Nadaraya-Watson, the Monte Carlo theory."""
import numpy as np
import pytest
import torch

from icl_core import train
from icl_core.baselines import nadaraya_watson
from icl_core.models import SoftmaxUnit
from icl_core.tasks import LipschitzTask, LowRankTask
from icl_core.theory import collins as C


@pytest.mark.parametrize("family", ["affine", "relu", "cosine"])
def test_lipschitz_tasks_are_L_lipschitz_on_the_sphere(family):
    s = LipschitzTask(5, family, 2.0)
    p = s.sample(200, 50, seed=0)
    assert torch.allclose(p.x.norm(dim=-1), torch.ones(200, 50), atol=1e-5)
    f = p.y
    dist = torch.cdist(p.x, p.x)
    slope = ((f[:, :, None] - f[:, None, :]).abs() / (dist + 1e-9))
    assert slope.max() <= 2.0 * (1 + 1e-3)
    if family != "cosine":           # f is exactly L times a fixed random function
        p1 = LipschitzTask(5, family, 1.0).sample(200, 50, seed=0)
        assert torch.allclose(p.y, 2 * p1.y, atol=1e-5)


def test_hills_and_low_rank_tasks():
    h = LipschitzTask(2, "hills", 0.0)
    assert torch.all(h.sample(5, 10, seed=0).y == 0)
    w = LipschitzTask(2, "hills", 0.0, hills="wrapped")
    assert torch.allclose(w.sample(5, 10, seed=0).y, torch.ones(5, 10))
    t = LowRankTask(10, 2, "linear")
    p = t.sample(100, 20, seed=0)
    moved = p.x + 0.3 * (t.B_perp @ torch.randn(8)).expand_as(p.x)   # move off col(B)
    assert torch.allclose(t.evaluate(moved, p.task), p.y, atol=1e-5)
    assert np.allclose(t.B.T @ t.B, np.eye(2), atol=1e-6) and np.allclose(t.B.T @ t.B_perp, 0, atol=1e-6)


@pytest.mark.parametrize("build, match", [
    (lambda: LipschitzTask(5, "sine"), "family"),
    (lambda: LipschitzTask(5, "relu", L=0), "L must be"),
    (lambda: LipschitzTask(3, "hills"), "d must be 2"),
    (lambda: LipschitzTask(5, covariates="ball"), "covariates"),
    (lambda: LowRankTask(5, 5), "k must be"),
    (lambda: C.pretraining_loss(1.0, "sine", 1.0, 0.1, 20, 5), "family"),
    (lambda: C.pretraining_loss(1.0, "relu", 0.0, 0.1, 20, 5), "L must be"),
    (lambda: C.pretraining_loss(1.0, "relu", -1.0, 0.1, 20, 5), "L must be"),
    (lambda: C.pretraining_loss(1.0, "relu", 1.0, -0.1, 20, 5), "sigma"),
    (lambda: C.pretraining_loss(1.0, "relu", 1.0, 0.1, 0, 5), "n must be"),
    (lambda: C.optimal_window("cos", 1.0, 0.1, 20, 5), "family"),
    (lambda: C.optimal_window("relu", 1.0, 0.1, 0, 5), "n must be"),
])
def test_bad_arguments(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_softmax_unit_is_nadaraya_watson_on_the_sphere():
    p = LipschitzTask(4, "relu", 1.0, 0.2).sample(50, 31, seed=1, n_context=30).to(dtype=torch.float64)
    p.x = p.x / p.x.norm(dim=-1, keepdim=True)
    for w in (0.3, 3.0, 40.0):
        unit = SoftmaxUnit(4, param="M", init_scale=w).double()
        nw = nadaraya_watson(p.x[:, :30], p.y[:, :30], p.x[:, 30:], bandwidth=2 / w)
        assert torch.allclose(unit.predict(p), nw, atol=1e-12)


def test_pretraining_loss_endpoints_and_split():
    n, d = 20, 5
    S, N = C.loss_terms([0.0, 1.0, 5.0, 50.0], "affine", 1.0, n, d, num_tasks=20000, seed=0)
    assert N[0] == pytest.approx(1 / n, rel=1e-9)                      # a plain average
    assert S[0] == pytest.approx(1 / (3 * d) * (1 + 1 / n), rel=0.03)   # exact at w = 0
    assert np.all(np.diff(N) > 0) and N[-1] < 1
    total = C.pretraining_loss(np.array([0.0, 1.0]), "affine", 1.0, 0.3, n, d, num_tasks=20000, seed=0)
    assert np.allclose(total, S[:2] + 0.09 * N[:2])
    assert isinstance(C.pretraining_loss(1.0, "affine", 1.0, 0.3, n, d, num_tasks=100), float)


def test_optimal_window_monotone_and_scale_invariant():
    ws = [C.optimal_window("relu", 1.0, s, 20, 5, num_tasks=1500, seed=1) for s in (0.1, 0.5, 2.0)]
    assert ws[0] > ws[1] > ws[2]
    wn = [C.optimal_window("relu", 1.0, 0.5, n, 5, num_tasks=1500, seed=1) for n in (10, 40)]
    assert wn[1] > wn[0]
    a = C.optimal_window("affine", 1.0, 0.2, 20, 5, num_tasks=1500, seed=1)
    b = C.optimal_window("affine", 5.0, 1.0, 20, 5, num_tasks=1500, seed=1)
    assert a == pytest.approx(b, rel=1e-6)


def test_linear_attention_floor():
    loss, M = C.linear_attention_optimum("affine", 1.0, 0.1, 20, 5, num_tasks=20000, seed=2)
    assert loss >= (1 / 3) * 0.98 and M.shape == (5, 5)
    assert C.pretraining_loss(C.DEFAULT_WS, "affine", 1.0, 0.1, 20, 5, num_tasks=2000).min() < 1 / 3


def test_random_J_covariates_per_task_and_per_trial():
    """Appendix J.1's non-uniform sphere: with one J per task the prompts' second moments
    differ from task to task; with one J per trial they share one (up to sampling)."""
    def moments(cov):
        x = LowRankTask(6, 2, "affine", covariates=cov, seed=3).sample(4, 4000, seed=0).x.double()
        assert torch.allclose(x.norm(dim=-1), torch.ones(4, 4000, dtype=torch.float64), atol=1e-6)
        return x.transpose(1, 2) @ x / x.shape[1]                       # (4, d, d)
    fixed, per_task = moments("random_J"), moments("random_J_per_task")
    spread = lambda m: float((m - m.mean(0)).norm(dim=(1, 2)).max())
    assert spread(fixed) < 0.03 < 0.1 < spread(per_task)
    a = LowRankTask(6, 2, covariates="random_J_per_task").sample(3, 5, seed=7).x
    assert torch.equal(a, LowRankTask(6, 2, covariates="random_J_per_task").sample(3, 5, seed=7).x)


def test_rho():
    B, _ = np.linalg.qr(LowRankTask(6, 2).B.double().numpy())   # orthonormal in float64
    assert C.rho(3 * B @ B.T, B) < 1e-12
    assert C.rho(np.eye(6), B) == pytest.approx(1.0)


def test_trained_unit_learns_the_subspace():
    task = LowRankTask(8, 2, "cosine", noise_std=0.01, seed=3)
    units = [SoftmaxUnit(8) for _ in range(2)]
    train(units, task, steps=150, batch_size=16, lr=0.1, n_points=27, n_queries=5)
    assert max(C.rho(u.M.detach().numpy(), task.B.numpy()) for u in units) < 0.2


def test_lemma_b5_check_and_bias_bounds():
    b5 = C.lemma_b5_check(np.diag([0.4, 1.0, 2.5]), "relu", 1.0, 0.5, 10, n_dirs=2, num_tasks=600, seed=1)
    assert b5["identity"] > b5["sigma_inv"] and min(b5["perturbed"]) > b5["sigma_inv"]
    with pytest.raises(ValueError, match="Sigma must be"):
        C.lemma_b5_check(np.diag([1.0, -1.0, 1.0]))
    ws = np.geomspace(0.5, 50, 25)
    S = 1 / ws ** 1.5                                   # decays between the two bounds' rates
    b = C.bias_bounds(ws, S, 1000, 5)
    assert b["steepest_slope"] == pytest.approx(-1.5) and b["c_lo"] > 0 and b["c_hi"] > 0
    assert np.all(S[(ws >= 1) & (ws <= 1000 ** 0.4)] >= b["c_lo"] / ws[(ws >= 1) & (ws <= 1000 ** 0.4)] ** 2 - 1e-12)
    with pytest.raises(ValueError, match="ws must hold"):
        C.bias_bounds([0.1, 0.2, 0.3], [1.0, 0.5, 0.2], 1000, 5)


def test_best_subspace_ratio_is_the_projection_under_assumption_43():
    s = LowRankTask(6, 2, "linear", 0.0, "assumption43", seed=0)
    r = C.best_subspace_ratio(s, 10, rs=(0.0, 0.3, 1.0), cs=(2.0, 8.0), num_tasks=400)
    assert r["r"] == 0.0 and len(r["loss_by_r"]) == 3
