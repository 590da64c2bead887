"""Cheng et al. Figure 1: the matched activation best on panels (a), (b), and softmax below exp
on exp data for n in {6, ..., 14} (Fig. 1c), each decided against the seed spread."""
import json

import matplotlib
import numpy as np
import pytest

from icl_core.claims import HOLDS, VERDICTS, all_claims, evaluate
from icl_core.recipes import cheng, config

matplotlib.use("Agg")
INCONCLUSIVE, DIFFERS = VERDICTS[3], VERDICTS[4]          # no verdict typed here
NS = (2, 4, 6, 8, 10, 12, 14)


def _values(spread=0.01, shift=0.3, ns=NS):
    """Synthetic mid values: the matched activation lower by ``shift`` on linear and relu data
    at every n, softmax lower than exp on exp data for every n."""
    rng = np.random.default_rng(0)
    seeds = lambda mean: [list(mean + spread * rng.standard_normal(3)) for _ in ns]
    s = {}
    for k, base in (("linear", -3.0), ("relu", -1.0), ("exp", -0.3)):
        for a in ("linear", "relu", "exp"):
            s[f"{k}/{a}"] = seeds(base if a == k else base + shift)
        s[f"{k}/softmax"] = seeds(base - (shift if k == "exp" else -shift))
    return {"mid_fig1_ns": list(ns), "mid_fig1_seeds": s, "mid_fig1_bayes": {},
            "mid_fig1_tenths": {f"{k} n={n}": [1.0, 1.0] for k in s for n in ns}}


@pytest.mark.parametrize("cid", ["fig1_match_mid", "fig1c_mid"])
def test_figure1_claims_hold_on_a_run_that_shows_them(cid):
    row = evaluate(all_claims()[f"cheng.{cid}"], _values(), "mid")
    assert row["verdict"] in HOLDS, row


def test_figure1_claims_tie_within_the_spread_and_differ_beyond_it():
    claims = all_claims()
    assert evaluate(claims["cheng.fig1_match_mid"], _values(spread=1.0), "mid")["verdict"] == INCONCLUSIVE
    v = _values()
    v["mid_fig1_seeds"]["relu/exp"] = [list(np.array(x) - 0.6) for x in v["mid_fig1_seeds"]["relu/exp"]]
    assert evaluate(claims["cheng.fig1_match_mid"], v, "mid")["verdict"] == DIFFERS
    v = _values()
    v["mid_fig1_seeds"]["exp/softmax"][-1] = list(np.array(v["mid_fig1_seeds"]["exp/exp"][-1]) + 0.4)
    assert evaluate(claims["cheng.fig1c_mid"], v, "mid")["verdict"] == DIFFERS
    assert evaluate(claims["cheng.fig1c_mid"], _values(ns=(2, 4)), "mid")["verdict"] == INCONCLUSIVE
    v = _values()
    v["mid_fig1_tenths"]["exp/exp n=14"] = [1.0, 0.5]                    # exp data still training
    assert evaluate(claims["cheng.fig1c_mid"], v, "mid")["verdict"] == INCONCLUSIVE
    assert evaluate(claims["cheng.fig1_match_mid"], v, "mid")["verdict"] in HOLDS   # panels (a), (b) unaffected


def test_figure1_values_read_a_run_and_its_figure_draws(tmp_path):
    cfg = {**config("cheng.figure1", "ci"), "seeds": 2, "batch_size": 16, "pool": 0, "steps": 3,
           "test_prompts": 20, "ns": [2, 6], "checkpoint_dir": str(tmp_path)}
    r = cheng.figure1_recipe(cfg, "cpu")
    v = cheng.figure1_values(r, "mid_")
    assert v["mid_fig1_ns"] == [2, 6] and len(v["mid_fig1_seeds"]) == 12
    assert np.shape(v["mid_fig1_seeds"]["relu/exp"]) == (2, 2) and len(v["mid_fig1_tenths"]) == 24
    assert r.metrics["pieces_seconds"] is not None and len(list(tmp_path.glob("t1-*.json"))) == 24
    from icl_core.figures import cheng as figures
    assert [ax.get_title()[:3] for ax in figures.figure1(r).axes] == ["(a)", "(b)", "(c)"]


def test_a_leader_still_improving_does_not_hold_the_claim_open_but_a_run_behind_it_does():
    claims = all_claims()
    v = _values()
    for n in NS:                     # linear on linear data still falls (towards a Bayes loss of 0), already ahead
        v["mid_fig1_tenths"][f"linear/linear n={n}"] = [1.0, 0.7]
        v["mid_fig1_tenths"][f"linear/softmax n={n}"] = [1.0, 0.5]        # not read by the claim
    row = evaluate(claims["cheng.fig1_match_mid"], v, "mid")
    assert row["verdict"] in HOLDS and "already ahead" in row["gate"], row
    v["mid_fig1_tenths"]["linear/relu n=14"] = [1.0, 0.7]               # a run behind it still improving
    assert evaluate(claims["cheng.fig1_match_mid"], v, "mid")["verdict"] == INCONCLUSIVE
    tied = _values()
    tied["mid_fig1_seeds"]["linear/linear"][0] = tied["mid_fig1_seeds"]["linear/relu"][0]   # n = 2: a tie
    tied["mid_fig1_tenths"]["linear/linear n=2"] = [1.0, 0.7]           # the tied leader is not exempt
    row = evaluate(claims["cheng.fig1_match_mid"], tied, "mid")
    assert row["verdict"] == INCONCLUSIVE and "linear/linear n=2" in row["gate"], row
    behind = _values()
    behind["mid_fig1_seeds"]["exp/softmax"][-1] = list(np.array(behind["mid_fig1_seeds"]["exp/exp"][-1]) + 0.4)
    behind["mid_fig1_tenths"]["exp/softmax n=14"] = [1.0, 0.7]          # reversed and still moving: not decided
    assert evaluate(claims["cheng.fig1c_mid"], behind, "mid")["verdict"] == INCONCLUSIVE


def test_the_authors_bandwidth_gives_labels_of_variance_e_to_the_half():
    from icl_core.tasks import GPTask
    for beta, var in ((1.0, np.e), (0.5, np.exp(0.5))):
        p = GPTask(5, "exp", seed=0, beta=beta).sample(4000, 3, seed=1)
        assert abs(float(p.y.double().var()) / var - 1) < 0.05, beta
    with pytest.raises(ValueError, match="beta"):
        GPTask(5, "relu", beta=0.5)


def test_setup_variants_are_their_own_pieces_and_older_pieces_still_match(tmp_path):
    import json
    cfg = {**config("cheng.figure1", "softmax_n"), "seeds": 2, "batch_size": 8, "steps": 3, "test_prompts": 20,
           "activations": ["softmax"], "checkpoint_dir": str(tmp_path)}
    over_n = cheng.figure1_recipe(cfg, "cpu")
    piece = next(tmp_path.glob("t1-*.json"))
    assert json.loads(piece.read_text())["settings"]["softmax_over_n"] is True
    with pytest.raises(ValueError, match="other settings"):         # the same piece without the change
        cheng.figure1_recipe({**cfg, "softmax_over_n": False}, "cpu")
    plain = cheng.figure1_recipe({**cfg, "softmax_over_n": False, "checkpoint_dir": str(tmp_path / "p")}, "cpu")
    assert not np.array_equal(plain.arrays["exp/softmax"], over_n.arrays["exp/softmax"])
    old = next((tmp_path / "p").glob("t1-*.json"))                    # as committed before the keys existed
    saved = json.loads(old.read_text())
    for k in ("exp_beta", "softmax_over_n"):
        del saved["settings"][k]
    old.write_text(json.dumps(saved))
    again = cheng.figure1_recipe({**cfg, "softmax_over_n": False, "checkpoint_dir": str(tmp_path / "p")}, "cpu")
    np.testing.assert_array_equal(again.arrays["exp/softmax"], plain.arrays["exp/softmax"])
    half = cheng.figure1_recipe({**config("cheng.figure1", "bandwidth"), "seeds": 2, "batch_size": 8, "steps": 3,
                                 "test_prompts": 200, "checkpoint_dir": str(tmp_path / "b")}, "cpu")
    assert abs(half.arrays["exp/bayes"][0] - over_n.arrays["exp/bayes"][0]) > 0.05   # another label law, its own Bayes


def test_a_reversal_found_again_in_an_independent_run_decides_figure_1c():
    claim = all_claims()["cheng.fig1c_bigbatch"]

    def run(prefix, ns, n6_gap, spread=0.01, seed=0):
        rng = np.random.default_rng(seed)
        exp = [list(-0.1 * n + spread * rng.standard_normal(3)) for n in ns]
        soft = [list(np.array(e) + (n6_gap if n == 6 else 0.0) + spread * rng.standard_normal(3)) for e, n in zip(exp, ns)]
        return {f"{prefix}fig1_ns": list(ns), f"{prefix}fig1_seeds": {"exp/exp": exp, "exp/softmax": soft},
                f"{prefix}fig1_tenths": {f"exp/{a} n={n}": [1.0, 1.0] for a in ("exp", "softmax") for n in ns}}
    v = run("bigbatch_", (6, 8, 10, 12, 14), 0.05)           # reversed at n = 6, tied elsewhere
    assert evaluate(claim, v, "bigbatch")["verdict"] == INCONCLUSIVE              # alone: could be chance
    again = {**v, **run("seed1_", (6,), 0.05, seed=1)}
    row = evaluate(claim, again, "bigbatch")
    assert row["verdict"] == DIFFERS and "independent" in row["gate"], row
    other = {**v, **run("seed1_", (6,), -0.05, seed=1)}       # the replica not reversed: still open
    assert evaluate(claim, other, "bigbatch")["verdict"] == INCONCLUSIVE
    moving = {**again, "seed1_fig1_tenths": {"exp/exp n=6": [1.0, 0.5], "exp/softmax n=6": [1.0, 1.0]}}
    assert evaluate(claim, moving, "bigbatch")["verdict"] == INCONCLUSIVE        # an unconverged replica counts for nothing


def _fig1c_run(prefix, ns, n6_gap, seeds=3, spread=0.01):
    """Figure 1(c) records under ``prefix``: softmax 0.1 below exp at every n, plus ``n6_gap`` at n = 6."""
    rng = np.random.default_rng(seeds)
    exp = [list(-0.1 * n + spread * rng.standard_normal(seeds)) for n in ns]
    soft = [list(np.array(e) - 0.1 + (n6_gap if n == 6 else 0.0)) for e, n in zip(exp, ns)]
    return {f"{prefix}fig1_ns": list(ns), f"{prefix}fig1_seeds": {"exp/exp": exp, "exp/softmax": soft},
            f"{prefix}fig1_tenths": {f"exp/{a} n={n}": [1.0, 1.0] for a in ("exp", "softmax") for n in ns}}


def test_the_six_seed_run_decides_the_bandwidth_runs_n6_comparison_alone():
    claim = all_claims()["cheng.fig1c_bandwidth_n6"]
    assert claim.source == "cheng.figure1/bandwidth_n6" and claim.deviations["bandwidth_n6"]

    run = _fig1c_run
    base = run("bandwidth_", (6, 8, 10, 12, 14), 0.1)                 # tied at n = 6, softmax ahead elsewhere
    assert evaluate(all_claims()["cheng.fig1c_bandwidth"], base, "bandwidth")["verdict"] == INCONCLUSIVE
    assert evaluate(claim, {**base, **run("bandwidth_n6_", (6,), 0.0, seeds=6)}, "bandwidth_n6")["verdict"] in HOLDS
    assert evaluate(claim, {**base, **run("bandwidth_n6_", (6,), 0.2, seeds=6)}, "bandwidth_n6")["verdict"] == DIFFERS
    assert evaluate(claim, {**base, **run("bandwidth_n6_", (6,), 0.1, seeds=6)}, "bandwidth_n6")["verdict"] == INCONCLUSIVE
    assert evaluate(claim, base, "bandwidth_n6")["verdict"] == VERDICTS[-1]      # without the 6-seed run: not run
    assert len(base["bandwidth_fig1_seeds"]["exp/exp"][0]) == 3                  # the base run's records untouched


def test_softmax_minus_exp_reads_each_n_with_its_seed_spread():
    from icl_core.results import Result
    exp = np.log(np.array([[1.0, 1.1, 0.9], [0.5, 0.5, 0.5]]))
    soft = exp + np.array([[0.1, 0.2, 0.3], [-0.1, -0.1, -0.1]])
    r = Result("cheng.figure1", "", {}, {}, {"ns": np.array([6, 8]), "exp/exp": exp, "exp/softmax": soft})
    gaps = cheng.softmax_minus_exp(r)
    assert gaps[6][0] == pytest.approx(0.2) and gaps[6][1] == pytest.approx(0.1 / np.sqrt(3))
    assert gaps[8] == pytest.approx((-0.1, 0.0))


def test_steps_by_kernel_trains_that_panel_longer_and_names_a_bad_entry(tmp_path):
    cfg = {**config("cheng.figure1", "long_ab"), "seeds": 2, "batch_size": 8, "steps": 3, "test_prompts": 20,
           "ns": [2], "activations": ["linear"], "steps_by_kernel": {"linear": 5},
           "checkpoint_dir": str(tmp_path / "pieces")}
    cheng.figure1_recipe(cfg, "cpu")
    steps = {p.name: json.loads(p.read_text())["settings"]["steps"] for p in (tmp_path / "pieces").glob("t1-*.json")}
    assert steps == {"t1-linear-linear-n2-L3.json": 5, "t1-relu-linear-n2-L3.json": 3}
    # one kernel at a time (two processes may share the folder); the longer entry of the other is ignored
    cheng.figure1_recipe({**cfg, "kernels": ["relu"]}, "cpu")
    for bad in ({"linear": 0}, {"sine": 5}):
        with pytest.raises(ValueError, match="steps_by_kernel"):
            cheng.figure1_recipe({**cfg, "steps_by_kernel": bad}, "cpu")


def test_the_long_panels_a_b_run_has_its_own_claim():
    claim = all_claims()["cheng.fig1_match_long"]
    assert claim.source == "cheng.figure1/long_ab" and "6 seeds" in claim.reduced["long_ab"]
    assert config("cheng.figure1", "long_ab")["seeds"] == 6


def test_the_twelve_seed_run_replaces_long_abs_tied_cell_and_nothing_else():
    claim = all_claims()["cheng.fig1_match_seeds12"]
    assert claim.source == "cheng.figure1/seeds12_b"
    b, long_ab = config("cheng.figure1", "seeds12_b"), config("cheng.figure1", "long_ab")
    assert (b["kernels"], b["ns"], b["seeds"]) == (["relu"], [8], 12)
    # the same training as long_ab's relu panel, so that its first 6 seeds are long_ab's own
    assert b["steps"] == long_ab["steps"] and "relu" not in long_ab["steps_by_kernel"]
    same = ("batch_size", "lr", "seed", "float64", "test_prompts", "depth", "activations", "keep_state")
    assert {k: b[k] for k in same} == {k: long_ab[k] for k in same}
    acts, ns = ("linear", "relu", "exp"), [2, 4, 6, 8]

    def run(prefix, kernels, ns, seeds):
        """Matched activation 1 below the others at every n, the seeds within 0.01."""
        rng = np.random.default_rng(seeds)
        out = {f"{prefix}fig1_ns": list(ns), f"{prefix}fig1_seeds": {}, f"{prefix}fig1_tenths": {}}
        for k in kernels:
            for act in acts:
                out[f"{prefix}fig1_seeds"][f"{k}/{act}"] = [list(-n + (act != k) + 0.01 * rng.standard_normal(seeds))
                                                            for n in ns]
                out[f"{prefix}fig1_tenths"].update({f"{k}/{act} n={n}": [1.0, 1.0] for n in ns})
        return out
    base = run("long_ab_", ["linear", "relu"], ns, 6)
    # relu data n = 8: relu 0.1 ahead of exp, with one seed 1.2 behind the rest (a tie)
    base["long_ab_fig1_seeds"]["relu/relu"][3] = list(np.array(base["long_ab_fig1_seeds"]["relu/relu"][3]) + 0.9
                                                       + np.array([1.0, -0.2, -0.2, -0.2, -0.2, -0.2]))
    assert evaluate(all_claims()["cheng.fig1_match_long"], base, "long_ab")["verdict"] == INCONCLUSIVE
    both = {**base, **run("seeds12_b_", ["relu"], [8], 12)}
    row = evaluate(claim, both, "seeds12_b")
    assert row["verdict"] in HOLDS, row
    assert len(both["long_ab_fig1_seeds"]["relu/relu"][3]) == 6                  # the base run's records untouched
    # the 12-seed run reversing its cell makes the claim differ; without it: not run
    flipped = run("seeds12_b_", ["relu"], [8], 12)
    flipped["seeds12_b_fig1_seeds"]["relu/relu"][0] = list(np.array(flipped["seeds12_b_fig1_seeds"]["relu/relu"][0]) + 2)
    assert evaluate(claim, {**both, **flipped}, "seeds12_b")["verdict"] == DIFFERS
    assert evaluate(claim, base, "seeds12_b")["verdict"] == VERDICTS[-1]
    # a cell the 12-seed run does not hold stays long_ab's: a tie at linear data n = 2 keeps the claim open
    tied2 = {**both, "long_ab_fig1_seeds": {**both["long_ab_fig1_seeds"]}}
    matched = both["long_ab_fig1_seeds"]["linear/linear"]
    tied2["long_ab_fig1_seeds"]["linear/exp"] = [list(np.array(matched[0]) + np.array([0.3, -0.3] * 3))] + \
        both["long_ab_fig1_seeds"]["linear/exp"][1:]
    assert evaluate(claim, tied2, "seeds12_b")["verdict"] == INCONCLUSIVE


def test_the_authors_optimizer_run_decides_bigbatchs_n6_comparison():
    claim = all_claims()["cheng.fig1c_authors"]
    assert claim.source == "cheng.figure1/authors_c6" and "authors' code's optimizer" in claim.reduced["authors_c6"]
    assert not claim.deviations                        # the paper's setting, trained as its code trains

    run = _fig1c_run
    base = run("bigbatch_", (6, 8, 10, 12, 14), 0.2)                 # reversed at n = 6, softmax ahead elsewhere
    assert evaluate(claim, {**base, **run("authors_c6_", (6,), 0.0, seeds=6)}, "authors_c6")["verdict"] in HOLDS
    assert evaluate(claim, {**base, **run("authors_c6_", (6,), 0.2, seeds=6)}, "authors_c6")["verdict"] == DIFFERS
    assert evaluate(claim, {**base, **run("authors_c6_", (6,), 0.1, seeds=6)}, "authors_c6")["verdict"] == INCONCLUSIVE
    assert evaluate(claim, base, "authors_c6")["verdict"] == VERDICTS[-1]        # without the run: not run
    tied = run("bigbatch_", (6, 8, 10, 12, 14), 0.2, spread=0.3)               # n = 10-14 tied in the seed spread
    alone = {**tied, **run("authors_c6_", (6,), 0.2, seeds=6)}
    assert evaluate(claim, alone, "authors_c6")["verdict"] == INCONCLUSIVE        # a single reversal: could be chance
    again = {**alone, **run("authors_seed1_", (6,), 0.2, seeds=6)}
    row = evaluate(claim, again, "authors_c6")
    assert row["verdict"] == DIFFERS and "authors_c6_seed1" in row["gate"], row   # found again in the replica
