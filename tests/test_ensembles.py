"""Batched ensembles: K models trained in one call follow exactly the trajectories they would
follow one by one (same data per run, independent Adam states)."""
import numpy as np
import pytest
import torch

from icl_core import LinearRegression, SoftmaxUnit, Transformer, TrainingDiverged, train


def units(K, **kw):
    return [SoftmaxUnit(3, **kw) for _ in range(K)]


def assert_same_params(a, b, atol):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=atol, rtol=1e-4), name


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_softmax_unit_ensemble_equals_sequential(attention):
    samplers = [LinearRegression(3, noise_std=s) for s in (0.0, 0.1, 0.5)]
    kw = dict(steps=40, batch_size=8, lr=0.05, n_points=12, n_queries=4, grad_clip=1.0,
              lr_decay=0.99)
    ens = units(3, attention=attention)
    fit = train(ens, samplers, seed=[3, 9, 11], **kw)
    assert fit.losses.shape == (3, 40) and fit.seed == [3, 9, 11]
    for k, (s, seed) in enumerate(zip(samplers, (3, 9, 11))):
        alone = SoftmaxUnit(3, attention=attention)
        one = train(alone, s, seed=seed, **kw)
        assert np.allclose(fit.losses[k], one.losses, rtol=1e-4, atol=1e-6)
        assert_same_params(ens[k], alone, atol=1e-5)


@pytest.mark.parametrize("use_vmap", [True, False])
def test_transformer_ensemble_equals_sequential(use_vmap):
    torch.manual_seed(0)
    models = [Transformer(3, 16, 2, 2, d_mlp=32) for _ in range(2)]
    copies = [Transformer(3, 16, 2, 2, d_mlp=32) for _ in range(2)]
    for m, c in zip(models, copies):
        c.load_state_dict(m.state_dict())
    kw = dict(steps=15, batch_size=4, lr=3e-3, n_points=7, grad_clip=0.5)
    fit = train(models, LinearRegression(3), seed=5, vmap=use_vmap, **kw)
    probe = LinearRegression(3).sample(16, 7, seed=99)
    for k in range(2):
        one = train(copies[k], LinearRegression(3), seed=5 + k, **kw)
        assert np.allclose(fit.losses[k], one.losses, rtol=1e-4, atol=1e-6)
        # Compare what the models compute, not every weight: the key bias cancels in the
        # softmax, its true gradient is 0, and Adam turns float noise there into +-lr steps.
        with torch.no_grad():
            assert torch.allclose(models[k].predict(probe), copies[k].predict(probe), atol=1e-4)


def test_stacked_transformer_ensemble_runs():
    torch.manual_seed(0)
    models = [Transformer(3, 16, 1, 2, layout="stacked", attention="linear") for _ in range(3)]
    fit = train(models, LinearRegression(3), steps=3, batch_size=4, n_points=8, n_queries=3)
    assert fit.losses.shape == (3, 3)


def test_ensemble_resume_equals_uninterrupted(tmp_path):
    s = LinearRegression(3, noise_std=0.1)
    kw = dict(batch_size=4, lr=0.05, n_points=10, n_queries=2, seed=[1, 2], lr_decay=0.98)
    full = units(2)
    train(full, s, steps=20, **kw)
    part = units(2)
    train(part, s, steps=8, checkpoint_every=4, checkpoint_path=tmp_path / "e.pt", **kw)
    fresh = units(2, init_scale=0.5)
    res = train(fresh, s, steps=20, checkpoint_path=tmp_path / "e.pt", **kw)
    assert res.losses.shape == (2, 20)
    for a, b in zip(full, fresh):
        assert torch.equal(a.W, b.W)


@pytest.mark.parametrize("first_vmap", [True, False])
def test_transformer_ensemble_resumes_in_its_checkpoints_mode(tmp_path, first_vmap):
    """vmap and separate modes lay the optimizer state out differently: a resume without
    ``vmap`` follows the checkpoint (and matches an uninterrupted run); a contrary one fails."""
    def make():
        torch.manual_seed(0)
        return [Transformer(3, 8, 1, 2, d_mlp=16) for _ in range(2)]
    kw = dict(batch_size=4, lr=3e-3, n_points=6, seed=3, grad_clip=1.0)
    full = make()
    train(full, LinearRegression(3), steps=8, vmap=first_vmap, **kw)
    ck = tmp_path / "t.pt"
    part = make()
    train(part, LinearRegression(3), steps=5, checkpoint_path=ck, vmap=first_vmap, **kw)
    with pytest.raises(ValueError, match=f"vmap={not first_vmap} but the checkpoint"):
        train(make(), LinearRegression(3), steps=8, checkpoint_path=ck, vmap=not first_vmap, **kw)
    resumed = make()
    train(resumed, LinearRegression(3), steps=8, checkpoint_path=ck, **kw)
    probe = LinearRegression(3).sample(16, 6, seed=1)
    with torch.no_grad():
        for a, b in zip(full, resumed):
            assert torch.allclose(a.predict(probe), b.predict(probe), atol=1e-5)


def test_ensemble_bad_arguments():
    with pytest.raises(ValueError, match="same class, config and shapes"):
        train([SoftmaxUnit(3), SoftmaxUnit(3, param="untied")], LinearRegression(3), steps=1, n_points=5)
    with pytest.raises(ValueError, match="seed must have one entry per model"):
        train(units(2), LinearRegression(3), steps=1, n_points=5, seed=[1, 2, 3])
    with pytest.raises(ValueError, match="sampler must have one entry per model"):
        train(units(2), [LinearRegression(3)], steps=1, n_points=5)
    with pytest.raises(ValueError, match="non-empty"):
        train([], LinearRegression(3), steps=1, n_points=5)
    with pytest.raises(ValueError, match="n_queries"):
        train(units(2), LinearRegression(3), steps=1, n_points=5, n_queries=5)


class NaNSampler(LinearRegression):
    def evaluate(self, x, task):
        return super().evaluate(x, task) * float("nan")


def test_ensemble_divergence_names_the_run():
    with pytest.raises(TrainingDiverged, match=r"run 1 \(seed 8\): loss is nan at step 0"):
        train(units(2), [LinearRegression(3), NaNSampler(3)], steps=2, n_points=5, seed=[7, 8])


@pytest.mark.parametrize("sampler", [LinearRegression(3, noise_std=0.2),
                                     LinearRegression(3, cov=torch.diag(torch.tensor([1.0, 2.0, 0.5])),
                                                      cov_scale=4.0),
                                     LinearRegression(3, cov="random_diag", noise_std=0.1)])
def test_draw_runs_equals_separate_draws(sampler):
    from icl_core import Streams
    x, y = sampler.draw_runs([Streams.from_seed(s) for s in (1, 2, 3)], 4, 6, d_active=2)
    for k, s in enumerate((1, 2, 3)):
        xk, yk, _ = sampler.draw(Streams.from_seed(s), 4, 6, d_active=2)
        assert torch.allclose(x[k], xk, atol=1e-6) and torch.allclose(y[k], yk, atol=1e-5)


def test_shared_sampler_ensemble_equals_sequential():
    s = LinearRegression(3, noise_std=0.3)
    kw = dict(steps=30, batch_size=4, lr=0.05, n_points=10, n_queries=3)
    ens = units(3)
    fit = train(ens, s, seed=0, **kw)
    for k in range(3):
        alone = SoftmaxUnit(3)
        one = train(alone, s, seed=k, **kw)
        assert np.allclose(fit.losses[k], one.losses, rtol=1e-4, atol=1e-6)
        assert_same_params(ens[k], alone, atol=1e-5)


def test_compile_flag_validation_and_fallback(monkeypatch):
    with pytest.raises(ValueError, match="only supported for a single model"):
        train(units(2), LinearRegression(3), steps=1, n_points=5, compile=True)

    def broken(model):
        def fail(*args, **kwargs):
            raise RuntimeError("no compiler here")
        return fail
    monkeypatch.setattr(torch, "compile", broken)
    with pytest.warns(UserWarning, match="torch.compile failed"):
        fit = train(SoftmaxUnit(3), LinearRegression(3), steps=3, n_points=6, compile=True)
    assert fit.losses.shape == (3,)


class FixedW(LinearRegression):
    def sample_task(self, batch_size, g):
        return {"w": torch.ones(batch_size, 3)}


def test_draw_runs_respects_subclass_overrides():
    from icl_core import Streams
    x, y = FixedW(3).draw_runs([Streams.from_seed(1), Streams.from_seed(2)], 2, 5)
    assert torch.allclose(y, x.sum(-1))


def test_trace_records_steps_and_sees_current_weights():
    fit = train(units(2), LinearRegression(3), steps=10, batch_size=4, lr=0.1, n_points=6,
                trace=lambda ms: [float(m.M.norm()) for m in ms], trace_every=4)
    assert [s for s, _ in fit.trace] == [0, 4, 8, 10]
    assert fit.trace[0][1][0] == pytest.approx(1e-6 * 3 ** 0.5, rel=1e-4)   # M_0 = (1e-3 I)^2
    assert fit.trace[-1][1][0] > fit.trace[0][1][0]
    with pytest.raises(ValueError, match="trace_every"):
        train(SoftmaxUnit(3), LinearRegression(3), steps=2, n_points=5, trace=len)


# --- prefetch: the prompts of several steps drawn at once --------------------------------

def test_prefetch_ensemble_equals_sequential_and_draws_blocks():
    samplers = [LinearRegression(3, noise_std=s) for s in (0.0, 0.3)]
    kw = dict(steps=23, batch_size=4, lr=0.05, n_points=10, n_queries=3, prefetch=10)
    ens = units(2)
    fit = train(ens, samplers, seed=[4, 9], **kw)
    assert fit.config["prefetch"] == 10
    for k, (s, seed) in enumerate(zip(samplers, (4, 9))):
        alone = SoftmaxUnit(3)
        one = train(alone, s, seed=seed, **kw)
        assert np.allclose(fit.losses[k], one.losses, rtol=1e-4, atol=1e-6)
        assert_same_params(ens[k], alone, atol=1e-5)
    # step j of a chunk trains on block j of one draw of prefetch * batch_size prompts: the
    # first step's loss is that of the (untrained) unit on the first block
    from icl_core import Streams
    x, y, _ = samplers[1].draw(Streams.from_seed(9), 10 * 4, 10)
    with torch.no_grad():
        first = ((SoftmaxUnit(3)(x[:4], y[:4], 7) - y[:4, 7:]) ** 2).mean()
    assert fit.losses[1, 0] == pytest.approx(float(first), rel=1e-5)
    # and the data differs from one draw per step (same law, other prompts)
    per_step = train(units(2), samplers, seed=[4, 9], **{**kw, "prefetch": 1})
    assert not np.allclose(per_step.losses[:, 1:], fit.losses[:, 1:])


@pytest.mark.parametrize("stop", [7, 10, 13])
def test_prefetch_resume_mid_chunk_equals_uninterrupted(tmp_path, stop):
    s = LinearRegression(3, noise_std=0.1)
    kw = dict(batch_size=4, lr=0.05, n_points=10, n_queries=2, seed=[1, 2], prefetch=5)
    full = units(2)
    ref = train(full, s, steps=20, **kw)
    ck = tmp_path / "p.pt"
    train(units(2), s, steps=stop, checkpoint_every=3, checkpoint_path=ck, **kw)
    fresh = units(2, init_scale=0.5)
    res = train(fresh, s, steps=20, checkpoint_path=ck, **kw)
    assert np.allclose(res.losses, ref.losses, rtol=1e-6)
    for a, b in zip(full, fresh):
        assert torch.equal(a.W, b.W)
    with pytest.raises(ValueError, match="prefetch=4 differs from the checkpoint's prefetch=5"):
        train(units(2), s, steps=25, checkpoint_path=ck, **{**kw, "prefetch": 4})


def test_prefetch_chunks_stop_at_curriculum_stages(tmp_path):
    from icl_core import Curriculum, Transformer
    cur = Curriculum((2, 4, 1), (4, 8, 2), interval=3)
    kw = dict(batch_size=2, lr=1e-2, curriculum=cur, prefetch=2)
    torch.manual_seed(0)
    a, b = Transformer(4, 8, 1, 1, d_mlp=0), Transformer(4, 8, 1, 1, d_mlp=0)
    b.load_state_dict(a.state_dict())
    ref = train(a, LinearRegression(4), steps=9, **kw)   # chunks [0,2) [2,3) [3,5) [5,6) ...
    ck = tmp_path / "c.pt"
    train(b, LinearRegression(4), steps=4, checkpoint_every=1, checkpoint_path=ck, **kw)
    res = train(b, LinearRegression(4), steps=9, checkpoint_path=ck, **kw)
    assert np.allclose(res.losses, ref.losses, rtol=1e-5)
    # every step gets the prompt length of its own stage: no chunk crosses a stage
    from icl_core import Streams
    from icl_core.training import _Prompts
    prompts = _Prompts([LinearRegression(4)], [Streams.from_seed(0)], 2, 2, None, 1, cur,
                       torch.device("cpu"), keep_states=False)
    for step in range(9):
        x, y, n_context = prompts.at(step)
        d_active, T = cur.at(step)
        assert x.shape == (1, 2, T, 4) and n_context == T - 1
        assert (x[..., d_active:] == 0).all() and (x[..., :d_active] != 0).all()
    with pytest.raises(ValueError, match="prefetch"):
        train(units(1)[0], LinearRegression(3), steps=2, n_points=5, prefetch=0)


def test_losses_of_changing_shapes_are_logged_per_step():
    """Run-batched units log their errors and average them at each check: with a curriculum
    the number of queries changes (T = 3 -> q = 2, later q = 4) and every step keeps its own."""
    from icl_core import Curriculum
    cur = Curriculum((3, 3, 0), (3, 9, 3), interval=4)
    kw = dict(steps=12, batch_size=2, lr=0.05, n_queries=4, curriculum=cur)
    fit = train(units(2), LinearRegression(3), seed=[1, 2], **kw)
    assert fit.losses.shape == (2, 12) and np.isfinite(fit.losses).all()
    for k, seed in enumerate((1, 2)):
        one = train(SoftmaxUnit(3), LinearRegression(3), seed=seed, **kw)
        assert np.allclose(fit.losses[k], one.losses, rtol=1e-4, atol=1e-6)


def test_divergence_found_at_a_later_check_names_its_step():
    from tests.test_training import NaNAfter
    with pytest.raises(TrainingDiverged, match=r"at step 5; last good checkpoint: none .*"
                                               r"every 100 steps: the models in memory took 94 more"):
        train(SoftmaxUnit(3), NaNAfter(5), steps=300, batch_size=2, n_points=5)


def test_layer_clip_caps_each_runs_layers_and_matches_runs_trained_alone(tmp_path):
    from icl_core.ensembles import Runs
    from icl_core.models import KernelTransformer
    from icl_core.tasks import GPTask

    def make():
        torch.manual_seed(4)
        return [KernelTransformer(5, 2, ["relu"]) for _ in range(2)]
    for use_vmap in (False, True):                                    # separate and vmap: the run axis differs
        runs = Runs(make(), "cpu", use_vmap=use_vmap)
        for i, p in enumerate(runs.params.values()):
            p.grad = torch.arange(1.0, p.numel() + 1).reshape(p.shape) * (i + 1)
        grads = lambda: [[p.grad for p in m.parameters()] for m in runs.models] if runs.mode == "separate" else \
            [[p.grad[k] for p in runs.params.values()] for k in range(2)]
        before = [[g.clone() for g in run] for run in grads()]
        norms = lambda gs: torch.tensor([[sum(g[l].pow(2).sum() for g in run).sqrt() for l in range(2)] for run in gs])
        tall = norms(before)                                          # (runs, layers), all above 1e-3
        runs.clip_layers(torch.tensor([1e-3, 1e6]))                   # layer 0 capped, layer 1 not
        after = norms(grads())
        assert torch.allclose(after[:, 0], torch.full((2,), 1e-3)) and torch.equal(after[:, 1], tall[:, 1])
        for k, (run, was) in enumerate(zip(grads(), before)):         # a rescaling, per run and layer
            for g, w in zip(run, was):
                assert torch.allclose(g[0], w[0] * 1e-3 / tall[k, 0]) and torch.equal(g[1], w[1])
    with pytest.raises(ValueError, match="layer_clip gives 3 layers"):
        runs.clip_layers(torch.tensor([1.0, 1.0, 1.0]))

    kw = dict(steps=6, batch_size=4, lr=0.1, n_points=7, adam_betas=(0.9, 0.9),
              layer_clip=[(0, [1e-8, 2e-8]), (3, [1e-7, 2e-7])])
    task = GPTask(5, "relu", seed=0)
    ens = make()
    fit = train(ens, task, seed=[2, 5], **kw)
    for k, seed in enumerate((2, 5)):
        alone = make()[k]
        one = train(alone, task, seed=seed, **kw)
        assert np.allclose(fit.losses[k], one.losses, rtol=1e-5)
        assert_same_params(ens[k], alone, atol=1e-6)
    plain = make()
    train(plain, task, seed=[2, 5], **{**kw, "layer_clip": None})
    assert not torch.allclose(plain[0].B, ens[0].B)                    # the clip changed the trajectory
    ck = tmp_path / "k.pt"
    train(make(), task, seed=[2, 5], checkpoint_path=ck, **{**kw, "steps": 3})
    with pytest.raises(ValueError, match="layer_clip"):               # part of what a resume must share
        train(make(), task, seed=[2, 5], checkpoint_path=ck, **{**kw, "layer_clip": [(0, [1e-8, 1e-8])]})
    with pytest.raises(ValueError, match="adam_betas"):
        train(make(), task, seed=[2, 5], checkpoint_path=ck, **{**kw, "adam_betas": (0.9, 0.999)})
    for bad, match in (([(1, [1.0, 1.0])], "start at 0"), ([(0, [1.0, 1.0]), (0, [1.0, 1.0])], "rise"),
                       ([(0, [1.0, -1.0])], "radii must be > 0"), ("clip", "pairs")):
        with pytest.raises(ValueError, match=match):
            train(make(), task, **{**kw, "layer_clip": bad})
    with pytest.raises(ValueError, match="not both"):
        train(make(), task, grad_clip=1.0, **kw)
    with pytest.raises(ValueError, match="adam_betas"):
        train(make(), task, **{**kw, "adam_betas": (0.9, 1.5)})
