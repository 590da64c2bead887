"""Checkpoints: trajectory fingerprints, safe loading, wall-clock pieces, Ctrl-C."""
import signal

import pytest
import torch

from icl_core import LinearRegression, SoftmaxUnit, Transformer, train


def model(seed=0, heads=1):
    torch.manual_seed(seed)
    return Transformer(3, 16, 1, heads, d_mlp=32)


KW = dict(batch_size=8, lr=1e-2, seed=5, n_points=6)


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("change", [dict(lr=2e-2), dict(batch_size=4), dict(n_points=7),
                                    dict(n_queries=2), dict(grad_clip=1.0), dict(weight_decay=0.1),
                                    dict(lr_decay=0.99), dict(heads=4), dict(noise=0.5)])
def test_resume_with_other_settings_is_refused(tmp_path, change):
    ck = tmp_path / "c.pt"
    train(model(), LinearRegression(3, noise_std=0.1), steps=4, checkpoint_path=ck, **KW)
    kw = dict(KW)
    kw.update({k: v for k, v in change.items() if k not in ("heads", "noise")})
    sampler = LinearRegression(3, noise_std=change.get("noise", 0.1))
    with pytest.raises(ValueError, match="written by a run with other") as err:
        train(model(heads=change.get("heads", 1)), sampler, steps=8, checkpoint_path=ck, **kw)
    key = {"heads": "model", "noise": "samplers"}.get(next(iter(change)), next(iter(change)))
    assert key in str(err.value) and str(ck) in str(err.value)


def test_steps_below_the_checkpoint_are_refused(tmp_path):
    ck = tmp_path / "c.pt"
    s = LinearRegression(3)
    train(model(), s, steps=6, checkpoint_path=ck, **KW)
    with pytest.raises(ValueError, match="steps=3 is below the checkpoint's step 6"):
        train(model(), s, steps=3, checkpoint_path=ck, **KW)


class Evil:
    def __reduce__(self):
        return (print, ("this ran while loading",))


def test_checkpoints_load_without_running_code(tmp_path):
    ck = tmp_path / "c.pt"
    torch.save({"step": 1, "payload": Evil()}, ck)
    with pytest.raises(ValueError, match=f"cannot read the checkpoint {ck}"):
        train(model(), LinearRegression(3), steps=2, checkpoint_path=ck, **KW)
    ck.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read the checkpoint"):
        train(model(), LinearRegression(3), steps=2, checkpoint_path=ck, **KW)


def test_bad_training_arguments_are_refused(tmp_path):
    s = LinearRegression(3)
    for kw, name in ((dict(grad_clip=-1.0), "grad_clip"), (dict(weight_decay=-0.1), "weight_decay"),
                     (dict(max_seconds=0), "max_seconds"), (dict(checkpoint_every=2), "checkpoint_path"),
                     (dict(lr="0.1"), "lr"), (dict(seed=1.7), "seed")):
        args = dict(KW, **kw)
        with pytest.raises(ValueError, match=name):
            train(model(), s, steps=2, **args)


def test_ensemble_of_different_head_counts_is_refused():
    with pytest.raises(ValueError, match="same class, config and shapes"):
        train([model(heads=1), model(heads=4)], LinearRegression(3), steps=2, **KW)


def test_max_seconds_stops_with_a_checkpoint_and_resumes_exactly(tmp_path):
    s = LinearRegression(3, noise_std=0.1)
    full = model()
    train(full, s, steps=30, **KW)
    ck = tmp_path / "c.pt"
    part = model()
    first = train(part, s, steps=30, checkpoint_path=ck, max_seconds=1e-9, **KW)
    assert not first.finished and first.steps == 1 and len(first.losses) == 1
    assert torch.load(ck, weights_only=True)["step"] == 1
    fresh = model(seed=9)
    rest = train(fresh, s, steps=30, checkpoint_path=ck, **KW)
    assert rest.finished and rest.steps == 30 and len(rest.losses) == 30
    assert same(full, fresh)


@pytest.fixture
def default_sigint():
    """Python's own SIGINT handler for the test, whatever the runner inherited (a shell that
    starts a job in the background, ``cmd &``, starts it with SIGINT ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def test_ctrl_c_writes_a_checkpoint_then_interrupts(tmp_path, default_sigint):
    s = LinearRegression(3, noise_std=0.1)
    full = model()
    train(full, s, steps=20, **KW)
    ck = tmp_path / "c.pt"

    def press_ctrl_c(_models):
        if getattr(press_ctrl_c, "armed", False):
            signal.raise_signal(signal.SIGINT)
        press_ctrl_c.armed = True          # not at step 0

    with pytest.raises(KeyboardInterrupt):
        train(model(), s, steps=20, checkpoint_path=ck, trace=press_ctrl_c, trace_every=7, **KW)
    assert torch.load(ck, weights_only=True)["step"] == 8     # the step in flight completes
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    fresh = model(seed=3)
    train(fresh, s, steps=20, checkpoint_path=ck, **KW)
    assert same(full, fresh)


def test_stacked_ensemble_fingerprint_ignores_init_settings(tmp_path):
    ck = tmp_path / "e.pt"
    s = LinearRegression(3)
    kw = dict(batch_size=4, lr=0.05, n_points=10, n_queries=2, seed=[1, 2])
    train([SoftmaxUnit(3) for _ in range(2)], s, steps=4, checkpoint_path=ck, **kw)
    res = train([SoftmaxUnit(3, init_scale=0.5) for _ in range(2)], s, steps=6, checkpoint_path=ck, **kw)
    assert res.losses.shape == (2, 6)
