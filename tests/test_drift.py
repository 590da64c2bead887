"""icl_core.drift: the first-order pull of the loss's gradient on a quantity, against the noise
of single batches, and reading a training checkpoint's parameters and Adam moments back."""
import numpy as np
import pytest
import torch

from icl_core.checkpoints import load_checkpoint
from icl_core.drift import batch_derivatives, batch_rates, load_runs, second_moments, summarize
from icl_core.models import KernelTransformer
from icl_core.tasks import GPTask
from icl_core.training import train


class Line(torch.nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(w, dtype=torch.float64))


def _batches(k, noise, seed=0, size=256):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(k):
        x = torch.randn(size, 2, generator=g, dtype=torch.float64)
        out.append((x, x[:, 0] + noise * torch.randn(size, generator=g, dtype=torch.float64)))   # w* = (1, 0)
    return out


def _loss(m, b):
    x, y = b
    return ((x @ m.w - y) ** 2).mean()


def test_the_pull_of_the_gradient_matches_its_closed_form_and_its_sign():
    q = [lambda m: m.w[0], lambda m: m.w[1]]
    # at w = 0 a descent step moves w0 towards 1 at rate -d/dw0 loss = 2 E[x0 y] = 2, and w1 not at all
    d = batch_derivatives(Line([0.0, 0.0]), q, _loss, _batches(64, 0.0))
    s = summarize(d)
    assert abs(s[0]["mean"] - 2.0) < 3 * s[0]["se"] + 1e-3 and s[0]["pull"] == "up"
    assert abs(s[1]["mean"]) < 3 * s[1]["se"] + 1e-12
    # from above the optimum the pull is down; at the optimum, with label noise, there is none
    assert summarize(batch_derivatives(Line([2.0, 0.0]), q, _loss, _batches(64, 0.0)))[0]["pull"] == "down"
    at = summarize(batch_derivatives(Line([1.0, 0.0]), q, _loss, _batches(64, 1.0)))
    assert at[0]["pull"] == "none" and at[0]["sd"] > 10 * abs(at[0]["mean"])
    # Adam's preconditioner divides each coordinate's rate by sqrt(v_hat) (+ eps)
    v = {"w": torch.tensor([4.0, 1.0], dtype=torch.float64)}
    pre = batch_derivatives(Line([0.0, 0.0]), q, _loss, _batches(8, 0.0), moments=v, eps=0.0)
    np.testing.assert_allclose(pre[:, 0], batch_derivatives(Line([0.0, 0.0]), q, _loss, _batches(8, 0.0))[:, 0] / 2)


def test_several_steps_at_once_equal_each_step_alone():
    q = [lambda m: m.w[0], lambda m: (m.w ** 2).sum()]
    v = {"w": torch.tensor([4.0, 0.25], dtype=torch.float64)}
    both = batch_rates(Line([0.5, -1.0]), q, _loss, _batches(5, 0.3), {"gd": None, "adam": v})
    np.testing.assert_allclose(both["gd"], batch_derivatives(Line([0.5, -1.0]), q, _loss, _batches(5, 0.3)))
    np.testing.assert_allclose(both["adam"], batch_derivatives(Line([0.5, -1.0]), q, _loss, _batches(5, 0.3), moments=v))
    assert not np.allclose(both["gd"], both["adam"])
    with pytest.raises(ValueError, match="steps"):
        batch_rates(Line([0.0, 0.0]), q, _loss, _batches(2, 0.0), {})


def test_summarize_needs_two_batches():
    with pytest.raises(ValueError, match="batches"):
        summarize(np.zeros((1, 3)))


def test_a_training_checkpoint_loads_back_with_its_adam_moments(tmp_path):
    torch.manual_seed(0)
    models = [KernelTransformer(5, 2, ["relu"], fix_A=True).double() for _ in range(2)]
    path = tmp_path / "state.pt"
    train(models, GPTask(5, "relu", seed=0), 3, batch_size=8, lr=1e-2, grad_clip=1.0, seed=1, n_points=7,
          device="cpu", checkpoint_path=str(path))
    state = load_checkpoint(path)
    fresh = [KernelTransformer(5, 2, ["relu"], fix_A=True).double() for _ in range(2)]
    moments = load_runs(state, fresh)
    for m, f, v in zip(models, fresh, moments):
        for n, p in m.named_parameters():
            torch.testing.assert_close(f.get_parameter(n), p)
            assert v[n].shape == p.shape and bool((v[n] >= 0).all())
    assert any(float(v[n].max()) > 0 for v in moments for n in v)
    with pytest.raises(ValueError, match="parameter slots"):
        second_moments(state, ["r", "B"], 2)


def test_a_one_model_checkpoint_loads_back_too(tmp_path):
    torch.manual_seed(0)
    model = KernelTransformer(5, 2, ["relu"], fix_A=True).double()
    path = tmp_path / "state.pt"
    train(model, GPTask(5, "relu", seed=0), 3, batch_size=8, lr=1e-2, grad_clip=1.0, seed=1, n_points=7,
          device="cpu", checkpoint_path=str(path))
    fresh = [KernelTransformer(5, 2, ["relu"], fix_A=True).double()]
    (v,) = load_runs(load_checkpoint(path), fresh)
    for n, p in model.named_parameters():
        torch.testing.assert_close(fresh[0].get_parameter(n), p)
        assert v[n].shape == p.shape
