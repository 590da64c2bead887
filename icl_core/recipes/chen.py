"""Recipes of the chapter on Chen, Zhao, Zou (NeurIPS 2024).

Stated choices where the paper is silent (the spec lists them): post-LN softmax encoder with
an MLP of width 4 d_model (GELU), no dropout, no positional encoding, keys and values
restricted to the context tokens (the theory's mask M; the query count then does not change
a query's prediction), MSE over all queries, fresh prompts every step from one data seed shared
by every model (the paper: "each model is trained ... with the same training dataset"),
pruning by each model's own head weights, evaluation at n = 10 with 1 query.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ..head_analysis import head_importance, head_weights, prune_to_top_heads
from ..models import Transformer
from ..prompts import derive_seed
from ..results import Result
from ..tasks import SparseLinearRegression
from ..training import train
from . import register


def model_name(h: int, L: int, noise_std: float, pruned: bool = False) -> str:
    """Key of a trained model in a ``chen.train`` result, e.g. ``"h4_L4_s0.1"``."""
    return f"h{h}_L{L}_s{noise_std:g}" + ("_pruned" if pruned else "")


def _build(cfg, h, L):
    return Transformer(cfg["d"], d_model=cfg["d_model"], n_layers=L, n_heads=h, norm="post",
                       layout="stacked")


def eval_prompts(cfg, noise_std, n_context=10, n_queries=1, n_prompts=None, tag=0, s=None):
    """The shared evaluation prompts (same seed for every model)."""
    task = SparseLinearRegression(cfg["d"], s or cfg["s"], noise_std)
    return task.sample(n_prompts or cfg["eval_prompts"], n_context + n_queries, n_context=n_context,
                       seed=derive_seed(cfg["seed"], 777, tag, int(round(1000 * noise_std))))


def _store(arrays, name, model):
    """Copy (not view: the model is pruned and fine-tuned afterwards) its weights in."""
    for k, v in model.state_dict().items():
        arrays[f"model/{name}/{k}"] = v.detach().float().clone().numpy()


def _checkpoint(cfg, name):
    return None if not cfg["checkpoint_dir"] else f"{cfg['checkpoint_dir']}/{name}.pt"


def _query_risk(model, prompt):
    with torch.no_grad():
        pred = model.predict(prompt)[:, 0]
    return float(((pred - prompt.y[:, prompt.n_context]) ** 2).mean()) - prompt.noise_std ** 2


@register(
    "chen.train",
    ci=dict(d=16, s=4, d_model=32, heads=[1, 4], layers=[2], noise_stds=[0.1], steps=300,
            batch_size=64, lr=1e-3, lr_final=0.1, n_context=12, n_queries=16, prune_steps=0,
            prune_lr=1e-4, eval_prompts=1024, grad_clip=None, checkpoint_dir=None, seed=0),
    paper=dict(d=16, s=4, d_model=256, heads=[1, 2, 4, 8], layers=[3, 4, 5, 6],
               noise_stds=[0.0, 0.1, 0.2, 0.4, 0.8], steps=320000, batch_size=64, lr=1e-4,
               lr_final=1.0, n_context=12, n_queries=4, prune_steps=60000, prune_lr=1e-4,
               eval_prompts=8192, grad_clip=None, checkpoint_dir=None, seed=0),
    mid=dict(d=16, s=4, d_model=64, heads=[1, 4], layers=[4], noise_stds=[0.1], steps=40000,
             batch_size=64, lr=1e-3, lr_final=0.05, n_context=12, n_queries=16, prune_steps=4000,
             prune_lr=1e-4, eval_prompts=8192, grad_clip=1.0, checkpoint_dir=None, seed=0),
    description="Chen et al. Sections 3 and 6: train encoders with h heads and L layers on "
                "sparse regression (d=16, s=4), prune the multi-head ones to layer 1 + one head "
                "per later layer and fine-tune; the weights are saved in the result.",
)
def train_recipe(cfg, device) -> Result:
    """Every ``(h, L, noise_std)`` model, trained on the same data stream; models with h > 1
    are then pruned by their own head weights (n = 10, 1 query) and fine-tuned for
    ``prune_steps`` steps at ``prune_lr``. The learning rate decays geometrically from ``lr``
    to ``lr * lr_final`` (``lr_final = 1``: constant, the paper's schedule). Weights are
    stored in the result's arrays as ``model/<name>/<parameter>`` (float32), losses as
    ``loss/<name>`` (every 100th step). The paper trains the five noise levels of one
    ``(h, L)`` as one batched ensemble; here they are trained one after another (on CPU the
    batched transformer is no faster, see ``benchmarks/``). ``grad_clip`` (mid scale: 1.0,
    a safety margin for its 10x larger learning rate) clips the global gradient norm;
    ``checkpoint_dir`` makes long runs resumable."""
    arrays, metrics, names = {}, {}, []
    decay = cfg["lr_final"] ** (1.0 / cfg["steps"]) if cfg["lr_final"] != 1 else None
    T = cfg["n_context"] + cfg["n_queries"]
    for L in cfg["layers"]:
        for sigma in cfg["noise_stds"]:
            task = SparseLinearRegression(cfg["d"], cfg["s"], sigma)
            test = eval_prompts(cfg, sigma)
            for h in cfg["heads"]:
                name = model_name(h, L, sigma)
                torch.manual_seed(derive_seed(cfg["seed"], h, L))
                model = _build(cfg, h, L)
                t0 = time.perf_counter()
                fit = train(model, task, cfg["steps"], batch_size=cfg["batch_size"], lr=cfg["lr"],
                            lr_decay=decay, seed=derive_seed(cfg["seed"], 1, int(1000 * sigma)),
                            n_points=T, n_queries=cfg["n_queries"], device=device,
                            grad_clip=cfg["grad_clip"], checkpoint_path=_checkpoint(cfg, name),
                            checkpoint_every=2000 if cfg["checkpoint_dir"] else 0)
                model = model.cpu().eval()
                metrics[f"{name}/train_s"] = time.perf_counter() - t0
                metrics[f"{name}/risk_n10"] = _query_risk(model, test)
                arrays[f"loss/{name}"] = fit.losses[::100]
                names.append(name)
                _store(arrays, name, model)
                if h == 1 or not cfg["prune_steps"]:
                    continue
                delta, _ = head_importance(model, test)
                kept = prune_to_top_heads(model, head_weights(delta))
                pname = model_name(h, L, sigma, pruned=True)
                metrics[f"{pname}/risk_before_finetune"] = _query_risk(model, test)
                model.train()
                fit = train(model, task, cfg["prune_steps"], batch_size=cfg["batch_size"],
                            lr=cfg["prune_lr"], seed=derive_seed(cfg["seed"], 2, int(1000 * sigma)),
                            n_points=T, n_queries=cfg["n_queries"], device=device,
                            grad_clip=cfg["grad_clip"], checkpoint_path=_checkpoint(cfg, pname),
                            checkpoint_every=2000 if cfg["checkpoint_dir"] else 0)
                model = model.cpu().eval()
                metrics[f"{pname}/risk_n10"] = _query_risk(model, test)
                metrics[f"{pname}/kept_heads"] = kept
                arrays[f"loss/{pname}"] = fit.losses[::100]
                names.append(pname)
                _store(arrays, pname, model)
    metrics["models"] = names
    return Result("chen.train", "", cfg, metrics, arrays)


def load_models(result: Result) -> dict:
    """``name -> Transformer`` (eval mode, CPU) rebuilt from a ``chen.train`` result."""
    cfg, models = result.config, {}
    for name in result.metrics["models"]:
        h, L = (int(part[1:]) for part in name.split("_")[:2])
        model = _build(cfg, h, L)
        prefix = f"model/{name}/"
        state = {k[len(prefix):]: torch.from_numpy(np.asarray(v)) for k, v in result.arrays.items()
                 if k.startswith(prefix)}
        model.load_state_dict(state)
        models[name] = model.eval()
    return models
