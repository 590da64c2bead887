"""Cheng, Chen, Sra: kernels, functional GD, the Bayes predictor, the kernel-attention stack."""
import numpy as np
import pytest
import torch

from icl_core import train
from icl_core.baselines import functional_gd, gp_posterior_mean
from icl_core.kernels import flip, gram
from icl_core.models import KernelTransformer
from icl_core.tasks import GPTask


def sphere_points(*shape, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


def test_kernels_and_flip():
    x = sphere_points(6, 5)
    assert torch.allclose(gram(x, x, "linear"), x @ x.T)
    assert torch.all(gram(x, x, "relu") >= 0)
    assert torch.allclose(gram(x, x, "exp"), torch.exp(x @ x.T))
    Kp = flip(gram(x, x, "relu"))
    assert torch.linalg.eigvalsh(Kp).min() > -1e-12                 # K_+ is PSD
    Kexp = gram(x, x, "exp")
    assert torch.allclose(flip(Kexp), Kexp, atol=1e-10)            # unchanged when PSD
    with pytest.raises(ValueError, match="kernel must be one of"):
        gram(x, x, "rbf")
    with pytest.raises(ValueError, match="d >= 5"):
        gram(x[:, :3], x[:, :3], "composite")


def test_functional_gd_by_hand_and_shapes():
    x, y, xq = sphere_points(4, 3), torch.tensor([1.0, -1.0, 0.5, 2.0], dtype=torch.float64), sphere_points(2, 3, seed=1)
    K, kq = gram(x, x, "linear"), gram(xq, x, "linear")
    f1 = 0.3 * kq @ y                                               # one step from f_0 = 0
    f2 = f1 + 0.2 * kq @ (y - 0.3 * K @ y)
    assert torch.allclose(functional_gd(x, y, xq, "linear", 1, 0.3), f1)
    assert torch.allclose(functional_gd(x, y, xq, "linear", 2, [0.3, 0.2]), f2)
    assert functional_gd(x, y, xq, "exp", 0).abs().max() == 0
    batched = functional_gd(x[None].repeat(3, 1, 1), y[None].repeat(3, 1), xq[None].repeat(3, 1, 1), "relu", 3, 0.1)
    assert batched.shape == (3, 2) and torch.allclose(batched[1], functional_gd(x, y, xq, "relu", 3, 0.1))
    custom = functional_gd(x, y, xq, lambda U, W: (U @ W.transpose(-1, -2)) ** 2, 2, 0.1)
    assert custom.shape == (2,)
    with pytest.raises(ValueError, match="steps"):
        functional_gd(x, y, xq, "exp", -1)
    with pytest.raises(ValueError, match="kernel must be one of"):
        functional_gd(x, y, xq, "rbf", 1)
    with pytest.raises(ValueError, match="expected"):
        functional_gd(x, y[:3], xq, "exp", 1)
    with pytest.raises(ValueError, match="step_size must be"):
        functional_gd(x, y, xq, "exp", 2, [0.1])


def test_functional_gd_converges_to_the_bayes_predictor():
    """Proposition 3.4: with step 1/lambda_max, many steps reach the GP posterior mean."""
    x = sphere_points(8, 9, 5, seed=2)
    K = gram(x, x, "exp")
    y = (torch.linalg.cholesky(K + 1e-9 * torch.eye(9)) @ torch.randn(8, 9, 1, dtype=torch.float64,
         generator=torch.Generator().manual_seed(3))).squeeze(-1)
    bayes = gp_posterior_mean(x[:, :8], y[:, :8], x[:, 8:], "exp")
    r = 1 / torch.linalg.eigvalsh(K[:, :8, :8]).max()
    gaps = [(functional_gd(x[:, :8], y[:, :8], x[:, 8:], "exp", s, float(r)) - bayes).abs().max().item()
            for s in (1, 10, 100, 3000)]
    assert gaps[0] > gaps[1] > gaps[2] > gaps[3] and gaps[3] < 1e-3


def test_gp_posterior_mean_linear_kernel_is_exact_beyond_d():
    x = sphere_points(10, 4, seed=4)
    w = torch.randn(4, dtype=torch.float64)
    y = x @ w
    pred = gp_posterior_mean(x[:9], y[:9], x[9:], "linear")
    assert torch.allclose(pred, y[9:], atol=1e-8)


@pytest.mark.parametrize("activation", ["linear", "relu", "exp"])
def test_proposition_31_transformer_is_functional_gd(activation):
    x, y = sphere_points(3, 11, 5, seed=5), torch.randn(3, 11, dtype=torch.float64)
    steps = [0.4, 0.1, 0.25, 0.05, 0.3]
    m = KernelTransformer.functional_gd(5, steps, activation)
    for k, Y in enumerate(m.layers(x, y, 10)):
        ref = functional_gd(x[:, :10], y[:, :10], x[:, 10:], activation, k + 1, steps[:k + 1])
        assert (-Y[:, 10:] - ref).abs().max() < 1e-10
        assert torch.allclose(Y[:, :10], y[:, :10] - functional_gd(x[:, :10], y[:, :10], x[:, :10], activation, k + 1, steps[:k + 1]))


def test_two_heads_implement_the_sum_kernel():
    """Proposition D.1: heads with kernels K1, K2 and equal steps = functional GD for K1 + K2."""
    x, y = sphere_points(2, 9, 5, seed=6), torch.randn(2, 9, dtype=torch.float64)
    m = KernelTransformer(5, 3, ["exp", "linear"], fix_A=True, init_std=0.0, normalize=False).double()
    with torch.no_grad():
        m.r.fill_(-0.1)
        m.B.copy_(torch.eye(5).expand_as(m.B)); m.C.copy_(torch.eye(5).expand_as(m.C))
    sum_kernel = lambda U, W: gram(U, W, "exp") + gram(U, W, "linear")
    ref = functional_gd(x[:, :8], y[:, :8], x[:, 8:], sum_kernel, 3, 0.1)
    assert (m(x, y, 8) - ref).abs().max() < 1e-10


def test_gp_task_and_training_step():
    t = GPTask(5, "exp", seed=1)
    p = t.sample(64, 9, seed=0)
    assert p.x.shape == (64, 9, 5) and torch.allclose(p.x.double() @ t.inv_sqrt_sigma, p.task["xi"].double(), atol=1e-5)
    assert torch.allclose(p.task["xi"].norm(dim=-1), torch.ones(64, 9), atol=1e-5)
    with pytest.raises(ValueError, match="d must be 5"):
        GPTask(4, "exp")
    with pytest.raises(ValueError, match="activation"):
        KernelTransformer(5, 2, ["tanh"])
    torch.manual_seed(0)
    models = [KernelTransformer(5, 2, ["relu"]) for _ in range(2)]
    fit = train(models, t, steps=5, batch_size=32, lr=0.01, n_points=9)
    assert fit.losses.shape == (2, 5) and np.isfinite(fit.losses).all()


def test_theorems_45_46_stationary_points_exact_on_a_symmetrised_batch():
    from icl_core.theory import cheng as T
    task = GPTask(5, "relu", seed=0)
    x, y = T.augmented_batch(task, 2, 9, seed=1)
    for act in ("relu", "softmax"):
        m = T.model_on_family(task, 2, act, [0.7, 1.3], [-0.4, -0.2], a=[0.1, -0.2])
        g = T.full_gradient(m, x, y, 8)
        assert T.off_family_residual(g["B"], task.sqrt_sigma) < 1e-10    # grad_B along Sigma^{1/2}
        assert T.off_family_residual(g["A"], torch.eye(5, dtype=torch.float64)) < 1e-10
    model, hist = T.fit_scalars(task, x, y, 8, 2, "relu")
    g_opt = T.full_gradient(model, x, y, 8)
    norm = lambda g: float(sum(v.norm() ** 2 for v in g.values()) ** 0.5)
    assert hist[-1] < hist[0] and norm(g_opt) < 1e-6


def test_per_prompt_step_sizes():
    x, y, xq = sphere_points(3, 6, 4, seed=7), torch.randn(3, 6, dtype=torch.float64), sphere_points(3, 2, 4, seed=8)
    r = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    batched = functional_gd(x, y, xq, "exp", 4, r)
    for b in range(3):
        assert torch.allclose(batched[b], functional_gd(x[b], y[b], xq[b], "exp", 4, float(r[b])))
    with pytest.raises(ValueError, match="per-prompt"):
        functional_gd(x, y, xq, "exp", 2, r[:2])


def test_example_covariates_and_relu_net_task():
    from icl_core.tasks import ReluNetTask
    from icl_core.tasks.gp import relu_net_covariance
    g = GPTask(5, "linear", sigma="identity", covariates="gaussian").sample(4000, 3, seed=0)
    assert abs(g.task["xi"].var().item() - 1) < 0.05 and not torch.allclose(g.task["xi"].norm(dim=-1), torch.ones(4000, 3))
    mix = GPTask(5, "exp", sigma="identity", covariates="mixture").sample(3000, 6, seed=0).task["xi"]
    # within a prompt the points share a mean: their average pairwise covariance is I, not 0
    centred = mix - mix.mean((0, 1))
    cross = (centred[:, 0] * centred[:, 1]).mean().item()
    assert abs(cross - 1) < 0.15
    t = ReluNetTask(3, m=50)
    p = t.sample(60000, 2, seed=1)
    emp = (p.y[:, 0] * p.y[:, 1]).mean().item()
    xs = p.x.double()
    expected = relu_net_covariance(xs[:, :1], xs[:, 1:], 50)[:, 0, 0].mean().item()
    assert emp == pytest.approx(expected, rel=0.05)
    assert (p.y[:, 0] ** 2).mean().item() == pytest.approx(50 / 2, rel=0.05)    # m ||x||^2 / 2


def test_gp_labels_have_the_flipped_gram_covariance():
    from icl_core.kernels import flip, flipped_root, gram
    xi = sphere_points(4, 9, 5, seed=3)
    for kernel in ("linear", "relu", "exp", "composite"):
        R = flipped_root(gram(xi, xi, kernel), 1e-8)
        target = flip(gram(xi, xi, kernel)) + 1e-8 * torch.eye(9, dtype=torch.float64)
        assert (R @ R.transpose(-1, -2) - target).abs().max() < 1e-10, kernel


def test_draw_runs_of_a_sampler_that_overrides_draw():
    from icl_core import Streams
    t = GPTask(5, "exp", seed=2)
    x, y = t.draw_runs([Streams.from_seed(s) for s in (3, 4)], 6, 7)
    for k, s in enumerate((3, 4)):
        xk, yk, _ = t.draw(Streams.from_seed(s), 6, 7)
        assert torch.equal(x[k], xk) and torch.equal(y[k], yk)


def test_clamped_share_counts_the_exp_guard():
    x = torch.randn(8, 11, 5, generator=torch.Generator().manual_seed(0))
    y = torch.randn(8, 11, generator=torch.Generator().manual_seed(1))
    m = KernelTransformer(5, 2, ["exp", "linear"])
    assert m.clamped_share(x, y, 10) == 0.0                      # small init: exact everywhere
    with torch.no_grad():
        m.B.mul_(100.0); m.C.mul_(100.0)
    assert 0.0 < m.clamped_share(x, y, 10) < 1.0
    assert KernelTransformer(5, 2, ["relu"]).clamped_share(x, y, 10) == 0.0   # no exp head
