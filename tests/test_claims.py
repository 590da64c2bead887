"""Declared claims and computed verdicts (icl_core.claims)."""
import subprocess
from types import SimpleNamespace

import pytest

from icl_core.claims import (HOLDS, VERDICTS, Check, Claim, all_claims, all_of, beats, computed,
                             converged, evaluate, exceeds_spread, sampling_error, table, tenths, trend,
                             trends_decided)
from icl_core.records import Records


def claim(**kw):
    base = dict(id="t.c", notebook="t/nb", paper="P", where="Fig. 1", quote="q",
                test=lambda v: Check(v["x"] < 1, f"x = {v['x']}"), gate=computed("x"))
    base.update(kw)
    return Claim(**base)


REPRODUCED, REDUCED, MODIFIED, INCONCLUSIVE, DIFFERS, NOT_RUN = VERDICTS   # no verdict typed here


def test_the_verdict_follows_gate_test_setting_and_budget():
    c = claim(deviations={"ci": "other noise"}, reduced={"mid": "fewer steps"})
    assert evaluate(c, {"x": 0.5}, "paper")["verdict"] == REPRODUCED
    assert evaluate(c, {"x": 0.5}, "ci")["verdict"] == MODIFIED
    assert evaluate(c, {"x": 0.5}, "mid")["verdict"] == REDUCED
    assert evaluate(c, {"x": 2.0}, "paper")["verdict"] == DIFFERS
    assert evaluate(c, {"x": float("nan")}, "paper")["verdict"] == INCONCLUSIVE
    row = evaluate(c, {}, "paper")
    assert row["verdict"] == NOT_RUN and "x" in row["gate"]
    gated = claim(gate=converged("t"))
    row = evaluate(gated, {"x": 0.5}, "paper")          # measured, but the gate's input is missing
    assert row["verdict"] == INCONCLUSIVE and "input t was not recorded" in row["gate"]
    assert HOLDS == (REPRODUCED, REDUCED, MODIFIED)


def test_trend_orders_groups_only_beyond_the_seed_spread():
    rising = [[1.0, 1.1, 0.9], [2.0, 2.1, 1.9], [2.05, 1.95, 2.0], [3.0, 3.1, 2.9]]
    t = trend(rising)
    assert t and t.state == "holds" and t.words == "1 < 2 ~ 2 < 3"          # the middle pair is a tie
    assert trend(rising[::-1], "down") and trend(rising, "down").state == "reversed"
    assert trend([[1.0, 2.0], [1.2, 1.9]]).state == "tied"                   # the seeds cannot order them
    assert trend([[1.0, 1.1], [2.0, 2.1], [1.5, 1.6]]).state == "reversed"   # a significant step back
    g = trends_decided("g", lambda name: "down" if name == "s" else "up")
    assert g({"g": {"n": rising, "s": rising[::-1]}}).ok
    tied = g({"g": {"n": [[1.0, 2.0], [1.2, 1.9]]}})
    assert not tied.ok and "n:" in tied.reason
    for bad, match in (([[1.0]], "at least 2"), ([[1.0], []], "at least 2")):
        with pytest.raises(ValueError, match=match):
            trend(bad)
    with pytest.raises(ValueError, match="direction"):
        trend(rising, "sideways")


def test_gates_compute_their_reasons():
    flat, falling = tenths([1.0] * 100), tenths(list(range(100, 0, -1)))
    assert flat == [1.0, 1.0] and falling[0] > falling[1]
    g = converged("t", 0.05)
    assert g({"t": flat}).ok and not g({"t": falling}).ok and "not converged" in g({"t": falling}).reason
    assert not g({"t": tenths(list(range(1, 101)))}).ok                    # still growing is not converged
    assert not g({"t": {"a": flat, "b": falling}}).ok and "(b)" in g({"t": {"a": flat, "b": falling}}).reason
    assert beats("m", "b", "ridge")({"m": 1.0, "b": 2.0}).ok
    assert not beats("m", "b", "ridge")({"m": 3.0, "b": 2.0}).ok
    assert exceeds_spread("e", "s", 2)({"e": -0.5, "s": 0.1}).ok
    assert not exceeds_spread("e", "s", 2)({"e": 0.1, "s": 0.1}).ok
    assert sampling_error("se", 0.05)({"se": 0.01}).ok and not sampling_error("se", 0.05)({"se": 0.1}).ok
    both = all_of(computed("x"), sampling_error("se", 0.05))({"x": 1.0, "se": 0.2})
    assert not both.ok and "closed-form" in both.reason and "0.2" in both.reason


def test_every_declared_claim_is_complete_and_unique():
    claims = all_claims()
    assert len(claims) >= 60
    for cid, c in claims.items():
        assert cid == c.id and cid.split(".")[0] in c.notebook.split("/")[0] + "synthesis"
        assert c.quote and c.where and c.paper and callable(c.test) and callable(c.gate), cid


def test_assess_stores_rows_and_renders_a_table(tmp_path, monkeypatch):
    from icl_core import claims as C
    c = claim(id="t.one", notebook="t/nb")
    monkeypatch.setitem(C.CLAIMS, "t.one", c)
    rec = Records(tmp_path / "r.json")
    rec["x"] = 0.25
    rows = C.assess(rec, "t/nb", "ci")
    assert [r["verdict"] for r in rows] == [REPRODUCED]
    assert Records.read_claims(tmp_path / "r.json")["t.one"]["measured"] == "x = 0.25"
    assert "| Fig. 1 (`t.one`) |" in table(rows) and repr(rows) == table(rows)
    assert "<td>Fig. 1 (<code>t.one</code>)</td>" in rows._repr_html_()


def test_no_verdict_is_typed_in_notebooks_or_tests():
    words = ("repro" "duced", "dif" "fers", "incon" "clusive", "not" " run")    # split: no literal here
    pattern = '"(' + "|".join(words) + ")"
    out = subprocess.run(["git", "grep", "-nE", pattern, "--", "book", "tests"], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    assert not out.stdout, out.stdout


def test_a_committed_result_trained_short_of_its_registered_budget_cannot_decide(tmp_path, monkeypatch):
    from icl_core import claims as C
    from icl_core.recipes import get_recipe
    from icl_core.results import Result
    registered = dict(get_recipe("cheng.figure3").configs["long_5"])
    c = claim(id="t.src", notebook="t/nb", source="cheng.figure3/long_5")
    monkeypatch.setitem(C.CLAIMS, "t.src", c)
    rec = Records(tmp_path / "r.json")
    rec["x"] = 0.25
    same = Result("cheng.figure3", "long_5", registered, {})
    assert C.trained_short_of_registration(same) == ""
    assert [r["verdict"] for r in C.assess(rec, "t/nb", "ci", results={c.source: same})] == [REPRODUCED]
    shorter = Result("cheng.figure3", "long_5", {**registered, "steps_by_pair": {"relu/linear": 15000}}, {})
    why = C.trained_short_of_registration(shorter)
    assert "steps_by_pair" in why and "15000" in why and "25000" in why
    row, = C.assess(rec, "t/nb", "ci", results={c.source: shorter})
    assert row["verdict"] == INCONCLUSIVE and why in row["gate"]
    progress = SimpleNamespace(scale="paper", provenance={})      # a long run's record: no recipe config
    assert C.trained_short_of_registration(progress) == ""
    assert [r["verdict"] for r in C.assess(rec, "t/nb", "ci", results={c.source: progress})] == [REPRODUCED]
    missing, = C.assess(rec, "t/nb", "ci", results={c.source: None})
    assert missing["verdict"] == NOT_RUN
