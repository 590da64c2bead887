import json
import subprocess
import sys

import numpy as np
import pytest

from icl_core import Records, Result
from icl_core.recipes import config, get_recipe, run
from icl_core.results import provenance


def test_result_roundtrip(tmp_path):
    r = Result("x", "ci", {"a": 1}, {"m": np.float64(0.5)}, {"curve": np.arange(4.0)},
               provenance("cpu", 1.234, {"seed": 3}, command="python -m icl_core run x"))
    r.save(tmp_path / "out")
    back = Result.load(tmp_path / "out")
    assert back.metrics == {"m": 0.5} and np.array_equal(back.arrays["curve"], np.arange(4.0))
    prov = back.provenance
    for key in ("command", "git_sha", "versions", "device", "wall_time_s", "seeds"):
        assert key in prov
    assert prov["seeds"] == {"seed": 3} and prov["wall_time_s"] == 1.234
    assert not list((tmp_path / "out").glob("*.tmp"))
    with pytest.raises(FileNotFoundError):
        Result.load(tmp_path / "missing")


def test_records(tmp_path):
    rec = Records(tmp_path / "r.json", notebook="nb")
    rec["a"] = np.array([1.0, 2.0])
    rec["b"] = np.float32(0.25)
    assert Records.read(tmp_path / "r.json") == {"a": [1.0, 2.0], "b": 0.25}
    assert json.loads((tmp_path / "r.json").read_text())["meta"] == {"notebook": "nb"}


def test_recipe_registry_and_bad_arguments():
    assert get_recipe("foundations.error_vs_context").configs["paper"]["steps"] == 500_000
    with pytest.raises(ValueError, match="recipe must be one of"):
        get_recipe("nope")
    with pytest.raises(ValueError, match="scale must be one of"):
        config("foundations.error_vs_context", "huge")
    with pytest.raises(ValueError, match="unknown config keys"):
        config("foundations.error_vs_context", "ci", width=3)


def test_run_recipe_tiny(tmp_path):
    r = run("foundations.error_vs_context", "ci", device="cpu", out=tmp_path / "r",
            steps=3, n_eval=32, d=3, d_model=16, n_layers=1)
    assert r.metrics["ols_at_n6"] < 1e-8
    assert (tmp_path / "r" / "result.json").exists()
    assert Result.load(tmp_path / "r").provenance["device"] == "cpu"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "icl_core", *args], capture_output=True, text=True)


def test_cli_list_and_errors(tmp_path):
    out = cli("list")
    assert out.returncode == 0 and "foundations.error_vs_context" in out.stdout and "paper" in out.stdout
    bad = cli("run", "nope")
    assert bad.returncode == 2 and "recipe must be one of" in bad.stderr
    bad_scale = cli("run", "foundations.error_vs_context", "--scale", "huge")
    assert bad_scale.returncode == 2 and "scale must be one of" in bad_scale.stderr
    assert "mid" in cli("list").stdout  # a recipe's extra scale (chen.train) is listed
    only = cli("list", "collins")
    assert only.returncode == 0 and "collins.figure9" in only.stdout and "zhang" not in only.stdout
    assert "paper (" in only.stdout                                   # a committed result's wall time
    assert cli("list", "no-such-recipe").returncode == 2
    assert "steps" in cli("list", "zhang.training", "--configs").stdout
    assert "zhang.figure1" in cli("run", "--help").stdout             # run --help names the recipes
    bad_key = cli("run", "foundations.error_vs_context", "--set", "width=3", "--out", str(tmp_path))
    assert bad_key.returncode == 2 and "unknown config keys" in bad_key.stderr


def test_cli_run_writes_provenance(tmp_path):
    out = cli("run", "foundations.error_vs_context", "--device", "cpu", "--out", str(tmp_path / "r"),
              "--set", "steps=2", "--set", "n_eval=16", "--set", "d=2", "--set", "d_model=8",
              "--set", "n_layers=1", "--seed", "4")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) <= 3 and "python -m icl_core plot" in out.stdout   # a short summary
    prov = json.loads((tmp_path / "r" / "result.json").read_text())["provenance"]
    assert prov["command"].startswith("python -m icl_core run foundations.error_vs_context")
    assert prov["seeds"] == {"seed": 4}


def test_records_store_claim_rows(tmp_path):
    from icl_core import Records
    rec = Records(tmp_path / "r.json", notebook="x")
    rec["a"] = 1
    rec.set_claims([{"id": "p.c1", "verdict": "v", "measured": "m"}])
    assert set(Records.read_claims(tmp_path / "r.json")) == {"p.c1"} and Records.read(tmp_path / "r.json") == {"a": 1}
    rec["groups"] = {"by L": 1, "by sigma": 2, "by n": 3}          # read back in the order recorded
    assert list(Records.read(tmp_path / "r.json")["groups"]) == ["by L", "by sigma", "by n"]


def test_results_are_saved_as_a_unit_and_damage_is_named(tmp_path):
    r = Result("x", "ci", {}, {"m": 1.0}, {"a": np.arange(3.0)})
    r.save(tmp_path / "out")
    (tmp_path / "out" / "NOTE.md").write_text("provenance note")
    Result("x", "ci", {}, {"m": 2.0}, {"a": np.arange(4.0)}).save(tmp_path / "out")
    back = Result.load(tmp_path / "out")
    assert back.metrics == {"m": 2.0} and len(back.arrays["a"]) == 4
    assert (tmp_path / "out" / "NOTE.md").exists()                     # a folder's notes survive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]        # no temporary folder left
    (tmp_path / "out" / "arrays.npz").unlink()
    with pytest.raises(ValueError, match="arrays.npz is missing"):
        Result.load(tmp_path / "out")
    (tmp_path / "out" / "arrays.npz").write_bytes(b"junk")
    with pytest.raises(ValueError, match="arrays.npz is damaged"):
        Result.load(tmp_path / "out")
    (tmp_path / "out" / "result.json").write_text("{")
    with pytest.raises(ValueError, match="result.json is damaged"):
        Result.load(tmp_path / "out")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        Result("x", "ci", {}, {}).save(tmp_path / "file")


def test_run_checks_out_before_running_and_never_overwrites_silently(tmp_path, monkeypatch):
    from icl_core import recipes
    recipes._load_all()                 # the registry fills on first use: this test may run first on its worker
    calls = []
    monkeypatch.setattr(recipes.RECIPES["foundations.error_vs_context"], "fn",
                        lambda cfg, dev: calls.append(1) or Result("f", "", cfg, {}, {}))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        run("foundations.error_vs_context", "ci", out=tmp_path / "file")
    run("foundations.error_vs_context", "ci", out=tmp_path / "r")
    with pytest.raises(ValueError, match="already holds a result; a run with overrides"):
        run("foundations.error_vs_context", "paper", out=tmp_path / "r", steps=3)
    assert len(calls) == 1                                  # refused before any work
    run("foundations.error_vs_context", "ci", out=tmp_path / "r", overwrite=True)
    assert len(calls) == 2
    out = cli("run", "foundations.error_vs_context", "--out", str(tmp_path / "file"))
    assert out.returncode == 2 and "is a file" in out.stderr and "Traceback" not in out.stderr
    out = cli("run", "foundations.error_vs_context", "--out", str(tmp_path / "r"), "--set", "steps=3")
    assert out.returncode == 2 and "--overwrite" in out.stderr


def test_page_settings_and_scales_live_in_the_recipes():
    from icl_core.recipes import all_scales, page_config
    assert page_config("zhang/theory", "ci")["mc"] < page_config("zhang/theory", "paper")["mc"]
    assert {"ci", "paper", "mid"} <= set(all_scales()) and all_scales()[:2] == ["ci", "paper"]
    with pytest.raises(ValueError, match="notebook must be one of"):
        page_config("nope/theory", "ci")
    with pytest.raises(ValueError, match="scale must be one of"):
        page_config("zhang/theory", "huge")
    out = subprocess.run([sys.executable, "scripts/book.py", "execute", "--scale", "huge"],
                         capture_output=True, text=True)
    assert out.returncode != 0 and "--scale must be one of" in out.stderr


def test_cli_plot_draws_a_committed_result(tmp_path):
    out = cli("plot", "results/collins.figure5/paper", "--out", str(tmp_path / "f5.png"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "f5.png").stat().st_size > 10_000 and "collins.figure5" in out.stdout
    out = cli("plot", str(tmp_path / "nothing"))
    assert out.returncode == 2 and "no result.json" in out.stderr and "Traceback" not in out.stderr
