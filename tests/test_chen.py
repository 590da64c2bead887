"""Chen, Zhao, Zou: Algorithm 1, the exact construction (Propositions 4.1 / 4.2), GD in
closed form, Lasso, head masking / pruning / probes, and the recipes' model round trip."""
import re

import numpy as np
import pytest
import torch

from icl_core.baselines import lasso_weights
from icl_core.head_analysis import (dominance, entropy, head_importance, head_weights,
                                    layer_probes, masked_head, p_probing, prune_to_top_heads,
                                    sort_and_average)
from icl_core.models import MultiHeadLinearTransformer, Transformer
from icl_core.recipes import run
from icl_core.recipes.chen import fig1c_gap
from icl_core.head_analysis import load_models
from icl_core.results import Result
from icl_core.tasks import SparseLinearRegression
from icl_core.theory import chen as T
from icl_core.claims import VERDICTS

MODIFIED, INCONCLUSIVE, DIFFERS, NOT_RUN = VERDICTS[2], VERDICTS[3], VERDICTS[4], VERDICTS[5]  # none typed here


def prompts(B=64, n=10, q=3, d=8, s=2, noise=0.1, seed=0, **kw):
    p = SparseLinearRegression(d, s, noise, **kw).sample(B, n + q, n_context=n, seed=seed)
    return p, p.x.double(), p.y.double()


def test_preprocess_matches_definition_and_ignores_query_labels():
    p, x, y = prompts()
    r = torch.stack([(x[b, :10] * y[b, :10, None]).sum(0) / 10 for b in range(len(x))])
    assert torch.allclose(T.preprocess(x, y, 10), x * r[:, None], atol=1e-14)
    y2 = y.clone(); y2[:, 10:] = 123.0
    assert torch.equal(T.preprocess(x, y2, 10), T.preprocess(x, y, 10))


@pytest.mark.parametrize("bad", [
    lambda x, y: T.preprocess(x[0], y, 10),           # x not 3-d
    lambda x, y: T.preprocess(x, y[:, :5], 10),       # y shape mismatch
    lambda x, y: T.preprocess(x, y, 0),               # n_context < 1
    lambda x, y: T.preprocess(x, y, 14),              # n_context > n + q
    lambda x, y: T.constructed_transformer(8, -1, 0.1),
    lambda x, y: T.constructed_transformer(8, 2, 0.0),
    lambda x, y: T.constructed_transformer(0, 2, 0.1),
])
def test_bad_arguments_raise_value_error(bad):
    _, x, y = prompts()
    with pytest.raises(ValueError):
        bad(x, y)


@pytest.mark.parametrize("d,t,n_context", [(8, 0, None), (8, 3, None), (16, 5, None), (8, 4, 10)])
def test_constructed_transformer_is_preprocess_then_gd(d, t, n_context):
    _, x, y = prompts(d=d, s=3)
    model = T.constructed_transformer(d, t, 0.05, n_context=n_context)
    H = model.hidden_states(x, y, 10)
    assert (H[1][..., :d] - T.preprocess(x, y, 10)).abs().max() < 1e-10       # Prop. 4.1
    assert (H[1][:, :10, d] - y[:, :10]).abs().max() < 1e-12
    _, u = T.pre_gd_weights(x, y, 10, 0.05, t)
    for layer in range(t + 1):                                                # Prop. 4.2, sign
        pred = -H[1 + layer][:, 10:, d]
        assert (pred - torch.einsum("bqd,bd->bq", x[:, 10:], u[layer])).abs().max() < 1e-10
    assert (model(x, y, 10) - torch.einsum("bqd,bd->bq", x[:, 10:], u[t])).abs().max() < 1e-10
    assert model.heads == [d] + [1] * t


def test_gd_closed_form_and_preconditioned_view():
    _, x, y = prompts()
    X, Y = x[:, :10], y[:, :10]
    assert (T.gd_path(X, Y, 0.07, 30) - T.gd_iterative(X, Y, 0.07, 30)).abs().max() < 1e-10
    assert torch.equal(T.gd_path(X, Y, 0.07, [0])[0], torch.zeros(64, 8, dtype=torch.float64))
    _, u = T.pre_gd_weights(x, y, 10, 0.05, 8)
    P = T.preconditioned_gd_path(X, Y, T.correlations(x, y, 10) ** 2, 0.05, 8)
    assert torch.allclose(P, u, rtol=1e-9, atol=1e-12)        # eigendecomposition vs recursion


def test_gd_closed_form_with_features_wider_than_the_examples():
    """D > n (a trained model's hidden states): the n x n dual form gives GD's iterates."""
    g = torch.Generator().manual_seed(3)
    X, Y = torch.randn(16, 6, 40, generator=g, dtype=torch.float64), torch.randn(16, 6, generator=g, dtype=torch.float64)
    assert (T.gd_path(X, Y, 0.05, 25) - T.gd_iterative(X, Y, 0.05, 25)).abs().max() < 1e-10
    lrs = torch.linspace(0.01, 0.08, 16, dtype=torch.float64)               # one step size per prompt
    each = torch.cat([T.gd_iterative(X[b:b + 1], Y[b:b + 1], float(lrs[b]), 25) for b in range(16)], 1)
    assert (T.gd_path(X, Y, lrs, 25) - each).abs().max() < 1e-10
    assert torch.equal(T.gd_path(X, Y, 0.05, [0])[0], torch.zeros(16, 40, dtype=torch.float64))
    assert not torch.isfinite(T.gd_path(X, Y, 10.0, [200])).all()     # a diverging step size stays visible


def test_excess_risk_and_ols_formula():
    w, u = torch.randn(5, 4), torch.randn(5, 4)
    cov = torch.eye(4) + 0.3 * torch.ones(4, 4)
    assert torch.allclose(T.excess_risk(u, w), ((u - w) ** 2).sum(1).double())
    assert torch.allclose(T.excess_risk(u, w, cov), torch.einsum("bi,ij,bj->b", (u - w).double(), cov.double(), (u - w).double()))
    assert T.ols_expected_risk(16, 16, 0.5) == float("inf")
    assert T.ols_expected_risk(16, 27, 0.5) == pytest.approx(0.25 * 16 / 10)
    assert T.ols_expected_risk(16, 8, 0.5, 1.0) == pytest.approx(0.5 + 0.25 * 8 / 7)


def test_lasso_satisfies_kkt():
    _, x, y = prompts(B=32, n=12, q=1)
    X, Y = x[:, :12], y[:, :12]
    for alpha in (0.3, 0.03):
        w = lasso_weights(X, Y, alpha, iters=3000)
        g = torch.einsum("bnd,bn->bd", X, Y - torch.einsum("bnd,bd->bn", X, w)) / 12
        assert (g.abs() - alpha).max() < 1e-6                                # |grad| <= alpha
        on = w.abs() > 1e-8
        assert (g[on] - alpha * w[on].sign()).abs().max() < 1e-6              # = alpha sign(w)
    with pytest.raises(ValueError, match="alpha"):
        lasso_weights(X, Y, 0.0)


def test_masking_the_last_gd_layer_removes_one_step():
    p = SparseLinearRegression(8, 2, 0.1).sample(500, 11, n_context=10, seed=3)
    three, two = T.constructed_transformer(8, 3, 0.02), T.constructed_transformer(8, 2, 0.02)
    with masked_head(three, 3, 0):
        assert torch.allclose(three(p.x, p.y, 10), two(p.x, p.y, 10), atol=1e-12)
    assert three.head_masks[3][0] == 1                                        # restored
    delta, base = head_importance(three, p)
    assert delta.shape == (4, 8) and np.isnan(delta[1:, 1:]).all()
    with torch.no_grad():
        err_two = float(((two(p.x, p.y, 10)[:, 0] - p.y[:, 10].double()) ** 2).mean())
    assert delta[3, 0] == pytest.approx(err_two - base, abs=1e-12)


def test_head_weight_summaries():
    delta = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 3.0, 1.0, 0.0]])
    W = head_weights(delta)
    assert np.allclose(W.sum(1), 1) and np.allclose(W[0], 0.25) and W[1, 1] == 0.75
    assert np.allclose(dominance(W), [0.25, 0.75])
    assert np.allclose(entropy(W)[0], 1.0) and entropy(W)[1] < 0.5
    avg = sort_and_average([W, W[:, ::-1]])
    assert np.allclose(avg[1], [0.75, 0.25, 0, 0])


def test_transformer_head_mask_prune_and_state_dict():
    torch.manual_seed(0)
    m = Transformer(8, d_model=16, n_layers=3, n_heads=4, norm="post", layout="stacked")
    p = SparseLinearRegression(8, 2, 0.1).sample(32, 11, n_context=10, seed=1)
    full = m.predict(p)
    with masked_head(m, 1, 2):
        assert not torch.allclose(m.predict(p), full)
    assert torch.allclose(m.predict(p), full)
    assert torch.allclose(m.hidden_states(p.x, p.y, 10)[-1][:, 10:] @ m.read_out.weight[0] + m.read_out.bias,
                          full, atol=1e-6)
    kept = prune_to_top_heads(m, np.array([[1, 2, 3, 4], [0.1, 0.5, 0.2, 0.2], [0.7, 0.1, 0.1, 0.1]]))
    assert kept == [1, 0] and m.head_masks[0].tolist() == [1, 1, 1, 1]
    assert m.head_masks[1].tolist() == [0, 1, 0, 0] and m.head_masks[2].tolist() == [1, 0, 0, 0]
    m2 = Transformer(8, d_model=16, n_layers=3, n_heads=4, norm="post", layout="stacked")
    m2.load_state_dict(m.state_dict())
    assert m2.head_masks[1].tolist() == [0, 1, 0, 0]
    assert torch.allclose(m2.predict(p), m.predict(p))


def test_layer_probes_and_p_probing_sanity():
    torch.manual_seed(0)
    m = Transformer(8, d_model=16, n_layers=2, n_heads=2, norm="post", layout="stacked")
    task = SparseLinearRegression(8, 2, 0.1)
    train, test = task.sample(4000, 11, n_context=10, seed=1), task.sample(4000, 11, n_context=10, seed=2)
    risks = layer_probes(m, train, test)
    assert risks.shape == (3,)
    assert abs(risks[0] - 2.0) < 0.2          # the input token holds x_q only: E||w||^2 = s = 2
    long = task.sample(500, 30, n_context=20, seed=3)
    f, yq = long.x[:, 20:].double(), long.y[:, 20:].double()
    curves, best = p_probing(f, yq, 50, [10.0, 0.1, 0.01], 0.1)
    assert curves.shape == (3, 51) and curves[0, -1] > 1e6 and best in (1, 2)   # lr 10 diverges
    assert curves[1, 0] == pytest.approx(float((yq[:, -1] ** 2).mean()) - 0.01)     # w = 0
    W = T.gd_iterative(f[:, :-1], yq[:, :-1], 0.1, 50)[-1]
    manual = float(((torch.einsum("bd,bd->b", W, f[:, -1]) - yq[:, -1]) ** 2).mean()) - 0.01
    assert curves[1, -1] == pytest.approx(manual, rel=1e-9)
    again, best_again, errors = p_probing(f, yq, 50, [10.0, 0.1, 0.01], 0.1, per_prompt=True)
    assert best_again == best and errors.shape == (51, 500)                     # the selected step size's
    assert np.allclose(errors.mean(1).numpy() - 0.01, curves[best])
    with pytest.raises(ValueError, match="n_context"):
        layer_probes(m, train, task.sample(10, 11, n_context=9, seed=2))


def test_multihead_linear_model_checks_heads():
    with pytest.raises(ValueError, match="divide"):
        MultiHeadLinearTransformer(4, 12, [5])
    with pytest.raises(ValueError, match="heads"):
        MultiHeadLinearTransformer(4, 12, [])


def test_correlated_design_covariance():
    task = SparseLinearRegression(6, 2, 0.0, correlation=0.4)
    x = task.sample(4000, 20, seed=0).x.reshape(-1, 6).double()
    assert (x.T @ x / len(x) - task.covariance()).abs().max() < 0.05
    with pytest.raises(ValueError, match="correlation"):
        SparseLinearRegression(6, 2, correlation=-0.1)


def test_train_recipe_round_trip(tmp_path):
    r = run("chen.train", "ci", device="cpu", out=tmp_path / "r", steps=20, prune_steps=5,
            eval_prompts=64)
    models = load_models(Result.load(tmp_path / "r"))
    assert set(models) == {"h1_L2_s0.1", "h4_L2_s0.1", "h4_L2_s0.1_pruned"}
    assert models["h4_L2_s0.1"].head_masks[1].tolist() == [1, 1, 1, 1]        # saved before pruning
    assert sum(models["h4_L2_s0.1_pruned"].head_masks[1].tolist()) == 1
    assert r.metrics["h4_L2_s0.1_pruned/kept_heads"][0] == models["h4_L2_s0.1_pruned"].head_masks[1].argmax()
    assert len(r.arrays["loss/h1_L2_s0.1"]) == 1                              # 100-step means


def test_head_importance_on_a_decoder_reads_the_right_position():
    """Fig. 9's decoders predict every point; the assessment reads point n_context."""
    from icl_core.head_analysis import query_prediction
    torch.manual_seed(0)
    dec = Transformer(8, d_model=16, n_layers=2, n_heads=4, layout="interleaved")
    p = SparseLinearRegression(8, 2, 0.1).sample(64, 11, n_context=10, seed=1)
    with torch.no_grad():
        full = dec(p.x, p.y, 10)
    assert torch.equal(query_prediction(dec, p), full[:, 10])
    delta, base = head_importance(dec, p)
    assert delta.shape == (2, 4) and np.isfinite(delta).all()
    assert base == pytest.approx(float(((full[:, 10] - p.y[:, 10]) ** 2).mean()))


def test_train_recipe_noise_levels_as_one_ensemble(tmp_path):
    """The paper's protocol: the noise levels of one (h, L) train together; each run equals
    the single-noise-level run (same init, same data)."""
    kw = dict(d_model=16, heads=[2], layers=[1], steps=6, prune_steps=3, eval_prompts=32)
    both = run("chen.train", "ci", device="cpu", noise_stds=[0.0, 0.4], **kw)
    alone = run("chen.train", "ci", device="cpu", noise_stds=[0.4], **kw)
    assert both.metrics["models"] == ["h2_L1_s0", "h2_L1_s0.4", "h2_L1_s0_pruned", "h2_L1_s0.4_pruned"]
    m_both, m_alone = load_models(both), load_models(alone)
    probe = SparseLinearRegression(16, 4, 0.4).sample(64, 13, n_context=12, seed=5)
    for name in ("h2_L1_s0.4", "h2_L1_s0.4_pruned"):   # as test_ensembles: vmap reorders float sums
        assert torch.equal(m_both[name].head_masks[0], m_alone[name].head_masks[0])
        assert torch.allclose(m_both[name].predict(probe), m_alone[name].predict(probe), atol=1e-4)
        np.testing.assert_allclose(both.arrays[f"loss/{name}"], alone.arrays[f"loss/{name}"], rtol=1e-4)


def test_bias_variance_path_splits_the_estimate_exactly():
    """With r_hat fixed, GD on X~ is linear in its labels: bias + variance + cross = total,
    and with no noise the variance is 0 and the bias is the whole excess risk."""
    from icl_core.theory import chen as T
    g = torch.Generator().manual_seed(0)
    X = torch.randn(8, 20, 6, generator=g, dtype=torch.float64)
    w = torch.zeros(8, 6, dtype=torch.float64)
    w[:, :2] = 0.7
    eps = 0.3 * torch.randn(8, 20, generator=g, dtype=torch.float64)
    steps = [0, 1, 5, 50]
    bv = T.bias_variance_path(X, w, eps, 0.05, steps)
    assert bv["bias"].shape == (4, 8) and torch.all(bv["variance"][0] == 0)
    r = (X.transpose(1, 2) @ (X @ w.unsqueeze(-1) + eps.unsqueeze(-1))).squeeze(-1) / 20
    u = T.gd_path(X * r.unsqueeze(1), (X @ w.unsqueeze(-1)).squeeze(-1) + eps, 0.05, steps) * r
    torch.testing.assert_close(bv["total"], T.excess_risk(u, w))
    quiet = T.bias_variance_path(X, w, torch.zeros_like(eps), 0.05, steps)
    torch.testing.assert_close(quiet["variance"], torch.zeros(4, 8, dtype=torch.float64))
    torch.testing.assert_close(quiet["bias"], quiet["total"])
    assert torch.all(quiet["bias"][1:] <= quiet["bias"][:-1] + 1e-12)             # GD on noiseless labels


def _pieces_values(step=120_000, risks=(1.04, 1.13), ridge=1.545, dominance_=(0.25, 0.6, 0.7, 0.8),
                   lows=(1.6, 2.0), se=0.05, seed_risks=None, seed_steps=None, seed_lows=None, seed_gaps=None,
                   seed_run_steps=None):
    """Records as the page makes them from the paper-scale pieces (``paper_pieces_values``,
    ``pieces_records``); ``seed_risks``: (h = 1 risks, h = 4 risks), one per seed, when more than
    one seed is trained; ``seed_steps``: each seed's step (default, or None: ``step``); ``seed_lows``:
    (h = 4 lowest P-probe points, h = 1 ones), one per seed (default: every seed at ``lows``);
    ``seed_gaps``: each seed's Fig. 1c layer gap (default: every seed at ``dominance_``'s);
    ``seed_run_steps``: each seed's (h = 1 run's, h = 4 run's) steps, where they differ (the
    seed's step is then the lesser)."""
    curve = lambda lo: [3.0] + [lo] * 100
    W = np.array([[d] + [(1 - d) / 3] * 3 for d in dominance_])
    n_seeds = len(seed_risks[0]) if seed_risks else 0
    steps = [step if n is None else n for n in (seed_steps or [None] * n_seeds)]
    run_steps = seed_run_steps or [(n, n) for n in steps]
    gaps = seed_gaps or [fig1c_gap(dominance(W), [se] * 4)[1]] * n_seeds
    return {"paper_pieces_step": step, "paper_pieces_steps_total": 320_000,
            "paper_pieces_risk": {"h1": risks[0], "h4": risks[1]}, "paper_pieces_ridge": ridge,
            "pieces_analysis_step": {"h1": step, "h4": step}, "pieces_fig1c_weights": W.tolist(),
            "pieces_fig1c_dominance": dominance(W).tolist(), "pieces_fig1c_entropy": entropy(W).tolist(),
            "pieces_fig1c_dominance_se": [se] * 4,
            "pieces_fig1c_layer1_least_dominated": bool(dominance(W)[0] < dominance(W)[1:].min()),
            "pieces_pprobe": {"h=1": curve(lows[1]), "h=4": curve(lows[0]), "raw x": curve(1.5),
                              "Algorithm 1 (ideal)": curve(0.1)},
            "pieces_pprobe_se": {"h=1": se, "h=4": se, "raw x": se, "Algorithm 1 (ideal)": se},
            **({"paper_pieces_seeds": [{"seed": k, "step": min(ns), "steps": {"h1": ns[0], "h4": ns[1]},
                                        "h1": r1, "h4": r4, "ridge": ridge,
                                        "pprobe_h1": l1, "pprobe_h4": l4, "pprobe_mean_h1": np.mean(curve(l1)),
                                        "pprobe_mean_h4": np.mean(curve(l4)), "fig1c_gap": g,
                                        "fig1c_gap_se": se * np.sqrt(2)} for k, (r1, r4, ns, l4, l1, g)
                                       in enumerate(zip(*seed_risks, run_steps,
                                                        *(seed_lows or [[x] * n_seeds for x in lows]), gaps))]}
               if seed_risks else {})}


@pytest.mark.parametrize("claim, holds, fails", [
    ("chen.fig1b_paper", dict(risks=(1.13, 1.04), seed_risks=((1.13, 1.12), (1.04, 1.05))),
     dict(risks=(1.04, 1.13), seed_risks=((1.04, 1.05), (1.13, 1.12)))),
    ("chen.fig1c_paper", dict(seed_risks=((1.04, 1.05), (1.13, 1.12)), seed_steps=[None, 320_000]),
     dict(seed_risks=((1.04, 1.05), (1.13, 1.12)), seed_steps=[None, 320_000], dominance_=(0.9, 0.6, 0.7, 0.8))),
    ("chen.fig2b_paper", dict(seed_risks=((1.04, 1.05), (1.13, 1.12)), seed_lows=((1.6, 1.65), (2.0, 2.02))),
     dict(seed_risks=((1.04, 1.05), (1.13, 1.12)), seed_lows=((2.0, 2.02), (1.6, 1.65))))])
def test_pieces_claims_confirm_early_but_refute_only_at_the_end(claim, holds, fails):
    from icl_core.claims import all_claims, evaluate
    c = all_claims()[claim]
    verdict = lambda **kw: evaluate(c, _pieces_values(**kw), "paper")["verdict"]
    assert verdict(**holds) == MODIFIED                 # unfinished, and the pattern already there
    assert verdict(**fails) == INCONCLUSIVE             # unfinished: it may still form
    assert verdict(step=320_000, **fails) == DIFFERS    # finished, and not there
    assert verdict(ridge=1.2, **holds) == INCONCLUSIVE  # not clearly below ridge (0.9 x 1.2)
    row = evaluate(c, _pieces_values(**fails), "paper")
    assert "only the last step can refute it" in row["gate"]


@pytest.mark.parametrize("claim, tie", [("chen.fig2b_paper", dict(lows=(1.9, 2.0))),
                                        ("chen.fig2b_paper", dict(seed_risks=((1.04, 1.05), (1.13, 1.12)),
                                                                  seed_lows=((1.6, 2.1), (2.0, 1.9)))),
                                        ("chen.fig1c_paper", dict(dominance_=(0.62, 0.6, 0.7, 0.8)))])
def test_pieces_tie_within_sampling_error_is_inconclusive_even_when_finished(claim, tie):
    from icl_core.claims import all_claims, evaluate
    row = evaluate(all_claims()[claim], _pieces_values(step=320_000, se=0.1, **tie), "paper")
    assert row["verdict"] == INCONCLUSIVE and "within 2" in row["gate"]


def test_fig1b_pieces_differ_only_against_the_seed_spread():
    from icl_core.claims import all_claims, evaluate
    c = all_claims()["chen.fig1b_paper"]
    for risks in ((1.04, 1.13), (1.13, 1.04)):           # one seed: neither refuted nor confirmed
        one = evaluate(c, _pieces_values(step=320_000, risks=risks), "paper")
        assert one["verdict"] == INCONCLUSIVE and "a second seed past the plateau is needed" in one["gate"]
    spread = evaluate(c, _pieces_values(step=320_000, seed_risks=((1.04, 1.20), (1.13, 1.05))), "paper")
    assert spread["verdict"] == INCONCLUSIVE and "within 2 SE over seeds" in spread["gate"]
    apart = evaluate(c, _pieces_values(step=320_000, seed_risks=((1.13, 1.12), (1.04, 1.05))), "paper")
    assert apart["verdict"] == MODIFIED and "mean over 2 seeds" in apart["measured"]
    plateau = evaluate(c, _pieces_values(step=320_000, seed_risks=((1.13, 1.52), (1.04, 1.50)),
                                         seed_steps=[320_000, 200_000]), "paper")
    assert plateau["verdict"] == INCONCLUSIVE and "seed 1 at step 200,000" in plateau["gate"]   # a second seed still on it
    fails = dict(seed_risks=((1.04, 1.05), (1.13, 1.12)))           # the means show the opposite, beyond 2 SE
    early = evaluate(c, _pieces_values(step=320_000, seed_steps=[320_000, 40_000], **fails), "paper")
    assert early["verdict"] == INCONCLUSIVE and "seed 1 at 40,000 of 320,000" in early["gate"]
    assert evaluate(c, _pieces_values(step=100_000, **fails), "paper")["verdict"] == INCONCLUSIVE   # seed 0 unfinished
    assert evaluate(c, _pieces_values(step=320_000, **fails), "paper")["verdict"] == DIFFERS


def test_fig1c_pieces_are_decided_against_the_seed_spread_of_finished_h4_models():
    from icl_core.claims import all_claims, evaluate
    c = all_claims()["chen.fig1c_paper"]
    run = lambda **kw: evaluate(c, _pieces_values(step=320_000, **kw), "paper")
    late = dict(dominance_=(0.9, 0.6, 0.7, 0.8))                     # layer 1 the most dominated, 15 bootstrap SE
    one = run(**late)                                                 # one seed: neither refuted nor confirmed
    assert one["verdict"] == INCONCLUSIVE and "a second seed's h = 4 model, finished past the plateau" in one["gate"]
    assert run()["verdict"] == INCONCLUSIVE                            # the paper's pattern, one seed
    two = dict(seed_risks=((0.9, 1.40), (0.8, 0.8)), **late)          # seed 1's h = 1 on the plateau: set aside for
    assert run(**two)["verdict"] == DIFFERS                           # Fig. 1b, but Fig. 1c reads its h = 4 model
    assert "mean over 2 seeds -0.300" in run(**two)["measured"]
    plateau = dict(seed_risks=((0.9, 0.8), (0.8, 1.40)), **late)      # seed 1's h = 4 model on the plateau
    assert "a second seed's h = 4 model" in run(**plateau)["gate"]
    unfinished = run(seed_steps=[None, 200_000], **two)                # seed 1's h = 4 run unfinished: not counted
    assert unfinished["verdict"] == INCONCLUSIVE and "a second seed's h = 4 model" in unfinished["gate"]
    split = run(seed_gaps=[-0.3, 0.25], **two)                        # the seeds disagree: within their spread
    assert split["verdict"] == INCONCLUSIVE and "within 2 SE over seeds" in split["gate"]
    both = run(seed_gaps=[0.35, 0.3], seed_risks=((0.9, 1.40), (0.8, 0.8)))
    assert both["verdict"] == MODIFIED and "seed 1 +0.300" in both["gate"]


def test_fig2b_pieces_like_fig1b_compare_two_models_against_the_seed_spread():
    from icl_core.claims import all_claims, evaluate
    c = all_claims()["chen.fig2b_paper"]
    for lows in ((1.6, 2.0), (2.0, 1.6)):                # one seed, the gap 8 SE over prompts: either way undecided
        one = evaluate(c, _pieces_values(step=320_000, lows=lows, se=0.025), "paper")
        assert one["verdict"] == INCONCLUSIVE and "beyond 2 SE over prompts" in one["gate"]
        assert "a second seed past the plateau is needed" in one["gate"]
    two = dict(seed_risks=((1.04, 1.05), (1.13, 1.12)))
    apart = evaluate(c, _pieces_values(step=320_000, seed_lows=((1.6, 1.65), (2.0, 2.02)), **two), "paper")
    assert apart["verdict"] == MODIFIED and "mean over 2 seeds" in apart["measured"] and "beyond" in apart["gate"]
    # seed 0 alone would confirm (h = 4 lower by 0.4) but seed 1 shows the opposite: the seed spread swamps it
    spread = evaluate(c, _pieces_values(step=320_000, seed_lows=((1.6, 2.1), (2.0, 1.9)), **two), "paper")
    assert spread["verdict"] == INCONCLUSIVE and "within 2 SE over seeds" in spread["gate"]
    fails = evaluate(c, _pieces_values(step=320_000, seed_lows=((2.0, 2.02), (1.6, 1.65)), **two), "paper")
    assert fails["verdict"] == DIFFERS
    plateau = evaluate(c, _pieces_values(step=320_000, seed_risks=((1.13, 1.52), (1.04, 1.50)),
                                         seed_lows=((1.6, 1.65), (2.0, 2.02)), seed_steps=[320_000, 200_000]), "paper")
    assert plateau["verdict"] == INCONCLUSIVE and "seed 1 at step 200,000" in plateau["gate"]


@pytest.mark.parametrize("claim", ["chen.fig1b_paper", "chen.fig2b_paper"])
def test_a_seed_that_finished_on_the_plateau_is_set_aside_and_named(claim):
    """Seed 1's h = 1 model ends the paper's budget on the plateau (1.52 against 0.9 x 1.545): the
    claim is decided over the other seeds, and the gate says which seed was set aside and why."""
    from icl_core.claims import all_claims, evaluate
    c = all_claims()[claim]
    kw = dict(seed_lows=((1.6, 2.5, 1.65), (2.0, 1.5, 2.02)))        # seed 1's own P-probe gap the other way
    two = evaluate(c, _pieces_values(step=320_000, seed_risks=((1.13, 1.52), (1.04, 1.05)),
                                     seed_lows=((1.6, 2.5), (2.0, 1.5))), "paper")
    assert two["verdict"] == INCONCLUSIVE and "a second seed past the plateau is needed" in two["gate"]
    assert "seed 1 set aside: finished at 320,000 steps with h1 on the ridge plateau (1.520" in two["gate"]
    assert "gap h = 1 minus h = 4 +0.470" in two["gate"]
    # a third seed past the plateau: decided over seeds 0 and 2, seed 1's opposite P-probe gap left out
    three = evaluate(c, _pieces_values(step=320_000, seed_risks=((1.13, 1.52, 1.12), (1.04, 1.05, 1.05)), **kw),
                     "paper")
    assert three["verdict"] == MODIFIED and "mean over 2 seeds" in three["measured"], three
    assert "seed 1 set aside" in three["gate"] and "decided over seeds 0, 2;" in three["gate"]
    # the same seed unfinished is not set aside: it holds the claim at the gate
    early = evaluate(c, _pieces_values(step=320_000, seed_steps=[320_000, 300_000, 320_000],
                                       seed_risks=((1.13, 1.52, 1.12), (1.04, 1.05, 1.05)), **kw), "paper")
    assert early["verdict"] == INCONCLUSIVE and "set aside" not in early["gate"] and "seed 1 at step 300,000" in early["gate"]
    # its h = 1 run finished on the plateau while its h = 4 run goes on: set aside already, named by that run
    h4_on = evaluate(c, _pieces_values(step=320_000, seed_run_steps=[(320_000,) * 2, (320_000, 250_000), (320_000,) * 2],
                                       seed_risks=((1.13, 1.52, 1.12), (1.04, 1.05, 1.05)), **kw), "paper")
    assert h4_on["verdict"] == MODIFIED and "decided over seeds 0, 2;" in h4_on["gate"], h4_on
    assert "seed 1 set aside: finished at 320,000 steps with h1 on the ridge plateau (1.520" in h4_on["gate"]
    # and the other way round: its h = 4 run finished past the plateau, its h = 1 run not finished: not set aside
    h1_on = evaluate(c, _pieces_values(step=320_000, seed_run_steps=[(320_000,) * 2, (250_000, 320_000), (320_000,) * 2],
                                       seed_risks=((1.13, 1.52, 1.12), (1.04, 1.05, 1.05)), **kw), "paper")
    assert h1_on["verdict"] == INCONCLUSIVE and "set aside" not in h1_on["gate"] and "seed 1 at step 250,000" in h1_on["gate"]
    # every seed finished on the plateau: nothing left to decide over
    none = evaluate(c, _pieces_values(step=320_000, ridge=1.1, seed_risks=((1.13, 1.12), (1.04, 1.05)),
                                      seed_lows=((1.6, 1.65), (2.0, 2.02))), "paper")
    assert none["verdict"] == INCONCLUSIVE and "no seed left past the plateau" in none["gate"]


def test_paper_pieces_values_count_a_seed_once_both_its_runs_are_committed():
    from icl_core.recipes.chen import paper_pieces_values

    def state(h, seed, step, risk, ridge=1.5, pprobe=None):
        name = f"h{h}_L4_s0.1" + (f"_seed{seed}" if seed else "")
        return {"step": step, "progress": {"config": {"L": 4, "noise_stds": [0.1], "seed": seed}, "pieces": [
            {"steps_total": 320_000, "metrics": {f"{name}/risk_n10": risk, f"{name}/ridge_n10": ridge,
                                                 **({f"{name}/pprobe": pprobe} if pprobe else {})}}]}}
    zero = {1: state(1, 0, 200, 1.01), 4: state(4, 0, 100, 0.99)}
    v = paper_pieces_values({0: zero, 1: {1: state(1, 1, 50, 1.3, 1.6), 4: None}})
    assert v == {"paper_pieces_step": 100, "paper_pieces_steps_total": 320_000,
                 "paper_pieces_risk": {"h1": 1.01, "h4": 0.99}, "paper_pieces_ridge": 1.5}
    v = paper_pieces_values({0: zero, 1: {1: state(1, 1, 50, 1.3, 1.6), 4: state(4, 1, 70, 1.2, 1.6)}})
    assert v["paper_pieces_seeds"] == [{"seed": 0, "step": 100, "steps": {"h1": 200, "h4": 100},
                                        "h1": 1.01, "h4": 0.99, "ridge": 1.5},
                                       {"seed": 1, "step": 50, "steps": {"h1": 50, "h4": 70},
                                        "h1": 1.3, "h4": 1.2, "ridge": 1.6}]
    assert v["paper_pieces_step"] == 100                        # seed 0's runs: the analysed state
    assert paper_pieces_values({0: {1: None, 4: None}, 1: zero}) == {}
    probed = {1: state(1, 1, 50, 1.3, 1.6, pprobe=[3.0, 2.0, 2.5]), 4: state(4, 1, 70, 1.2, 1.6, pprobe=[3.0, 1.5])}
    v = paper_pieces_values({0: zero, 1: probed})["paper_pieces_seeds"]
    assert "pprobe_h1" not in v[0]                              # seed 0's pieces here carry no P-probing
    assert v[1] == {"seed": 1, "step": 50, "steps": {"h1": 50, "h4": 70}, "h1": 1.3, "h4": 1.2, "ridge": 1.6, "pprobe_h1": 2.0, "pprobe_h4": 1.5,
                    "pprobe_mean_h1": 2.5, "pprobe_mean_h4": 2.25}


def test_pieces_records_read_the_newest_piece_and_need_its_analysis():
    from icl_core.recipes.chen import pieces_records
    cfg = {"L": 4, "noise_stds": [0.1], "seed": 0}
    m4 = {"h4_L4_s0.1/head_delta": [[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0], [1.0, 3.0, 0.0, 0.0], [0.0, 0.0, 2.0, 2.0]],
          "h4_L4_s0.1/dominance_se": [0.01] * 4,
          "h4_L4_s0.1/probes": [4.0, 2.0, 1.5, 1.2, 1.0], "h4_L4_s0.1/pprobe": [3.0, 1.6], "h4_L4_s0.1/pprobe_lr": 0.01,
          "h4_L4_s0.1/pprobe_se": 0.05, "h4_L4_s0.1/pprobe_ref/raw x": {"curve": [3.0, 1.5], "lr": 0.1, "se": 0.04}}
    m1 = {"h1_L4_s0.1/probes": [4.0, 3.0, 2.0, 1.5, 1.1], "h1_L4_s0.1/pprobe": [3.0, 2.0], "h1_L4_s0.1/pprobe_lr": 0.01,
          "h1_L4_s0.1/pprobe_se": 0.05}
    state = lambda m, step: {"progress": {"config": cfg, "pieces": [{"to_step": 10, "metrics": {}},
                                                                     {"to_step": step, "metrics": m}]}}
    v = pieces_records({1: state(m1, 200), 4: state(m4, 100)})
    assert v["pieces_analysis_step"] == {"h1": 200, "h4": 100}
    assert np.allclose(v["pieces_fig1c_weights"][1], [1, 0, 0, 0]) and v["pieces_fig1c_layer1_least_dominated"] is True
    assert set(v["pieces_pprobe"]) == {"h=1", "h=4", "raw x"} and v["pieces_pprobe_lr"]["raw x"] == 0.1
    assert pieces_records({1: state({}, 200), 4: state(m4, 100)}) == {}     # a piece from before the analysis


def test_dominance_standard_error_shrinks_with_prompts_and_vanishes_without_spread():
    from icl_core.head_analysis import dominance_se
    g = np.random.default_rng(0)
    small, large = (np.abs(g.normal(1.0, 0.5, size=(2, 3, B))) for B in (200, 5000))
    assert dominance_se(large).max() < 0.5 * dominance_se(small).min()          # about 1/sqrt(B)
    assert np.allclose(dominance_se(np.ones((2, 3, 50))), 0.0)
    m = Transformer(8, d_model=16, n_layers=2, n_heads=2, norm="post", layout="stacked")
    p = SparseLinearRegression(8, 2, 0.1).sample(64, 11, n_context=10, seed=0)
    delta, base, samples = head_importance(m, p, per_prompt=True)
    assert samples.shape == (2, 2, 64) and np.allclose(samples.mean(2), delta)
    assert np.allclose(head_importance(m, p)[0], delta)


def _fig1d_values(pruned_last=(0.75, 0.74), steps=(60_000, 60_000), seed_steps=None, seeds=(0, 1), **kw):
    """Fig. 1b's two-seed records (both past the plateau) with Fig. 1d's per seed: original h = 4
    probes ending at 0.73, h = 1 at 0.88, the pruned model's ending at ``pruned_last`` (its earlier
    blocks halfway between the two)."""
    h4, h1 = [4.0, 2.7, 1.9, 1.4, 0.73], [4.0, 3.8, 2.4, 1.6, 0.88]
    v = _pieces_values(step=320_000, risks=(0.9, 0.75), seed_risks=((0.9, 0.95), (0.75, 0.77)),
                       seed_steps=seed_steps, **kw)
    v["pieces_fig1d_seeds"] = [{"seed": k, "step": n, "steps_total": 60_000, "h4": h4, "h1": h1,
                                "pruned": [a + 0.1 * (b - a) for a, b in zip(h4[:-1], h1[:-1])] + [p]}
                               for k, p, n in zip(seeds, pruned_last, steps)]
    return v


def test_fig1d_pieces_compare_pruned_original_and_one_head_at_every_block_over_seeds():
    from icl_core.claims import all_claims, evaluate
    c = all_claims()["chen.fig1d_paper"]
    run = lambda v: evaluate(c, v, "paper")
    assert run(_pieces_values())["verdict"] == NOT_RUN                                 # no pruned run committed
    assert run(_fig1d_values())["verdict"] == MODIFIED                                 # close to the original
    far = run(_fig1d_values(pruned_last=(0.86, 0.87)))                                 # at the 1-head model's level
    assert far["verdict"] == DIFFERS and "margin at block 4" in far["gate"]
    assert run(_fig1d_values(pruned_last=(0.86, 0.87), steps=(30_000, 60_000)))["verdict"] == INCONCLUSIVE
    # a claim of two parts fails with one: the margin below zero beyond the spread, the 1-head part within it
    one_part = run(_fig1d_values(pruned_last=(0.85, 0.91)))
    assert one_part["verdict"] == DIFFERS and "the margin below zero beyond the seed spread" in one_part["gate"]
    assert re.search(r"h = 1 minus pruned at block 4, mean over 2 seeds [+-]0\.000 \(within", one_part["gate"])
    assert run(_fig1d_values(pruned_last=(0.85, 0.91), steps=(30_000, 60_000)))["verdict"] == INCONCLUSIVE
    loose = run(_fig1d_values(pruned_last=(0.74, 0.88)))                               # failing, within the spread
    assert loose["verdict"] == INCONCLUSIVE and "refutes" not in loose["gate"]
    early = run(_fig1d_values(steps=(30_000, 60_000)))                                 # the pattern already there
    assert early["verdict"] == MODIFIED and "the check already holds" in early["gate"]
    one = _fig1d_values()
    one["pieces_fig1d_seeds"] = one["pieces_fig1d_seeds"][:1]
    assert run(one)["verdict"] == INCONCLUSIVE and "a second seed's pruned run is needed" in run(one)["gate"]
    split = run(_fig1d_values(pruned_last=(0.74, 0.86)))                               # the seeds disagree
    assert split["verdict"] == INCONCLUSIVE and "within 2 SE over seeds" in split["gate"]
    aside = _fig1d_values()                                                             # seed 1 on the plateau at the end
    aside["paper_pieces_seeds"][1]["h1"] = 1.45
    assert "a second seed's pruned run is needed" in run(aside)["gate"]
    src = run(_fig1d_values(seed_steps=[None, 200_000]))                               # seed 1's sources unfinished
    assert "seed 1: source runs unfinished" in src["gate"]
    plateau = _fig1d_values(seed_steps=[None, 200_000])                                # and its 1-head model on the plateau
    plateau["paper_pieces_seeds"][1]["h1"] = 1.45
    assert run(plateau)["verdict"] == INCONCLUSIVE and "seed 1: a source model still on the ridge" in run(plateau)["gate"]
