"""Recipes of the opening chapter, "In-context learning as regression"."""
from __future__ import annotations

from functools import partial

import numpy as np
import torch

from ..baselines import averaging, knn, ols, ridge
from ..evaluation import error_vs_context
from ..models import Transformer
from ..results import Result
from ..tasks import LinearRegression
from ..theory.linear import ols_excess_risk
from ..training import Curriculum, train
from . import register

GARG_STANDARD = dict(d_model=256, n_layers=12, n_heads=8)


@register(
    "foundations.error_vs_context",
    ci=dict(d=5, noise_std=0.0, d_model=64, n_layers=3, n_heads=2, steps=2500, batch_size=64,
            lr=1e-3, curriculum=False, n_eval=1280, seed=0),
    paper=dict(d=20, noise_std=0.0, **GARG_STANDARD, steps=500_000, batch_size=64, lr=1e-4,
               curriculum=True, n_eval=1280, seed=0),
    description="Garg et al. Fig. 2: a transformer trained on linear regression vs OLS, "
                "ridge, 3-NN and averaging, error/d against context length.",
)
def error_vs_context_recipe(cfg: dict, device) -> Result:
    """Train a decoder transformer (interleaved x/y tokens, Garg et al.) on Gaussian linear
    regression and compare it with the baselines on the same 1280 prompts.

    Paper scale follows Garg et al. (d=20, 12 layers, width 256, 8 heads, batch 64, Adam 1e-4,
    500k steps, curriculum 5->20 dims and 11->41 points every 2000 steps). Deviations: no
    positional embedding (the book's transformer has none; the causal mask still tells
    positions apart), and evaluation prompts of 2d+1 points as in their plots.
    ci scale: d=5, 3 layers of width 64, lr 1e-3, 2500 steps, no curriculum.
    """
    d, sigma = cfg["d"], cfg["noise_std"]
    n_points = 2 * d + 1
    sampler = LinearRegression(d, noise_std=sigma)
    torch.manual_seed(cfg["seed"])
    model = Transformer(d, cfg["d_model"], cfg["n_layers"], cfg["n_heads"])
    curriculum = Curriculum.garg(d, n_points) if cfg["curriculum"] else None
    fit = train(model, sampler, cfg["steps"], cfg["batch_size"], cfg["lr"], seed=cfg["seed"],
                n_points=n_points, curriculum=curriculum, device=device)
    lam = max(sigma ** 2, 1e-3)  # posterior mean for w ~ N(0, I); tiny ridge when noiseless
    model.cpu()
    curves = error_vs_context(
        {"transformer": model, "ols": ols, "ridge": partial(ridge, lam=lam),
         "3-nn": partial(knn, k=3), "averaging": averaging},
        sampler, n_points, n_prompts=cfg["n_eval"], seed=cfg["seed"] + 1)
    theory = np.array([ols_excess_risk(n, d, sigma) / d if n not in range(d - 1, d + 2)
                       else np.nan for n in range(n_points)])
    arrays = {"n": curves["ols"].n, "losses": fit.losses, "ols_theory": theory}
    for name, c in curves.items():
        arrays.update({f"{name}/mean": c.mean, f"{name}/lo": c.lo, f"{name}/hi": c.hi})
    metrics = {f"{name}_at_n{k}": c.at(k) for name, c in curves.items() for k in (d, 2 * d)}
    metrics.update(final_loss=float(np.mean(fit.losses[-100:])), train_wall_s=fit.wall_time_s,
                   n_params=sum(p.numel() for p in model.parameters()))
    return Result("foundations.error_vs_context", "", cfg, metrics, arrays)
