from functools import partial

import numpy as np
import pytest

from icl_core import LinearRegression, Transformer
from icl_core.baselines import averaging, ols, ridge
from icl_core.evaluation import bootstrap_ci, error_vs_context


def test_bootstrap_interval():
    rng = np.random.default_rng(0)
    errs = rng.exponential(size=(2000, 3))
    mean, lo, hi = bootstrap_ci(errs, n_boot=500)
    assert np.all(lo <= mean) and np.all(mean <= hi) and np.all(hi - lo > 0)
    assert np.allclose(mean, errs.mean(0))
    assert np.all(hi - lo < 0.2)       # about 3.3 standard errors of 1/sqrt(2000)
    m, l, h = bootstrap_ci(np.full((10, 2), 0.5), n_boot=50)
    assert np.allclose(m, 0.5) and np.allclose(l, 0.5) and np.allclose(h, 0.5)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(errs, level=1.5)


def test_error_vs_context_same_prompts_for_all_predictors():
    s = LinearRegression(3)
    curves = error_vs_context({"ols": ols, "ridge": partial(ridge, lam=1e-9), "avg": averaging},
                              s, n_points=8, n_prompts=300, batch_size=128, n_boot=50)
    assert set(curves) == {"ols", "ridge", "avg"}
    c = curves["ols"]
    assert c.n.tolist() == list(range(8))
    assert c.at(0) == pytest.approx(curves["avg"].at(0))        # both predict 0 with no data
    assert c.at(0) == pytest.approx(1.0, rel=0.2)               # E||w||^2 / d
    assert c.at(5) < 1e-8 and curves["ridge"].at(5) < 1e-6       # noiseless, n > d: exact
    with pytest.raises(ValueError, match="n must be one of"):
        c.at(8)


def test_error_vs_context_accepts_interleaved_models_only():
    s = LinearRegression(3)
    model = Transformer(3, 16, 1, 2)
    curves = error_vs_context({"tf": model}, s, n_points=5, n_prompts=20, n_boot=10)
    assert curves["tf"].mean.shape == (5,)
    with pytest.raises(ValueError, match="interleaved"):
        error_vs_context({"tf": Transformer(3, 16, 1, 2, layout="stacked")}, s, 5, n_prompts=4)
    with pytest.raises(ValueError, match="n_prompts"):
        error_vs_context({"ols": ols}, s, 5, n_prompts=0)
