"""Every recipe's "paper" config runs end to end (with tiny sizes), so the command a GPU user
is told to run does not crash on a code path the ci scale never takes."""
import pytest

from icl_core.recipes import list_recipes, run

TINY = {
    "foundations.error_vs_context": dict(steps=3, d_model=16, n_layers=1, n_heads=2, n_eval=16),
    "zhang.training": dict(t_max=1.0, gd_steps=10, adam_steps=20, batch_size=64),
    "zhang.error_vs_M": dict(Ns=[20], Ms=[5, 10], n_prompts=100, steps=10, batch_size=64),
    "zhang.shifts": dict(Ms=[10, 20], M_shift=30, n_prompts=200, steps=10, batch_size=64),
    "zhang.figure1": dict(Ns=[40], d_model=16, n_layers=1, n_heads=2, steps=3, n_eval=16,
                          lsa_steps=5, lsa_eval=100),
    "collins.figure1": dict(ns=[4, 8], steps=5, seeds=2, num_tasks=50),
    "collins.figure3": dict(steps=10, seeds=2, trace_every=5, test_tasks=50, mc_tasks=50),
    "collins.figure4": dict(steps=10, steps_n=10, seeds=2, trace_every=5, test_tasks=50,
                            mc_tasks=50, ns=[5, 10]),
    "collins.figure5": dict(steps=10, seeds=2, trace_every=5, test_tasks=50, n=20),
    "collins.figure9": dict(steps=10, seeds=2, trace_every=5, test_tasks=20, opt_tasks=20),
    "cheng.figure1": dict(seeds=2, batch_size=16, pool=2, steps=3, test_prompts=20, ns=[4],
                          kernels=["relu"], activations=["exp", "softmax"]),
    "cheng.figure2": dict(seeds=2, batch_size=16, pool=2, steps=3, test_prompts=20, depths=[1, 2]),
    "cheng.figure3": dict(seeds=2, batch_size=16, pool=2, steps=4, test_prompts=20, trace_every=2,
                          pairs=[["exp", "softmax"], ["relu", "linear"]]),
    "cheng.figure4": dict(seeds=2, batch_size=16, pool=2, steps=3, test_prompts=20, depths=[1]),
    "chen.train": dict(d_model=16, heads=[1, 2], layers=[2], noise_stds=[0.1], steps=3, prune_steps=2,
                       eval_prompts=16),
    "chen.decoder": dict(d_model=16, layers=[1], noise_stds=[0.1], steps=3, eval_prompts=16),
    "chen.figure2c": dict(tasks=50, max_steps=100, noise_stds=[0.1], correlations=[0.2]),
    "chen.rates": dict(ns=[10, 40], tasks=20, max_steps=100, lasso_iters=10),
    "chen.baselines": dict(noise_stds=[0.1], ns=[5, 10], tasks=20, lasso_iters=10),
    "synthesis.compare": dict(ns=[5, 20], eval_prompts=20, d_model=16, layers=1, heads=2,
                              steps={"lsa": 2, "softmax": 2, "multihead": 2, "kernel": 2}),
}


def test_every_recipe_has_a_smoke_config():
    assert {r.name for r in list_recipes()} == set(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_paper_config_runs(name, tmp_path):
    result = run(name, "paper", device="cpu", out=tmp_path / "r", **TINY[name])
    assert result.scale == "paper" and result.metrics
    assert (tmp_path / "r" / "result.json").exists()


# the claims of committed paper results read these functions: they must accept a paper result
CLAIM_VALUES = {"collins.figure1": "figure1_values", "collins.figure3": "figure3_values",
                "collins.figure4": "figure4_values", "collins.figure9": "figure9_values"}


@pytest.mark.parametrize("name", sorted(CLAIM_VALUES))
def test_claim_values_read_a_paper_result(name, tmp_path):
    from icl_core.recipes import collins
    result = run(name, "paper", device="cpu", out=tmp_path / "r", **TINY[name])
    values = getattr(collins, CLAIM_VALUES[name])(result, "paper_")
    assert values and all(k.startswith("paper_fig") for k in values)
