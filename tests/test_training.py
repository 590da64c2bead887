import pytest
import torch

from icl_core import Curriculum, LinearRegression, Transformer, TrainingDiverged, train
from icl_core.devices import pick_device


def small_model(seed=0, d=3):
    torch.manual_seed(seed)
    return Transformer(d, 16, 1, 2, d_mlp=32)


class OneTask(LinearRegression):
    """Every prompt shares one w: learnable in a few steps, so the loop itself is tested."""

    def sample_task(self, batch_size, g):
        return {"w": torch.tensor([1.0, -2.0, 0.5]).expand(batch_size, 3)}


def test_loss_decreases():
    fit = train(small_model(), OneTask(3), steps=150, batch_size=32, lr=3e-3, n_points=7)
    assert fit.losses.shape == (150,)
    assert fit.losses[-20:].mean() < 0.3 * fit.losses[:20].mean()


def test_resume_equals_uninterrupted(tmp_path):
    s = LinearRegression(3, noise_std=0.1)
    full = small_model()
    train(full, s, steps=12, batch_size=8, lr=1e-2, seed=5, n_points=6)
    part = small_model()
    ck = tmp_path / "run.pt"
    first = train(part, s, steps=7, batch_size=8, lr=1e-2, seed=5, n_points=6,
                  checkpoint_every=3, checkpoint_path=ck)
    assert first.checkpoint == str(ck) and ck.exists()
    fresh = small_model(seed=123)            # a different init: everything comes from the checkpoint
    resumed = train(fresh, s, steps=12, batch_size=8, lr=1e-2, seed=5, n_points=6,
                    checkpoint_path=ck)
    assert len(resumed.losses) == 12
    for (k, a), b in zip(full.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), k
    with pytest.raises(ValueError, match="seed=6 differs"):
        train(small_model(), s, steps=13, batch_size=8, lr=1e-2, seed=6, n_points=6, checkpoint_path=ck)


class NaNAfter(LinearRegression):
    def __init__(self, calls):
        super().__init__(3)
        self.calls = calls

    def evaluate(self, x, task):
        self.calls -= 1
        y = super().evaluate(x, task)
        return y * float("nan") if self.calls < 0 else y


def test_nonfinite_loss_names_step_and_checkpoint(tmp_path):
    ck = tmp_path / "c.pt"
    with pytest.raises(TrainingDiverged, match=rf"at step 5; last good checkpoint: {ck}"):
        train(small_model(), NaNAfter(5), steps=10, batch_size=4, n_points=5,
              checkpoint_every=2, checkpoint_path=ck)
    with pytest.raises(TrainingDiverged, match="step 0; last good checkpoint: none"):
        train(small_model(), NaNAfter(0), steps=3, batch_size=4, n_points=5)


def test_curriculum():
    c = Curriculum.garg(d=20, n_points=41)
    assert c.at(0) == (5, 11) and c.at(1999) == (5, 11) and c.at(2000) == (6, 13)
    assert c.at(10**6) == (20, 41)
    fit = train(small_model(d=6), LinearRegression(6), steps=4, batch_size=4,
                curriculum=Curriculum((2, 6, 2), (3, 9, 3), interval=2))
    assert fit.config["curriculum"]["interval"] == 2
    with pytest.raises(ValueError, match="dims end"):
        Curriculum((5, 3, 1), (3, 9, 1))


@pytest.mark.parametrize("kwargs, match", [
    (dict(steps=0, n_points=5), "steps"), (dict(steps=2, batch_size=0, n_points=5), "batch_size"),
    (dict(steps=2, lr=-1.0, n_points=5), "lr"), (dict(steps=2), "n_points must be given"),
    (dict(steps=2, n_points=1), "n_points"), (dict(steps=2, n_points=5, device="tpu"), "device"),
])
def test_bad_training_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train(small_model(), LinearRegression(3), **kwargs)


def test_mismatched_d():
    with pytest.raises(ValueError, match="sampler has d=4 but the model was built for d=3"):
        train(small_model(), LinearRegression(4), steps=1, n_points=5)


def test_pick_device():
    assert pick_device("cpu").type == "cpu"
    assert pick_device(None).type in ("cpu", "cuda", "mps")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            pick_device("cuda")
    with pytest.raises(ValueError, match="device must be"):
        pick_device("gpu0")
