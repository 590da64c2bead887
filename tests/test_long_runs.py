"""Long runs in pieces (icl_core.long_runs), tested at tiny sizes on CPU."""
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from icl_core import LinearRegression, Transformer, train
from icl_core.__main__ import main
from icl_core.long_runs import (committed_summary, continue_run, default_folder, expand_compact, export_compact,
                              get_long_run, largest_loss_rise, load_models, load_state, machine_kinds)
from icl_core.checkpoints import load_checkpoint

TINY = dict(d_model=16, steps=20, eval_prompts=64, lasso_iters=20, lasso_alphas=[0.01],
            ridge_lams=[0.1], noise_stds=[0.0, 0.1], prefetch=5)
NAME = "chen.train.paper-h4-L4"


def models(K=2):
    torch.manual_seed(0)
    first = Transformer(3, 16, 1, 2, d_mlp=32)
    return [first] + [Transformer(3, 16, 1, 2, d_mlp=32) for _ in range(K - 1)]


@pytest.mark.parametrize("saved_vmap", [False, True])
def test_compact_round_trip_and_resume_in_either_layout(tmp_path, saved_vmap):
    s = LinearRegression(3, noise_std=0.1)
    ck = tmp_path / "full.pt"
    kw = dict(batch_size=4, lr=1e-2, n_points=6, seed=[1, 2])
    train(models(), s, steps=6, checkpoint_path=ck, vmap=saved_vmap, **kw)
    full = load_checkpoint(ck)
    names = [n for n, _ in models()[0].named_parameters()]
    export_compact(full, names, 2, tmp_path)
    for mode in ("separate", "vmap"):
        back = expand_compact(tmp_path, mode, "cpu")
        for n in names:
            assert torch.equal(back["params"][n], full["params"][n])     # parameters exact
        sq = [v["exp_avg_sq"] for v in back["optimizer"]["state"].values()]
        orig = [v["exp_avg_sq"] for v in full["optimizer"]["state"].values()]
        assert sum(v.numel() for v in sq) == sum(v.numel() for v in orig)
        flat = lambda vs: torch.cat([v.reshape(-1) for v in vs])
        if (mode == "vmap") == saved_vmap:
            assert torch.allclose(flat(sq), flat(orig), rtol=1e-2, atol=0)   # bfloat16
        assert all(not v["exp_avg"].any() for v in back["optimizer"]["state"].values())
        torch.save(back, tmp_path / f"{mode}.pt")
        res = train(models(), s, steps=10, checkpoint_path=tmp_path / f"{mode}.pt",
                    vmap=mode == "vmap", **kw)
        assert res.losses.shape == (2, 10)
        assert np.array_equal(res.losses[:, :6], np.asarray(full["losses"]).T)


def test_pieces_continue_one_run(tmp_path):
    folder = tmp_path / "run"
    first = continue_run(NAME, 60, device="cpu", folder=folder, **dict(TINY, steps=10))
    assert (first["from_step"], first["to_step"], first["finished"]) == (0, 10, True)
    (folder / "NOTE.md").write_text("what this run is\n")              # a file the pieces do not write
    (folder / "run7.params.pt").write_bytes(b"stale")                   # a run file they do (not kept)
    second = continue_run(NAME, 60, device="cpu", folder=folder, **TINY)
    assert (second["from_step"], second["to_step"]) == (10, 20)
    assert (folder / "NOTE.md").read_text() == "what this run is\n"
    (folder / "NOTE.md").unlink()
    state = load_state(folder)
    assert state["step"] == 20 and state["losses"].shape == (20, 2)
    assert [p["to_step"] for p in state["progress"]["pieces"]] == [10, 20]
    assert {"h4_L4_s0/risk_n10", "h4_L4_s0.1/ridge_n10", "h4_L4_s0.1/lasso_n10"} <= set(second["metrics"])
    m = second["metrics"]                       # each piece carries the one-model analyses of Figs. 1c, 1d, 2b
    assert np.asarray(m["h4_L4_s0.1/head_delta"]).shape == (4, 4) and len(m["h4_L4_s0.1/probes"]) == 5
    assert len(m["h4_L4_s0.1/dominance_se"]) == 4
    assert len(m["h4_L4_s0.1/pprobe"]) == 101 and m["h4_L4_s0.1/pprobe_se"] > 0
    assert set(m["h4_L4_s0.1/pprobe_ref/raw x"]) == {"curve", "lr", "se"}
    from icl_core.head_analysis import analyse_model       # the same numbers as the page's analysis
    again = analyse_model(load_models(get_long_run(NAME), folder, **TINY)["h4_L4_s0.1"], dict(get_long_run(NAME).config, **TINY),
                          0.1, n_prompts=TINY["eval_prompts"])
    assert np.allclose(again["delta"], m["h4_L4_s0.1/head_delta"]) and np.allclose(again["pprobe"], m["h4_L4_s0.1/pprobe"])
    assert sorted(p.name for p in folder.iterdir()) == [
        "progress.json", "run0.adam.pt", "run0.params.pt", "run1.adam.pt", "run1.params.pt", "state.pt"]
    # an uninterrupted run: the first piece equal, the second close (Adam's first moment restarts)
    whole = continue_run(NAME, 60, device="cpu", folder=tmp_path / "whole", **TINY)
    assert whole["to_step"] == 20
    a, b = load_state(folder)["losses"], load_state(tmp_path / "whole")["losses"]
    assert np.array_equal(a[:10], b[:10])
    assert np.allclose(a[10:], b[10:], rtol=0.05)
    ma = load_models(get_long_run(NAME), folder, **TINY)
    mb = load_models(get_long_run(NAME), tmp_path / "whole", **TINY)
    for x, y in zip(ma["h4_L4_s0.1"].parameters(), mb["h4_L4_s0.1"].parameters()):
        assert (x - y).abs().max() < 1e-3


def test_a_piece_with_other_settings_is_refused_and_leaves_the_folder(tmp_path):
    folder = tmp_path / "run"
    continue_run(NAME, 60, device="cpu", folder=folder, **dict(TINY, steps=4))
    before = (folder / "progress.json").read_text()
    with pytest.raises(ValueError, match=rf"{folder}.*other lr"):
        continue_run(NAME, 60, device="cpu", folder=folder, **dict(TINY, lr=1e-3))
    assert (folder / "progress.json").read_text() == before
    with pytest.raises(ValueError, match="unknown config keys"):
        continue_run(NAME, 60, device="cpu", folder=folder, width=3)
    with pytest.raises(ValueError, match="minutes must be"):
        continue_run(NAME, 0, device="cpu", folder=folder)


def test_cli_continue(tmp_path, capsys):
    assert main(["continue"]) == 0
    assert "chen.train.paper-h1-L4" in capsys.readouterr().out
    assert main(["continue", "nope"]) == 2
    assert "long run must be one of" in capsys.readouterr().err
    args = ["continue", NAME, "--device", "cpu", "--dir", str(tmp_path / "r")]
    for k, v in dict(TINY, steps=3).items():
        args += ["--set", f"{k}={json.dumps(v)}"]
    assert main(args) == 0
    assert "steps 0 -> 3 of 3" in capsys.readouterr().out
    assert committed_summary(tmp_path / "r") == "3 of 3 steps, 1 piece on CPU"      # what the listing prints
    before = (tmp_path / "r" / "progress.json").read_text()
    assert main(args) == 2                      # a finished run is refused, not given an empty piece
    assert "finished at 3 of 3 steps" in capsys.readouterr().err
    assert (tmp_path / "r" / "progress.json").read_text() == before
    assert committed_summary(tmp_path / "none") == "nothing committed"
    assert machine_kinds([{"provenance": {"device": d}} for d in ("cuda: H100", "cpu", "cuda: H200")]) == "GPU and CPU"


def test_committed_paper_pieces_load_and_match_their_record():
    """The committed pieces: the recorded risk is reproduced on CPU from the weights."""
    from icl_core.head_analysis import eval_prompts, query_risk
    run = get_long_run("chen.train.paper-h4-L4")
    state = load_state("results/chen.train/paper-h4-L4")
    assert state is not None, "the committed paper-scale pieces are missing from results/"
    model = load_models(run, "results/chen.train/paper-h4-L4")["h4_L4_s0.1"]
    recorded = state["progress"]["pieces"][-1]["metrics"]["h4_L4_s0.1/risk_n10"]
    cfg = dict(run.config, eval_prompts=1024)
    risk = query_risk(model, eval_prompts(cfg, 0.1))
    assert abs(risk - recorded) < 0.15 * recorded     # 1024 of the 8192 prompts, maybe CPU vs GPU


def test_the_page_reads_each_committed_seed_and_labels_its_runs():
    from icl_core.recipes.chen import PAPER_SEEDS, load_paper_runs, paper_pieces_labelled, paper_pieces_lines
    runs = load_paper_runs()
    assert set(runs) == set(PAPER_SEEDS) and all(runs[0].values())
    for seed, suffix in PAPER_SEEDS.items():        # registered, and the page looks where the runs commit
        for h in (1, 4):
            name = f"paper-h{h}-L4{suffix}"            # spelled out: the names the run notes' commands use
            run = get_long_run(f"chen.train.{name}")
            assert run.config["seed"] == seed and default_folder(run) == Path("results/chen.train") / name
    committed = {(seed, h) for seed, by_h in runs.items() for h, st in by_h.items() if st is not None}
    labels = paper_pieces_labelled(runs)
    assert len(labels) == len(committed) and {"h = 1", "h = 4"} <= set(labels)
    lines = paper_pieces_lines(runs)
    assert len(lines) == len(committed)
    assert lines[0].startswith(f"h = 1, seed 0: step {runs[0][1]['step']:,}; excess risk at n = 10: ")


def test_the_page_prose_describes_the_committed_state():
    """The Chen page's prose on the analysed pieces names the step counts it describes: they must
    be the committed ones (a piece committed without its prose would leave the page describing an
    older state beside figures of the newer one)."""
    from icl_core.recipes.chen import load_paper_runs
    by_seed = load_paper_runs()
    runs = by_seed[0]
    page = Path("book/chen/experiments.md").read_text()
    said = re.search(r"What the committed state shows \(h = 4 at ([\d,]+) steps, h = 1 at ([\d,]+)", page)
    assert said, "the page no longer says which state its prose describes"
    assert (int(said[1].replace(",", "")), int(said[2].replace(",", ""))) == (runs[4]["step"], runs[1]["step"]), \
        "book/chen/experiments.md describes another state than the committed pieces: update its prose"
    said = re.findall(r"seed\s+(\d):\s+h\s+=\s+4\s+at\s+([\d,]+)\s+steps,\s+h\s+=\s+1\s+at\s+([\d,]+)", page)  # across line breaks
    assert {"1", "2"} <= {seed for seed, _, _ in said}, "the page no longer says which state of seeds 1 and 2 it describes"
    for seed, h4, h1 in said:                   # every mention, so none is left behind
        runs = by_seed[int(seed)]
        assert (int(h4.replace(",", "")), int(h1.replace(",", ""))) == (runs[4]["step"], runs[1]["step"]), \
            f"book/chen/experiments.md describes another state of seed {seed} than the committed pieces: update its prose"
    from icl_core.recipes.chen import load_pruned_runs
    said = re.findall(r"(?:seed\s+(\d)'s\s+)?pruned\s+fine-tune\s+has\s+run\s+([\d,]+)\s+of", page)
    for seed, pruned in load_pruned_runs().items():   # Fig. 1d's fine-tunes: the prose names each one's step
        steps = [int(x.replace(",", "")) for s, x in said if int(s or 0) == seed]   # "The pruned ...": seed 0's
        if pruned is not None:
            assert steps and all(x == pruned["step"] for x in steps), \
                f"book/chen/experiments.md describes another state of seed {seed}'s pruned fine-tune than the committed one"


def _said(pattern: str, page: str, what: str) -> re.Match:
    """``pattern``'s match in ``page``, which must state ``what`` in that form."""
    said = re.search(pattern, page)
    assert said, f"the page no longer states {what} in the form this test reads: update the prose or this test"
    return said


def _over_seeds(gate: str) -> tuple:
    """The last "mean over K seeds G (within|beyond 2 SE over seeds S)" a claim's gate reports."""
    found = re.findall(r"mean over \d seeds ([-+][\d.]+) \((within|beyond) 2 SE over seeds ([\d.]+)\)", gate)
    assert found, f"the gate no longer reports a gap over seeds: {gate}"
    return found[-1]


def test_the_stated_one_core_rate_is_the_range_the_committed_pieces_measured():
    """The Chen page (twice) and the README give the width-256 runs' one-core rate as "LO-HI steps a
    second in pieces of 100 minutes or more", with the core-hours it takes for the paper's 320,000
    steps and (README) the steps a 48-minute piece adds: each must be what the committed CPU pieces
    of 100 minutes or more measured, to the digits printed (a piece faster or slower than the range
    leaves the prose describing older pieces)."""
    rates = [piece["steps_per_s"] for f in sorted(Path("results/chen.train").glob("paper-*/progress.json"))
             for piece in json.loads(f.read_text())["pieces"]
             if piece["provenance"]["device"] == "cpu" and piece["seconds"] >= 6000]   # as machine_kinds reads it
    assert len(rates) > 10, "the committed paper-scale runs have lost their CPU pieces"
    lo, hi = min(rates), max(rates)
    page = re.sub(r"\s+", " ", Path("book/chen/experiments.md").read_text())
    readme = re.sub(r"\s+", " ", Path("README.md").read_text())
    said = re.findall(r"([\d.]+)-([\d.]+) steps(?: a second|/s) (?:in|on one CPU core in) (?:its )?pieces of 100 "
                      r"minutes or more", page + " " + readme)
    assert len(said) == 3, "the page (twice) and the README no longer state the one-core rate in the form this test reads"
    for a, b in said:                           # the measured rates to one decimal (6.55 is printed 6.6)
        assert abs(float(a) - lo) <= 0.05 + 1e-9 and abs(float(b) - hi) <= 0.05 + 1e-9, \
            f"the prose says {a}-{b} steps a second; the committed CPU pieces of 100 minutes or more measured " \
            f"{lo}-{hi}: update book/chen/experiments.md and README.md"
    hours = _said(r"(\d+)-(\d+) core-hours each for the paper's 320,000 steps", page, "the core-hours")
    assert (int(hours[1]), int(hours[2])) == (round(320_000 / hi / 3600), round(320_000 / lo / 3600)), \
        "the page gives other core-hours for 320,000 steps than the committed rates imply"
    steps = _said(r"about ([\d,]+)-([\d,]+) steps to a run in 48 minutes of one core", readme, "a 48-minute piece")
    for stated, rate in ((steps[1], lo), (steps[2], hi)):   # rounded to 500 steps
        assert abs(int(stated.replace(",", "")) - 48 * 60 * rate) <= 250, \
            "the README gives other steps for a 48-minute piece than the committed rates imply"


def test_the_page_states_the_seed_4_runs_and_gaps_the_committed_runs_give():
    """The Chen page's Fig. 1b and Fig. 2b prose types the state of seed 4's runs, the newest seed
    (its models' excess risk, ridge and gate, their lowest P-probe points, their steps), the mean gaps
    over the seeds with two standard errors over them, and the verdict, with the reason given for an
    inconclusive Figure 1b: each must be what the committed runs and the claims table compute (a
    piece committed without its prose would leave the page describing an older state, or a verdict
    the table no longer gives)."""
    from icl_core.claims import VERDICTS, all_claims, evaluate
    from icl_core.recipes.chen import _model_past_plateau, load_paper_runs, paper_pieces_values, pieces_records
    runs = load_paper_runs()
    v = paper_pieces_values(runs)
    v.update(pieces_records(runs[0]))          # seed 0's P-probe curves (Fig. 2b); Fig. 1d's pruned runs are not read
    seed4 = next(x for x in v["paper_pieces_seeds"] if x["seed"] == 4)
    table = all_claims()
    claims = {cid: evaluate(table[f"chen.{cid}_paper"], v, "paper") for cid in ("fig1b", "fig2b")}
    page = re.sub(r"\s+", " ", Path("book/chen/experiments.md").read_text())
    state = r"(past its gate|below ridge, not yet past its gate|still on the plateau)"

    def words(model):           # past the gate by the claims' own rule; between it and ridge, below ridge
        return ("past its gate" if _model_past_plateau(seed4, model) else
                "below ridge, not yet past its gate" if seed4[model] < seed4["ridge"] else "still on the plateau")

    said = _said(r"seed 4's 1-head model is " + state + r" \(([\d.]+) at \$n = 10\$, against its ridge ([\d.]+) "
                 r"and gate ([\d.]+)\) (?:but|and) its 4-head model is " + state + r"(?: too)? \(([\d.]+)\): "
                 r"Figure 1b is \*([^*]+)\*([^()]*)\(its mean gap over the three seeds, ([-+]?[\d.]+), is "
                 r"(within|beyond) two standard errors over them, ([\d.]+)[;)]", page,
                 "seed 4's models and Figure 1b's gap")
    assert (said[1], said[5]) == (words("h1"), words("h4")), \
        "the page says another state of seed 4's models than the committed runs show"
    # three decimals: at two, a risk just above the gate would print as the gate itself
    assert (said[2], said[3], said[4], said[6]) == (f"{seed4['h1']:.3f}", f"{seed4['ridge']:.3f}",
                                                    f"{0.9 * seed4['ridge']:.3f}", f"{seed4['h4']:.3f}"), \
        "the page states other excess risks for seed 4 than the committed runs give"
    assert said[7] == claims["fig1b"]["verdict"], "the page types another Figure 1b verdict than the table computes"
    gap, side, se = _over_seeds(claims["fig1b"]["gate"])
    assert (said[9].lstrip("+"), said[10], said[11]) == (gap.lstrip("+"), side, se), \
        "the page states another Figure 1b gap over the seeds than the table computes"
    # the reason typed after an inconclusive verdict: the one its gate gives
    waits = "may still come" in claims["fig1b"]["gate"]              # a failing check on an unfinished run
    in_order = table["chen.fig1b_paper"].test(v).holds and side == "within"   # the pattern, not beyond the spread
    assert ("while seed 4's runs are unfinished" in said[8]) == (said[7] == VERDICTS[3] and waits), \
        "the page says Figure 1b waits for seed 4's runs to finish: its gate says otherwise"
    assert ("the means over the seeds are in the paper's order" in said[8]) == (said[7] == VERDICTS[3] and in_order), \
        "the page says Figure 1b's means are in order but within the seed spread: the table computes otherwise"
    said = _said(r"its 4-head model is " + state + r" \(its 1-head model is " + state + r"; lowest P-probe ([\d.]+) "
                 r"for h = 4, ([\d.]+) for h = 1, at ([\d,]+) and ([\d,]+) steps\), so the mean gap over seeds "
                 r"(\d(?:, \d)* and \d), ([-+][\d.]+) \((within|beyond) two standard errors over them, "
                 r"([\d.]+)\), (?:is not yet a verdict|decides it: Figure 2b is \*([^*]+)\*)", page,
                 "seed 4's P-probes and Figure 2b's gap")
    if said[11] is None:
        assert claims["fig2b"]["verdict"] == VERDICTS[3], "the page says Figure 2b is not yet a verdict: it is now"
    else:
        assert said[11] == claims["fig2b"]["verdict"], "the page types another Figure 2b verdict than the table computes"
    assert (said[1], said[2]) == (words("h4"), words("h1")), \
        "the page says another state of seed 4's models than the committed runs show"
    assert (said[3], said[4]) == (f"{seed4['pprobe_h4']:.2f}", f"{seed4['pprobe_h1']:.2f}"), \
        "the page states other lowest P-probe points for seed 4 than the committed runs give"
    assert (int(said[5].replace(",", "")), int(said[6].replace(",", ""))) == (seed4["steps"]["h4"], seed4["steps"]["h1"]), \
        "the page names other steps for seed 4's P-probes than the committed runs'"
    assert f"decided over seeds {said[7].replace(' and ', ', ')};" in claims["fig2b"]["gate"], \
        "the page names other seeds than Figure 2b is decided over"
    assert (said[8], said[9], said[10]) == _over_seeds(claims["fig2b"]["gate"]), \
        "the page states another Figure 2b gap over the seeds than the table computes"


def test_the_page_states_seed_3s_4_head_run_as_its_committed_pieces_give():
    """Seed 3's 4-head run goes on for Figure 1c while its seed is set aside: the page names its step
    (twice) and lists the excess risks its pieces ended at, newest first, with the step since which it
    has stayed below its gate. Each must be what the committed pieces give (a piece committed without
    its prose would leave the page describing an older state)."""
    name = "paper-h4-L4-seed3"
    progress = json.loads((Path("results/chen.train") / name / "progress.json").read_text())

    def metric(piece, suffix):
        (key,) = [k for k in piece["metrics"] if k.endswith(suffix)]
        return piece["metrics"][key]

    risk = {p["to_step"]: metric(p, "/risk_n10") for p in progress["pieces"]}
    gate = 0.9 * metric(progress["pieces"][-1], "/ridge_n10")
    page = re.sub(r"\s+", " ", Path("book/chen/experiments.md").read_text())
    said = _said(r"\(seed 3: h = 4 at ([\d,]+) steps, h = 1 at 320,000\)", page, "seed 3's steps")
    assert int(said[1].replace(",", "")) == progress["step"], "the page names another step for seed 3's h = 4 run"
    said = _said(r"Seed 3's 4-head model, which goes on to 320,000 steps for Figure 1c \(it reads the 4-head model "
                 r"alone\), has left the plateau: (.*?), below its gate ([\d.]+) since ([\d,]+); before, (.*?)\. "
                 r"The other seeds' 4-head models", page, "seed 3's 4-head states")
    pair = r"(\d\.\d\d) at (\d[\d,]*\d)(?: steps)?(?: and (\d[\d,]*\d)(?![\d.]))?"   # "R at S", "R at S and T"
    states = re.findall(pair, said[1] + ", " + said[4])
    steps = [int(x.replace(",", "")) for _, a, b in states for x in (a, b) if x]
    assert steps == sorted(risk, reverse=True), \
        "the page should list every committed state of seed 3's 4-head model, newest first"
    for r, a, b in states:
        for x in (a, b):
            if x:
                assert r == f"{risk[int(x.replace(',', ''))]:.2f}", f"the page states another risk at step {x}"
    below = [step for step in sorted(risk) if all(risk[t] < gate for t in risk if t >= step)]
    assert (said[2], int(said[3].replace(",", ""))) == (f"{gate:.2f}", below[0]), \
        "the page states another gate, or another step since which seed 3's 4-head model is below it"
    assert all(risk[int(a.replace(",", ""))] < gate for _, a, _ in re.findall(pair, said[1])), \
        "the page lists a state above the gate before 'below its gate'"


def test_largest_loss_rise_finds_a_spike_above_the_lowest_earlier_mean_and_not_noise():
    """A decreasing loss with one spike: the rise is measured from the lowest earlier window mean,
    where the peak window starts is reported 1-based, and a loss that only falls never rises."""
    falling = np.linspace(2.0, 1.0, 50)
    r = largest_loss_rise(falling, window=5)
    assert r["rise"] == 0.0 and r["start"] == 1 and r["now"] == pytest.approx(falling[-5:].mean())
    spiked = falling.copy()
    spiked[30:35] += 3.0                          # updates 31..35
    r = largest_loss_rise(spiked, window=5)
    assert r["start"] == 31 and r["steps"] == 50 and r["window"] == 5
    assert r["lowest"] == pytest.approx(falling[25:30].mean())        # the window just before it
    assert r["peak"] == pytest.approx(falling[30:35].mean() + 3.0)
    assert r["rise"] == pytest.approx(r["peak"] - r["lowest"]) and r["rise"] > 2.8
    assert largest_loss_rise(spiked, window=1)["start"] == 31         # one update: the spike's first
    for bad, kwargs in ((spiked, {"window": 0}), (spiked, {"window": 51}), (np.ones((5, 2)), {}),
                        (np.r_[1.0, np.nan, 1.0], {"window": 1})):
        with pytest.raises(ValueError, match="window|losses"):
            largest_loss_rise(bad, **kwargs)


def test_the_page_states_the_loss_spike_the_committed_losses_show():
    """The Chen page's prose on seed 3's loss spike, on the other runs' largest rise, and on the run that
    rise was in (its rise, lowest, first update, and mean loss over the next 1,000 updates) gives the
    numbers :func:`paper_loss_rises` computes from the committed per-update losses, for the committed step."""
    from icl_core.recipes.chen import load_paper_runs, load_pruned_runs, paper_loss_rises, paper_run_name
    runs = load_paper_runs()
    rises = paper_loss_rises(runs, load_pruned_runs())
    spiked, second = sorted(rises, key=lambda name: rises[name]["rise"], reverse=True)[:2]   # the spike, the next
    r, x = rises[spiked], rises[second]
    page = re.sub(r"\s+", " ", Path("book/chen/experiments.md").read_text())
    said = re.search(r"training loss \(mean over 1,000 updates\) rose from its lowest, ([\d.]+), to ([\d.]+) over "
                     r"the 1,000 updates from update ([\d,]+),.*? and was ([\d.]+) over the last 1,000 to step ([\d,]+); "
                     r"none of the other (\w+) committed paper-scale runs \(pruned ones included\) ever rose more "
                     r"than ([\d.]+) above its lowest 1,000-update mean \(the largest of those, seed (\d)'s (\d)-head "
                     r"model's, rose ([\d.]+) from its lowest, ([\d.]+), over the 1,000 updates from update ([\d,]+) and was "
                     r"back at ([\d.]+) over the next 1,000", page)
    assert said, "the page no longer states the loss spike in the form this test reads"
    assert r["window"] == 1000
    assert (said[1], said[2], said[4]) == (f"{r['lowest']:.2f}", f"{r['peak']:.2f}", f"{r['now']:.2f}"), \
        "book/chen/experiments.md states another loss spike than the committed losses show"
    assert (int(said[3].replace(",", "")), int(said[5].replace(",", ""))) == (r["start"], r["steps"])
    words = "one two three four five six seven eight nine ten eleven twelve".split()
    assert said[6] == words[len(rises) - 2], "the page counts the other committed runs wrongly"
    assert x["rise"] <= float(said[7]) < x["rise"] + 0.01, "the other runs' largest rise is stated wrongly"
    assert second == paper_run_name(int(said[9]), int(said[8])), "the page names another run as the next largest rise"
    assert (said[10], said[11], int(said[12].replace(",", ""))) == (f"{x['rise']:.2f}", f"{x['lowest']:.2f}", x["start"])
    losses = runs[int(said[8])][int(said[9])]["losses"][:, 0]
    assert x["start"] + 2000 <= len(losses), "the next 1,000 updates after that rise are not all committed"
    assert said[13] == f"{float(losses[x['start'] + 1000:x['start'] + 2000].mean()):.2f}", \
        "the page states another loss over the 1,000 updates after the next largest rise than the losses show"
    for start in re.findall(r"loss spike from update ([\d,]+)", page):   # every mention, so none is left behind
        assert int(start.replace(",", "")) == r["start"]


_STARTED_SEEDS = (0, 1, 2, 3, 4)  # seeds whose paper-scale runs are committed: each must stay so
_STARTED_PRUNED = (0, 2)          # seeds whose pruned fine-tune (Fig. 1d) is committed: the same


def _paper_runs_to_check():
    """The name of every registered paper-scale run that must be committed: those of
    :data:`_STARTED_SEEDS`, and of any other seed once its first piece is (a registered seed may not
    have started yet); then Fig. 1d's pruned fine-tunes of :data:`_STARTED_PRUNED` and of any other
    seed once its first piece is committed."""
    from icl_core.recipes.chen import PAPER_SEEDS, paper_run_name, pruned_run_name
    started = lambda name: (Path("results/chen.train") / name).exists()
    runs = [paper_run_name(h, seed) for seed in PAPER_SEEDS for h in (1, 4)
            if seed in _STARTED_SEEDS or started(paper_run_name(h, seed))]
    pruned = [pruned_run_name(seed) for seed in PAPER_SEEDS if seed in _STARTED_PRUNED or started(pruned_run_name(seed))]
    return runs + pruned


def test_the_run_notes_describe_every_committed_piece():
    """Each paper run's NOTE.md is written by hand beside its pieces: its piece lines must chain from
    step 0 to the committed step through piece boundaries that progress.json records, and the
    remaining-steps figure must be the committed one (a piece committed without its note line, or a
    stale estimate, would fail here)."""
    for name in _paper_runs_to_check():
        folder = Path("results/chen.train") / name
        progress = json.loads((folder / "progress.json").read_text())
        bounds = {0} | {p["to_step"] for p in progress["pieces"]}
        note = (folder / "NOTE.md").read_text()
        spans = [(int(a.replace(",", "")), int(b.replace(",", "")))
                 for a, b in re.findall(r"Pieces? [\d-]+ \(([\d,]+) -> ([\d,]+)", note)]
        assert spans, f"{folder}/NOTE.md has no piece lines"
        assert spans[0][0] == 0 and spans[-1][1] == progress["step"], \
            f"{folder}/NOTE.md does not reach the committed step {progress['step']:,}: add the piece's line"
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert end == start, f"{folder}/NOTE.md skips from {end:,} to {start:,}"
        assert {s for span in spans for s in span} <= bounds, f"{folder}/NOTE.md names a step no piece ended at"
        left = re.search(r"rest of the paper's ([\d,]+) steps\s+\(([\d,]+) steps\)", note)
        assert left, f"{folder}/NOTE.md no longer says how many steps are left"
        total, rest = (int(x.replace(",", "")) for x in left.groups())
        assert total == progress["config"]["steps"] and rest == total - progress["step"], \
            f"{folder}/NOTE.md gives a stale remaining-steps figure"


def test_the_readme_gpu_command_continues_exactly_the_unfinished_paper_runs():
    """The README's command for a GPU session loops over "every paper-scale run not yet finished": its
    list must be the committed runs whose progress is short of their steps (a run finished on a CPU
    and left in the loop costs nothing, but one missing from it would never be continued there)."""
    readme = Path("README.md").read_text()
    loop = re.findall(r"for r in ([\w\- ]+); do\s+python -m icl_core continue chen\.train\.\$r --minutes [\d.]+ "
                      r"--device cuda", readme)
    assert len(loop) == 1, "the README no longer gives the GPU session's loop in the form this test reads"
    unfinished = []
    for name in _paper_runs_to_check():
        progress = json.loads((Path("results/chen.train") / name / "progress.json").read_text())
        if progress["step"] < progress["config"]["steps"]:
            unfinished.append(name)
    assert sorted(loop[0].split()) == sorted(unfinished), \
        f"the README's GPU loop should list the unfinished paper-scale runs {sorted(unfinished)}"


def test_committed_paper_pieces_still_resume_with_this_code(tmp_path):
    """The next piece (GPU or CPU) must accept the committed checkpoints: train() resumes them with this
    code's settings (their trajectory fingerprint matches; zero further steps are taken here)."""
    for name in (*_paper_runs_to_check(), "probe-h4-L4-w64"):        # the CPU probe continues the same way
        folder = f"results/chen.train/{name}"
        assert load_state(folder) is not None, f"the committed piece {folder} is missing"
        run = get_long_run(f"chen.train.{name}")
        models, samplers, kw = run.build(dict(run.config))
        full = expand_compact(Path(folder), "single", "cpu")
        torch.save(full, tmp_path / f"{name}.pt")
        res = train(models, samplers, full["step"], checkpoint_path=tmp_path / f"{name}.pt", device="cpu", **kw)
        assert res.steps == full["step"] and len(res.losses) == full["step"]


def test_the_cpu_probes_keep_a_constant_clipped_learning_rate_and_refuse_another_clip(tmp_path):
    for h in (1, 4):
        probe = get_long_run(f"chen.train.probe-h{h}-L4-w64")
        assert probe.config["d_model"] == 64 and probe.config["lr"] == 1e-3 and probe.config["grad_clip"] == 1.0
        assert "lr_final" not in probe.config and "lr_decay" not in probe.config      # never decays
    folder = tmp_path / "probe"
    first = continue_run("chen.train.probe-h1-L4-w64", 60, device="cpu", folder=folder, **dict(TINY, steps=6))
    assert first["to_step"] == 6 and load_state(folder)["step"] == 6
    with pytest.raises(ValueError, match="grad_clip"):        # the clip is part of what a piece must share
        continue_run("chen.train.probe-h1-L4-w64", 60, device="cpu", folder=folder, **dict(TINY, grad_clip=0.5))


def test_the_pieces_figure_labels_runs_by_heads_or_by_name():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from icl_core.figures.chen import paper_pieces, piece_devices

    def state(steps, total, devices=("cuda: NVIDIA H100 80GB HBM3", "cpu")):
        pieces = [{"from_step": 0, "steps_total": total, "provenance": {"device": devices[0]}},
                  {"from_step": steps // 2, "steps_total": total, "provenance": {"device": devices[1]}}]
        return {"losses": torch.linspace(2, 1, steps)[:, None], "step": steps, "progress": {"pieces": pieces}}
    fig = paper_pieces({1: state(3000, 9000), 4: state(2000, 9000)})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["h = 1", "h = 4"]
    assert ax.get_title().replace("\n", " ").endswith("3,000 (h = 1), 2,000 (h = 4) of 9,000 steps")
    assert ax.get_xlabel().endswith("pieces on GPU and CPU)")        # read from the pieces' provenance
    assert piece_devices({1: state(10, 20, ("cuda: A", "cuda: B"))}) == "GPU"
    fig = paper_pieces({"h = 4, Adam 1e-3": state(3000, 9000), "h = 4, Adam 1e-4": state(2000, 6000)}, where="CPU")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["h = 4, Adam 1e-3", "h = 4, Adam 1e-4"]
    assert "3,000 of 9,000 (h = 4, Adam 1e-3), 2,000 of 6,000 (h = 4, Adam 1e-4)" in ax.get_title().replace("\n", " ")   # wrapped when long
    plt.close("all")


def test_evaluate_only_adds_what_an_older_piece_lacks_and_trains_nothing(tmp_path, capsys):
    folder = tmp_path / "run"
    continue_run(NAME, 60, device="cpu", folder=folder, **dict(TINY, steps=6))
    progress = json.loads((folder / "progress.json").read_text())
    full = dict(progress["pieces"][-1]["metrics"])
    old = {k: v for k, v in full.items() if k.endswith(("_n10",))}     # a piece from before the analysis
    progress["pieces"][-1]["metrics"] = old
    (folder / "progress.json").write_text(json.dumps(progress))
    params = (folder / "run0.params.pt").read_bytes()
    assert main(["continue", NAME, "--evaluate-only", "--dir", str(folder)]) == 0
    assert "metric(s) added to the newest piece" in capsys.readouterr().out
    entry = load_state(folder)["progress"]["pieces"][-1]
    assert set(entry["metrics"]) == set(full) and entry["to_step"] == 6
    assert np.allclose(entry["metrics"]["h4_L4_s0.1/head_delta"], full["h4_L4_s0.1/head_delta"])
    (ev,) = entry["evaluations"]
    assert ev["at_step"] == 6 and set(ev["added"]) == set(full) - set(old)
    assert all(abs(ev["rechecked"][k] - old[k]) < 1e-9 for k in old)     # the recorded numbers, recomputed
    assert (folder / "run0.params.pt").read_bytes() == params            # no training
    assert main(["continue", NAME, "--evaluate-only", "--dir", str(folder), "--set", "lr=0.1"]) == 2
    assert "--evaluate-only takes the committed settings" in capsys.readouterr().err
    assert main(["continue", NAME, "--evaluate-only", "--dir", str(tmp_path / "none")]) == 2
    assert "no committed piece" in capsys.readouterr().err


def test_the_pruned_fine_tune_starts_from_the_finished_source_and_keeps_its_pruning(tmp_path):
    """Fig. 1d's pruned run: the finished h = 4 source with every head of layer 1 and the most
    important head of each later layer kept (by the source's committed head assessment), fine-tuned
    in pieces like any long run; the pruning survives the fine-tune and a reload."""
    from icl_core.head_analysis import head_weights
    src, name = tmp_path / "src", "chen.train.paper-h4-L4-pruned"
    tiny = dict(TINY, steps=6)
    pruned = dict(tiny, steps=4, source_folder=str(src))
    names = ("h4_L4_s0", "h4_L4_s0.1")
    assert get_long_run(name).config["steps"] == 60000 and get_long_run(name).config["source"] == "paper-h4-L4"
    continue_run(NAME, 60, device="cpu", folder=src, **tiny)
    progress = json.loads((src / "progress.json").read_text())
    unfinished = tmp_path / "unfinished"                     # the same state, as if its run were longer
    unfinished.mkdir()
    for f in src.iterdir():
        (unfinished / f.name).write_bytes(f.read_bytes())
    (unfinished / "progress.json").write_text(json.dumps(dict(progress, config=dict(progress["config"], steps=9))))
    with pytest.raises(ValueError, match="at 6 of 9 steps: the paper prunes the trained model"):
        continue_run(name, 60, device="cpu", folder=tmp_path / "p", **dict(pruned, source_folder=str(unfinished)))
    with pytest.raises(ValueError, match="d_model must equal the source run's"):
        continue_run(name, 60, device="cpu", folder=tmp_path / "p", **dict(pruned, d_model=32))
    assert not (tmp_path / "p").exists()
    delta = progress["pieces"][-1]["metrics"]
    want = [[int(np.nanargmax(w)) for w in head_weights(np.array(delta[f"{n}/head_delta"]))[1:]] for n in names]
    first = continue_run(name, 60, device="cpu", folder=tmp_path / "p", **pruned)
    assert first["to_step"] == 4 and first["finished"]
    assert [first["metrics"][f"{n}_pruned/kept_heads"] for n in names] == want
    models = load_models(get_long_run(name), tmp_path / "p", **pruned)
    source = load_models(get_long_run(NAME), src, **tiny)
    for n, kept in zip(names, want):
        masks = [m.tolist() for m in models[f"{n}_pruned"].head_masks]
        assert masks[0] == [1.0] * 4 and masks[1:] == [[float(j == k) for j in range(4)] for k in kept]
        before, after = source[n].state_dict(), models[f"{n}_pruned"].state_dict()
        assert any(not torch.equal(before[k], after[k]) for k in before)               # fine-tuning moved it
