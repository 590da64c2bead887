import pytest
import torch

from icl_core import LinearRegression, SparseLinearRegression, Streams, make_task
from icl_core.prompts import Prompt, derive_seed


def test_shapes_and_context_split():
    p = LinearRegression(4).sample(8, 11, seed=0)
    assert p.x.shape == (8, 11, 4) and p.y.shape == (8, 11) and p.task["w"].shape == (8, 4)
    assert p.n_context == 10
    assert p.context[0].shape == (8, 10, 4) and p.queries[1].shape == (8, 1)


@pytest.mark.parametrize("sampler", [LinearRegression(3, noise_std=0.1),
                                     LinearRegression(3, cov="random_diag"),
                                     SparseLinearRegression(6, 2, noise_std=0.2)])
def test_same_seed_same_prompts_and_different_seed_differs(sampler):
    a, b, c = (sampler.sample(5, 7, seed=s) for s in (1, 1, 2))
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.x, c.x)


def test_streams_are_separate():
    s = LinearRegression(3, noise_std=0.5)
    base = Streams.from_seed(0)
    other = Streams.from_seed(1)
    p1 = s.sample(4, 6, streams=Streams.from_seed(0))
    p2 = s.sample(4, 6, streams=Streams(Streams.from_seed(0).x, Streams.from_seed(0).task, other.noise))
    assert torch.equal(p1.x, p2.x) and torch.equal(p1.task["w"], p2.task["w"])
    assert not torch.equal(p1.y, p2.y)
    del base


def test_labels_are_linear_plus_noise():
    s = LinearRegression(5, noise_std=0.3)
    p = s.sample(4000, 5, seed=3)
    resid = p.y - torch.einsum("btd,bd->bt", p.x, p.task["w"])
    assert abs(resid.std().item() - 0.3) < 0.01
    noiseless = LinearRegression(5).sample(10, 5, seed=3)
    assert torch.allclose(noiseless.y, torch.einsum("btd,bd->bt", noiseless.x, noiseless.task["w"]))


def test_fixed_covariance_and_scale():
    cov = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    p = LinearRegression(2, cov=cov, cov_scale=4.0).sample(20000, 5, seed=0)
    emp = torch.einsum("bti,btj->ij", p.x.double(), p.x.double()) / (20000 * 5)
    assert torch.allclose(emp, 4 * cov.double(), rtol=0.05, atol=0.05)


def test_random_diag_covariance_per_prompt():
    p = LinearRegression(3, cov="random_diag", cov_scale=9.0).sample(200, 4000, seed=0)
    emp = (p.x ** 2).mean(1)                      # (B, d) per-prompt variances
    assert torch.allclose(emp, p.task["cov_diag"], rtol=0.15, atol=0.05)
    assert abs(p.task["cov_diag"].mean().item() / 9.0 - 1.0) < 0.1   # Exp(1) entries, scaled


def test_curriculum_truncation_zeroes_coordinates():
    p = LinearRegression(6).sample(3, 5, seed=0, d_active=2)
    assert torch.all(p.x[..., 2:] == 0) and torch.any(p.x[..., :2] != 0)
    assert torch.allclose(p.y, torch.einsum("btd,bd->bt", p.x, p.task["w"]))


@pytest.mark.parametrize("nonzero", ["gaussian", "rademacher"])
def test_sparse_support(nonzero):
    p = SparseLinearRegression(10, 3, nonzero=nonzero).sample(50, 4, seed=0)
    assert torch.all(p.task["support"].sum(1) == 3)
    assert torch.all((p.task["w"] != 0) <= p.task["support"])
    if nonzero == "rademacher":
        assert torch.allclose(p.task["w"].norm(dim=1), torch.ones(50))


def test_make_task():
    assert isinstance(make_task("noisy_linear", d=3, noise_std=0.1), LinearRegression)
    with pytest.raises(ValueError, match="noise_std"):
        make_task("noisy_linear", d=3)
    with pytest.raises(ValueError, match="task must be one of"):
        make_task("quadratic", d=3)


@pytest.mark.parametrize("build, match", [
    (lambda: LinearRegression(0), "d must be"),
    (lambda: LinearRegression(-2), "d must be"),
    (lambda: LinearRegression(3, noise_std=-0.1), "noise_std"),
    (lambda: LinearRegression(3, cov="full"), "cov must be"),
    (lambda: LinearRegression(3, cov=torch.eye(2)), r"cov must have shape"),
    (lambda: LinearRegression(2, cov=-torch.eye(2)), "positive definite"),
    (lambda: LinearRegression(3, cov_scale=0), "cov_scale"),
    (lambda: SparseLinearRegression(3, 4), "s must be"),
    (lambda: SparseLinearRegression(3, 1, nonzero="laplace"), "nonzero"),
    (lambda: LinearRegression(3).sample(0, 5, seed=0), "batch_size"),
    (lambda: LinearRegression(3).sample(2, 0, seed=0), "n_points"),
    (lambda: LinearRegression(3).sample(2, 5, seed=0, n_context=6), "n_context"),
    (lambda: LinearRegression(3).sample(2, 5, seed=0, n_context=0), "n_context"),
    (lambda: LinearRegression(3).sample(2, 1, seed=0), "n_points"),
    (lambda: LinearRegression(3).sample(2, 5, seed=0, d_active=4), "d_active"),
    (lambda: LinearRegression(3).sample(2, 5), "seed"),
    (lambda: LinearRegression(2.5), "d must be"),
])
def test_bad_arguments(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_prompt_validation_and_seeds():
    with pytest.raises(ValueError, match="y must have shape"):
        Prompt(torch.zeros(2, 3, 4), torch.zeros(2, 4), 2)
    assert derive_seed(0, 1) != derive_seed(1, 0) and derive_seed(5, 5) == derive_seed(5, 5)
