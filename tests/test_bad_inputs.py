"""Bad arguments across the public API and the CLI: each is refused with a ValueError that
names the argument (the CLI: exit code 2, the message, no traceback)."""
import subprocess
import sys

import numpy as np
import pytest
import torch

from icl_core import Curriculum, LinearRegression, SoftmaxUnit, SparseLinearRegression, Transformer, train
from icl_core.baselines import knn, lasso, ols, ridge
from icl_core.evaluation import error_vs_context
from icl_core.models import LSA, KernelTransformer
from icl_core.tasks import GPTask, LipschitzTask
from icl_core.tasks.pool import PoolSampler
from icl_core.theory import zhang as Z


def x3(B=2, n=4, d=3):
    return torch.randn(B, n, d), torch.randn(B, n), torch.randn(B, 1, d)


def nan_x():
    x, y, q = x3()
    x[0, 0, 0] = float("nan")
    return x, y, q


def nan_y():
    x, y, q = x3()
    y[1, 2] = float("inf")
    return x, y, q


def tiny_train(**kw):
    args = dict(steps=2, batch_size=2, n_points=4)
    args.update(kw)
    model = args.pop("model", None) or Transformer(3, 16, 1, 2, d_mlp=16)
    sampler = args.pop("sampler", None) or LinearRegression(3)
    return train(model, sampler, **args)


CASES = [
    # training
    ("steps=0", lambda: tiny_train(steps=0), "steps"),
    ("batch_size=0", lambda: tiny_train(batch_size=0), "batch_size"),
    ("lr=-1", lambda: tiny_train(lr=-1.0), "lr"),
    ("lr='0.1'", lambda: tiny_train(lr="0.1"), "lr"),
    ("lr=nan", lambda: tiny_train(lr=float("nan")), "lr"),
    ("grad_clip=-1", lambda: tiny_train(grad_clip=-1.0), "grad_clip"),
    ("weight_decay=-1", lambda: tiny_train(weight_decay=-1.0), "weight_decay"),
    ("seed=1.7", lambda: tiny_train(seed=1.7), "seed"),
    ("seed=-1", lambda: tiny_train(seed=-1), "seed"),
    ("n_points=1", lambda: tiny_train(n_points=1), "n_points"),
    ("n_queries=n_points", lambda: tiny_train(n_queries=4), "n_queries"),
    ("prefetch=0", lambda: tiny_train(prefetch=0), "prefetch"),
    ("checkpoint_every without path", lambda: tiny_train(checkpoint_every=1), "checkpoint_path"),
    ("max_seconds=0", lambda: tiny_train(max_seconds=0), "max_seconds"),
    ("lr_decay=1.5", lambda: tiny_train(lr_decay=1.5), "lr_decay"),
    ("device=tpu", lambda: tiny_train(device="tpu"), "device"),
    ("sampler d != model d", lambda: tiny_train(sampler=LinearRegression(4)), "d="),
    ("curriculum d above sampler d", lambda: tiny_train(curriculum=Curriculum((2, 5, 1), (3, 4, 1))), "curriculum"),
    ("empty model list", lambda: train([], LinearRegression(3), 2, n_points=4), "model"),
    ("trace without trace_every", lambda: tiny_train(trace=lambda m: 0), "trace_every"),
    # samplers
    ("noise_std='0.1'", lambda: LinearRegression(3, noise_std="0.1"), "noise_std"),
    ("noise_std=-1", lambda: LinearRegression(3, noise_std=-1.0), "noise_std"),
    ("d=0", lambda: LinearRegression(0), "d"),
    ("asymmetric covariance", lambda: LinearRegression(2, cov=torch.tensor([[1.0, 0.5], [0.0, 1.0]])), "cov"),
    ("s > d", lambda: SparseLinearRegression(4, 5), "s"),
    ("L < 0", lambda: LipschitzTask(3, "relu", L=-1.0), "L"),
    ("unknown kernel", lambda: GPTask(5, "laplace"), "kernel"),
    ("PoolSampler n_batches=0", lambda: PoolSampler(LinearRegression(3), 2, 4, n_batches=0), "n_batches"),
    ("sample batch 0", lambda: LinearRegression(3).sample(0, 4), "batch_size"),
    # models
    ("Transformer d=0", lambda: Transformer(0), "d"),
    ("heads do not divide width", lambda: Transformer(3, d_model=30, n_heads=4), "n_heads"),
    ("forward with other d", lambda: Transformer(3, 16, 1, 2)(torch.randn(2, 4, 5), torch.randn(2, 4), 3), "d"),
    ("LSA n_context=0", lambda: LSA(3)(torch.randn(2, 4, 3), torch.randn(2, 4), 0), "n_context"),
    ("SoftmaxUnit n_context=0", lambda: SoftmaxUnit(3)(torch.randn(2, 4, 3), torch.randn(2, 4), 0), "n_context"),
    ("KernelTransformer n_context too big", lambda: KernelTransformer(5, 2, ["relu"])(torch.randn(2, 4, 5), torch.randn(2, 4), 9), "n_context"),
    # baselines and theory
    ("ols NaN x", lambda: ols(*nan_x()), "x_ctx"),
    ("ridge inf y", lambda: ridge(*nan_y()), "y_ctx"),
    ("lasso NaN x", lambda: lasso(*nan_x()), "x_ctx"),
    ("ridge lam=-1", lambda: ridge(*x3(), lam=-1.0), "lam"),
    ("knn k=0", lambda: knn(*x3(), k=0), "k"),
    ("corollary6_bound M=0", lambda: Z.corollary6_bound(0, 10, np.ones(3)), "M"),
    ("error_vs_context n_prompts=0", lambda: error_vs_context({"ols": ols}, LinearRegression(3), 6, n_prompts=0), "n_prompts"),
]


@pytest.mark.parametrize("name,call,argument", CASES, ids=[c[0] for c in CASES])
def test_bad_argument_is_refused_naming_it(name, call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


def cli(*args):
    return subprocess.run([sys.executable, "-m", "icl_core", *args], capture_output=True, text=True)


CLI_CASES = [
    ("unknown recipe", ["run", "nope"], "recipe must be one of"),
    ("unknown scale", ["run", "foundations.error_vs_context", "--scale", "huge"], "scale must be one of"),
    ("unknown key", ["run", "foundations.error_vs_context", "--set", "width=3"], "unknown config keys"),
    ("--set without =", ["run", "foundations.error_vs_context", "--set", "steps"], "KEY=VALUE"),
    ("d=abc", ["run", "foundations.error_vs_context", "--set", "d=abc"], "d must be"),
    ("Ls=[]", ["run", "collins.figure3", "--set", "Ls=[]"], "Ls"),
    ("steps=-3", ["run", "foundations.error_vs_context", "--set", "steps=-3"], "steps"),
    ("continue: unknown long run", ["continue", "nope"], "long run must be one of"),
    ("continue: minutes=0", ["continue", "chen.train.paper-h4-L4", "--minutes", "0"], "minutes must be"),
    ("continue: unknown key", ["continue", "chen.train.paper-h4-L4", "--set", "width=3"], "unknown config keys"),
]


@pytest.mark.parametrize("name,args,message", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_refuses_with_exit_code_2(name, args, message):
    out = cli(*args)
    assert out.returncode == 2, out.stderr[-2000:]
    assert message in out.stderr and "Traceback" not in out.stderr


def test_small_grids_run():
    """Crashes found by probing: one seed and one L, one unit per setting."""
    from icl_core.recipes import run
    r = run("collins.figure3", "ci", device="cpu", seeds=1, Ls=[1.0], steps=5)
    assert len(r.metrics["relu_sphere_final_norm_mean_by_L"]) == 1
    r = run("collins.figure4", "ci", device="cpu", seeds=1, steps=5)
    assert r.metrics


def test_count_of_bad_inputs():
    assert len(CASES) + len(CLI_CASES) >= 50


def test_a_run_too_large_for_memory_is_refused_before_allocating():
    with pytest.raises(ValueError, match=r"needs at least [\d.]+ GiB on cpu .* GiB are available"):
        tiny_train(batch_size=10 ** 8, n_points=100)
    with pytest.raises(ValueError, match="prefetch"):
        tiny_train(batch_size=10 ** 5, n_points=100, prefetch=10 ** 5)
