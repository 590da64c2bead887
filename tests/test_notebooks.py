"""Notebook regression tests: each notebook runs once under papermill at scale="ci"
(the ``executed_notebooks`` fixture; ``make book`` reuses the same execution) and the tests
assert on the numbers it recorded."""
import re

import jupytext
import nbformat
import pytest

import book


def test_every_notebook_is_in_the_toc_and_recorded(executed_notebooks):
    names = {book.rel(s) for s in book.notebooks()}
    assert {"book/foundations/theory", "book/foundations/experiments"} <= names
    assert set(executed_notebooks) == names
    for src in (book.ROOT / "book").rglob("*.md"):
        text = src.read_text()
        if text.startswith("---") and "kernelspec:" in text.split("---", 2)[1]:
            assert book.rel(src) in names, f"{src} is a notebook missing from _toc.yml"


@pytest.mark.parametrize("src", book.notebooks(), ids=book.rel)
def test_notebook_structure(src):
    nb = jupytext.read(src)
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = code[0].source
    assert "import icl_core" in first and "except ImportError" in first and "pip install" in first
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and re.search(r'^scale = "ci"', params[0].source, re.M)
    assert "records_path = None" in params[0].source
    assert not any(c.get("outputs") for c in code), "sources must not carry outputs"


@pytest.mark.parametrize("src", book.notebooks(), ids=book.rel)
def test_install_cell_is_silent_locally(src, executed_notebooks):
    ran = nbformat.read(book.executed_path(src), as_version=4)
    first = next(c for c in ran.cells if c.cell_type == "code")
    assert first.outputs == [], "the install cell must do nothing when icl_core is installed"


def test_colab_twins_in_sync():
    assert book.sync(check=True) == 0, "run `make sync` to regenerate the .ipynb twins"
    for src in book.notebooks():
        twin = nbformat.read(book.ipynb_twin(src), as_version=4)
        nbformat.validate(twin)
        assert not any(c.get("outputs") for c in twin.cells if c.cell_type == "code")
        assert twin.metadata.kernelspec.name == "python3"


# --- foundations/theory -----------------------------------------------------------------

def test_theory_layout_and_ridge_posterior(executed_notebooks):
    r = executed_notebooks["book/foundations/theory"]
    assert r["layout_max_abs_err"] == 0.0 and r["query_label_slot_abs_max"] == 0.0
    assert r["ridge_vs_posterior_max_abs_diff"] < 1e-10


def test_theory_ols_monte_carlo_within_5_percent(executed_notebooks):
    r = executed_notebooks["book/foundations/theory"]
    assert min(r["ols_mc_n"]) == 9                      # n >= d + 4 with d = 5
    assert len(r["ols_mc_rel_err"]) == len(r["ols_mc_n"]) >= 30
    assert r["ols_mc_max_rel_err"] < 0.05
    below = r["ols_mc_over_theory_below_d"]             # n <= d - 2: min-norm interpolator
    assert all(abs(v - 1) < 0.05 for v in below.values())


def test_theory_bayes_beats_ols(executed_notebooks):
    r = executed_notebooks["book/foundations/theory"]
    assert r["bayes_below_ols_all_n"] is True
    assert 0 < r["bayes_risk_at_d"] < 5.0               # finite at n = d, where OLS is infinite


# --- foundations/experiments ------------------------------------------------------------

def test_transformer_beats_averaging_and_3nn_at_2d(executed_notebooks):
    r = executed_notebooks["book/foundations/experiments"]
    assert r["d"] == 5
    assert r["transformer_at_2d"] < r["3-nn_at_2d"]
    assert r["transformer_at_2d"] < r["averaging_at_2d"]
    assert r["ols_at_2d"] < 1e-8                        # noiseless, n = 2d > d: OLS is exact


def test_training_reduced_the_loss(executed_notebooks):
    r = executed_notebooks["book/foundations/experiments"]
    assert r["final_train_loss"] < 0.75 * r["first_train_loss"]
