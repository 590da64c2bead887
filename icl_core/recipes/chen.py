"""Recipes of the chapter on Chen, Zhao, Zou (NeurIPS 2024).

Stated choices where the paper is silent (the spec lists them): post-LN softmax encoder with
an MLP of width 4 d_model (GELU), no dropout, no positional encoding, keys and values
restricted to the context tokens (the theory's mask M; the query count then does not change
a query's prediction), MSE over all queries, fresh prompts every step from one data seed shared
by every model (the paper: "each model is trained ... with the same training dataset"),
pruning by each model's own head weights, evaluation at n = 10 with 1 query.
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch

from ..head_analysis import (analyse_model, build_encoder, dominance, entropy, eval_prompts, head_importance,
                             head_weights, model_name, pprobe_references, prune_to_top_heads, query_risk)
from ..claims import Check, Gate, below, chapter, computed
from ..theory.chen import LRS, step_grid
from ..long_runs import LongRun, register_long_run
from ..prompts import derive_seed
from ..results import Result
from ..tasks import SparseLinearRegression
from ..training import train
from . import register, register_page


def _block_means(losses, block: int = 100) -> np.ndarray:
    """Mean training loss of each block of ``block`` steps (the last block may be shorter)."""
    losses = np.asarray(losses, dtype=float).ravel()
    return np.array([losses[i:i + block].mean() for i in range(0, len(losses), block)])


def _store(arrays, name, model):
    """Copy (not view: the model is pruned and fine-tuned afterwards) its weights in."""
    for k, v in model.state_dict().items():
        arrays[f"model/{name}/{k}"] = v.detach().float().clone().numpy()


def _checkpoint(cfg, name):
    return None if not cfg["checkpoint_dir"] else f"{cfg['checkpoint_dir']}/{name}.pt"


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
    ``loss/<name>`` (mean of each block of 100 steps). As in the paper, the noise levels of one
    ``(h, L)`` train together as one batched ensemble (:func:`~icl_core.training.train` with a
    list of models and samplers; each run follows exactly its own single-model trajectory, and
    ``train_s`` is the ensemble's wall time); pruned copies are fine-tuned the same way.
    ``grad_clip`` (mid scale: 1.0,
    a safety margin for its 10x larger learning rate) clips the global gradient norm;
    ``checkpoint_dir`` makes long runs resumable."""
    arrays, metrics, names = {}, {}, []
    decay = cfg["lr_final"] ** (1.0 / cfg["steps"]) if cfg["lr_final"] != 1 else None
    T = cfg["n_context"] + cfg["n_queries"]
    sigmas = cfg["noise_stds"]
    for L in cfg["layers"]:
        tasks = [SparseLinearRegression(cfg["d"], cfg["s"], s) for s in sigmas]
        tests = [eval_prompts(cfg, s) for s in sigmas]
        for h in cfg["heads"]:
            run_names = [model_name(h, L, s, seed=cfg["seed"]) for s in sigmas]
            models = []
            for _ in sigmas:             # the same initialisation for every noise level
                torch.manual_seed(derive_seed(cfg["seed"], h, L))
                models.append(build_encoder(cfg, h, L))
            t0 = time.perf_counter()
            fit = train(models, tasks, cfg["steps"], batch_size=cfg["batch_size"], lr=cfg["lr"],
                        lr_decay=decay, seed=[derive_seed(cfg["seed"], 1, int(1000 * s)) for s in sigmas],
                        n_points=T, n_queries=cfg["n_queries"], device=device,
                        grad_clip=cfg["grad_clip"], checkpoint_path=_checkpoint(cfg, "+".join(run_names)),
                        checkpoint_every=2000 if cfg["checkpoint_dir"] else 0)
            seconds = time.perf_counter() - t0
            losses = np.atleast_2d(fit.losses)
            models = [m.cpu().eval() for m in models]
            for k, (name, model) in enumerate(zip(run_names, models)):
                metrics[f"{name}/train_s"] = seconds
                metrics[f"{name}/risk_n10"] = query_risk(model, tests[k])
                arrays[f"loss/{name}"] = _block_means(losses[k])
                names.append(name)
                _store(arrays, name, model)
            if h == 1 or not cfg["prune_steps"]:
                continue
            pruned_names = [model_name(h, L, s, pruned=True, seed=cfg["seed"]) for s in sigmas]
            for k, (pname, model) in enumerate(zip(pruned_names, models)):
                delta, _ = head_importance(model, tests[k])
                metrics[f"{pname}/kept_heads"] = prune_to_top_heads(model, head_weights(delta))
                metrics[f"{pname}/risk_before_finetune"] = query_risk(model, tests[k])
                model.train()
            fit = train(models, tasks, cfg["prune_steps"], batch_size=cfg["batch_size"],
                        lr=cfg["prune_lr"], seed=[derive_seed(cfg["seed"], 2, int(1000 * s)) for s in sigmas],
                        n_points=T, n_queries=cfg["n_queries"], device=device,
                        grad_clip=cfg["grad_clip"], checkpoint_path=_checkpoint(cfg, "+".join(pruned_names)),
                        checkpoint_every=2000 if cfg["checkpoint_dir"] else 0)
            losses = np.atleast_2d(fit.losses)
            models = [m.cpu().eval() for m in models]
            for k, (pname, model) in enumerate(zip(pruned_names, models)):
                metrics[f"{pname}/risk_n10"] = query_risk(model, tests[k])
                arrays[f"loss/{pname}"] = _block_means(losses[k])
                names.append(pname)
                _store(arrays, pname, model)
    metrics["models"] = names
    return Result("chen.train", "", cfg, metrics, arrays)


@register(
    "chen.decoder",
    ci=dict(d=16, s=4, d_model=32, heads=[8], layers=[2], noise_stds=[0.1], steps=200,
            batch_size=64, lr=1e-3, lr_final=0.1, n_context=23, n_queries=1, prune_steps=0,
            prune_lr=1e-4, eval_prompts=1024, grad_clip=None, checkpoint_dir=None, decoder=True, seed=0),
    paper=dict(d=16, s=4, d_model=256, heads=[8], layers=[4, 5, 6], noise_stds=[0.0, 0.1, 0.2, 0.4, 0.8],
               steps=320000, batch_size=64, lr=1e-4, lr_final=1.0, n_context=23, n_queries=1,
               prune_steps=0, prune_lr=1e-4, eval_prompts=8192, grad_clip=None, checkpoint_dir=None,
               decoder=True, seed=0),
    description="Chen et al. Appendix G / Fig. 9: decoder-only (GPT-2-like, interleaved tokens, "
                "causal) models with 8 heads on prompts of 24 points, for the head assessment.",
)
def decoder_recipe(cfg, device) -> Result:
    """As ``chen.train`` with a pre-LN causal decoder on Garg et al.'s interleaved layout and
    24 points per prompt. Deviation: the loss covers every point's prediction, not only points
    8..24 (the paper's eq. G.1). The paper's footnote: smaller decoders "consistently failed to
    learn" the task, so the ci config only checks that the pipeline runs."""
    result = train_recipe(cfg, device)
    result.name = "chen.decoder"
    return result


def _gd_vs_pregd(cfg, s, noise_std, tag, correlation=0.0):
    from ..theory.chen import tuned_curves
    task = SparseLinearRegression(cfg["d"], s, noise_std, correlation=correlation)
    p = task.sample(cfg["tasks"], cfg["n"] + 1, n_context=cfg["n"],
                    seed=derive_seed(cfg["seed"], tag, int(1000 * noise_std), int(1000 * correlation)))
    ts = step_grid(cfg["max_steps"])
    return ts, tuned_curves(p.x, p.y, p.task["w"], cfg["n"], LRS, ts, cov=task.covariance())


@register(
    "chen.figure2c",
    ci=dict(d=16, s=4, n=10, noise_stds=[0.0, 0.1, 0.2, 0.4, 0.8], correlations=[0.0, 0.1, 0.2, 0.4],
            tasks=2000, max_steps=10000, seed=0),
    paper=dict(d=16, s=4, n=10, noise_stds=[0.0, 0.1, 0.2, 0.4, 0.8], correlations=[0.0, 0.1, 0.2, 0.4],
               tasks=10000, max_steps=10000, seed=0),
    description="Chen et al. Fig. 2c (pre-gd vs gd at each noise level), Fig. 10's rationale "
                "(s = d) and Fig. 11's correlated design, in closed form over the query.",
)
def figure2c_recipe(cfg, device) -> Result:
    """GD and pre-GD from 0 on the n context examples (Gaussian nonzeros, the experiments'
    prior), step size tuned on the paper's grid for the lowest mean risk over the steps;
    n = 10 (not stated in the paper; the spec's calibration against its axis floors).
    Risks are exact over the query (``||Sigma^{1/2}(u - w*)||^2``), Monte Carlo over tasks."""
    arrays, metrics = {}, {}
    for sigma in cfg["noise_stds"]:
        for s, tag, label in ((cfg["s"], 1, "sparse"), (cfg["d"], 2, "dense")):
            ts, out = _gd_vs_pregd(cfg, s, sigma, tag)
            for method, o in out.items():
                arrays[f"{label}/{method}/sigma{sigma:g}"] = o["curve"]
                metrics[f"{label}/{method}/sigma{sigma:g}/min"] = o["min"]
                metrics[f"{label}/{method}/sigma{sigma:g}/lr"] = o["lr"]
    for zeta in cfg["correlations"]:
        ts, out = _gd_vs_pregd(cfg, cfg["s"], 0.1, 3, correlation=zeta)
        for method, o in out.items():
            arrays[f"correlated/{method}/zeta{zeta:g}"] = o["curve"]
            metrics[f"correlated/{method}/zeta{zeta:g}/min"] = o["min"]
    arrays["steps"] = ts
    return Result("chen.figure2c", "", cfg, metrics, arrays)


@register(
    "chen.rates",
    ci=dict(d=16, s=4, noise_std=0.5, ns=[10, 20, 40, 100, 400], tasks=1000, max_steps=20000,
            lams=[1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 1e-4], alphas=[0.1, 0.03, 0.01, 0.003, 0.001],
            lasso_iters=2000, seed=0),
    paper=dict(d=16, s=4, noise_std=0.5, ns=[10, 20, 40, 100, 200, 400, 1000, 4000], tasks=4000,
               max_steps=100000, lams=[1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 1e-4],
               alphas=[0.1, 0.03, 0.01, 0.003, 0.001], lasso_iters=5000, seed=0),
    overparam=dict(d=64, s=4, noise_std=0.5, ns=[8, 16, 32, 48], tasks=1000, max_steps=20000,
                   lams=[1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 1e-4], alphas=[0.1, 0.03, 0.01, 0.003, 0.001],
                   lasso_iters=2000, seed=0),
    description="Theorem 5.3 in simulation: best-tuned pre-GD, GD, ridge, OLS and Lasso "
                "against n (isotropic x, +-1/sqrt(s) nonzeros), with OLS's exact risk.",
)
def rates_recipe(cfg, device) -> Result:
    """Excess risks ``||w_hat - w*||^2`` (Sigma = I) averaged over tasks, each estimator at
    its best setting per n (an oracle tuning, the same for every estimator): pre-GD and GD
    over the step-size grid and a log grid of step counts, ridge (normalised, App. F.2)
    over ``lams``, Lasso over ``alphas``. The ``overparam`` scale is Theorem 5.3's other regime,
    n < d (d = 64, n up to 48), where the rotation-invariant estimators cannot beat
    ``1 - n/d + sigma^2 n/d`` (a few CPU-minutes; committed)."""
    from ..baselines import lasso_weights, ols_weights
    from ..theory.chen import excess_risk, gd_path, pre_gd_weights, ridge_weights
    task = SparseLinearRegression(cfg["d"], cfg["s"], cfg["noise_std"], nonzero="rademacher")
    ts = step_grid(cfg["max_steps"], 30)
    curves = {k: [] for k in ("pre-gd", "gd", "ridge", "lasso", "ols")}
    for n in cfg["ns"]:
        p = task.sample(cfg["tasks"], n + 1, n_context=n, seed=derive_seed(cfg["seed"], 5, n))
        X, y, w = p.x[:, :n], p.y[:, :n], p.task["w"]
        best = lambda risks: float(np.nanmin(np.where(np.isfinite(risks), risks, np.nan)))  # noqa: E731
        curves["gd"].append(best([excess_risk(gd_path(X, y, lr, ts), w).mean(-1).numpy() for lr in LRS]))
        curves["pre-gd"].append(best([excess_risk(pre_gd_weights(p.x, p.y, n, lr, ts)[1], w).mean(-1).numpy()
                                      for lr in LRS]))
        curves["ridge"].append(best([float(excess_risk(ridge_weights(X, y, lam), w).mean())
                                     for lam in cfg["lams"]]))
        curves["lasso"].append(best([float(excess_risk(lasso_weights(X, y, a, cfg["lasso_iters"]), w).mean())
                                     for a in cfg["alphas"]]))
        curves["ols"].append(float(excess_risk(ols_weights(X, y), w).mean()))
    arrays = {k: np.array(v) for k, v in curves.items()}
    arrays["ns"] = np.array(cfg["ns"])
    metrics = {f"{k}/at_largest_n": float(v[-1]) for k, v in arrays.items() if k != "ns"}
    return Result("chen.rates", "", cfg, metrics, arrays)


@register(
    "chen.baselines",
    ci=dict(d=16, s=4, noise_stds=[0.1], ns=list(range(1, 26)), tasks=500,
            lams=[1.0, 0.1, 0.01, 0.001, 1e-4], alphas=[1.0, 0.1, 0.01, 0.001, 1e-4], lasso_iters=500,
            seed=0),
    paper=dict(d=16, s=4, noise_stds=[0.0, 0.1, 0.2, 0.4, 0.8], ns=list(range(1, 26)), tasks=4000,
               lams=[1.0, 0.1, 0.01, 0.001, 1e-4], alphas=[1.0, 0.1, 0.01, 0.001, 1e-4], lasso_iters=5000,
               seed=0),
    description="Chen et al. Fig. 1b / 3 baselines: OLS, ridge and Lasso (each at its best grid "
                "value per n) against the number of in-context examples.",
)
def baselines_recipe(cfg, device) -> Result:
    """Excess risk ``||w_hat - w*||^2`` of OLS (min-norm), ridge (scikit-learn's unnormalised
    lambda) and Lasso (scikit-learn's objective, FISTA) on Gaussian-nonzero tasks, the best
    of each grid per n (the paper: "tuned for the lowest risk"; per n is our reading).
    The OLS values at n in {d-1, d, d+1} are huge and seed-dependent (infinite in
    expectation): the plots clip them as the paper does."""
    from ..baselines import lasso_weights, ols_weights, ridge_weights
    from ..theory.chen import excess_risk
    arrays = {"ns": np.array(cfg["ns"])}
    for sigma in cfg["noise_stds"]:
        task = SparseLinearRegression(cfg["d"], cfg["s"], sigma)
        rows = {"ols": [], "ridge": [], "lasso": []}
        for n in cfg["ns"]:
            p = task.sample(cfg["tasks"], n + 1, n_context=n,
                            seed=derive_seed(cfg["seed"], 6, n, int(1000 * sigma)))
            X, y, w = p.x[:, :n].double(), p.y[:, :n].double(), p.task["w"]
            rows["ols"].append(float(excess_risk(ols_weights(X, y), w).mean()))
            rows["ridge"].append(min(float(excess_risk(ridge_weights(X, y, lam), w).mean())
                                     for lam in cfg["lams"]))
            rows["lasso"].append(min(float(excess_risk(lasso_weights(X, y, a, cfg["lasso_iters"]), w).mean())
                                     for a in cfg["alphas"]))
        for k, v in rows.items():
            arrays[f"{k}/sigma{sigma:g}"] = np.array(v)
    metrics = {f"{k}/at_n{cfg['ns'][-1]}": float(v[-1]) for k, v in arrays.items() if k != "ns"}
    return Result("chen.baselines", "", cfg, metrics, arrays)


# --- paper-scale encoders trained in pieces (icl_core.long_runs) ----------------------------
PAPER_PIECES = dict(d=16, s=4, d_model=256, L=4, noise_stds=[0.1], steps=320000, batch_size=64,
                    lr=1e-4, n_context=12, n_queries=4, prefetch=100, eval_prompts=8192,
                    ridge_lams=[1.0, 0.3, 0.1, 0.03, 0.01, 1e-3], lasso_alphas=[0.1, 0.03, 0.01, 0.003],
                    lasso_iters=2000, seed=0)
# training seed -> suffix of its runs' names (chen.train.paper-h{h}-L4<suffix>). Seed 2 was added when seed 1's
# h = 1 run finished the paper's 320,000 steps on the ridge plateau (see _set_aside): Figs. 1b and 2b need two
# seeds whose runs are past it. Seed 3 was added when seed 2's runs finished with Fig. 2b's gap within two standard
# errors over seeds 0 and 2 (0.67 and about 0.1): two seeds cannot decide it, a third may. Seed 4 was added when
# seed 3's h = 1 run finished the paper's 320,000 steps above its gate (past it from about 110,000 steps, it went
# back above ridge in a loss spike at update 219,099): seed 3 is set aside, as seed 1 was
PAPER_SEEDS = {0: "", 1: "-seed1", 2: "-seed2", 3: "-seed3", 4: "-seed4"}


def paper_run_name(h: int, seed: int) -> str:
    """The long run of the paper-scale Fig. 1 encoder with ``h`` heads and training ``seed`` (a key of
    :data:`PAPER_SEEDS`): ``paper-h{h}-L4<suffix>``, under ``chen.train``."""
    return f"paper-h{h}-L4{PAPER_SEEDS[seed]}"


def pruned_run_name(seed: int) -> str:
    """Fig. 1d's pruned fine-tune of training ``seed``'s 4-head encoder (:func:`paper_run_name`):
    ``paper-h4-L4<suffix>-pruned``, under ``chen.train``."""
    return paper_run_name(4, seed) + "-pruned"


def _piece_build(h):
    def build(cfg):
        models, tasks = [], []
        for s in cfg["noise_stds"]:      # the same initialisation for every noise level
            torch.manual_seed(derive_seed(cfg["seed"], h, cfg["L"]))
            models.append(build_encoder(cfg, h, cfg["L"]))
            tasks.append(SparseLinearRegression(cfg["d"], cfg["s"], s))
        kwargs = dict(batch_size=cfg["batch_size"], lr=cfg["lr"], n_points=cfg["n_context"] + cfg["n_queries"],
                      n_queries=cfg["n_queries"], prefetch=cfg["prefetch"], grad_clip=cfg.get("grad_clip"),
                      seed=[derive_seed(cfg["seed"], 1, int(1000 * s)) for s in cfg["noise_stds"]])
        return models, tasks, kwargs
    return build


def baseline_risks(cfg: dict, noise_std: float, n_context: int = 10) -> dict:
    """Excess query risk (query MSE minus sigma^2) of ridge and Lasso, each at its best grid
    value, on the shared evaluation prompts of :func:`eval_prompts` (n = ``n_context``)."""
    from ..baselines import lasso, ridge
    p = eval_prompts(cfg, noise_std, n_context=n_context)
    xc, yc, xq, yq = p.x[:, :n_context], p.y[:, :n_context], p.x[:, n_context:], p.y[:, n_context:]

    def risk(pred):
        return float(((pred - yq) ** 2).mean()) - noise_std ** 2
    return {"ridge": min(risk(ridge(xc, yc, xq, lam)) for lam in cfg["ridge_lams"]),
            "lasso": min(risk(lasso(xc, yc, xq, a, cfg["lasso_iters"])) for a in cfg["lasso_alphas"])}


PPROBE_PROMPTS, PPROBE_STEPS = 1024, 100    # Fig. 2b's P-probing at the end of every piece


def _piece_evaluate(h, pruned=False):
    """A piece's evaluation of each of its models: the excess risk at n = 10 beside tuned ridge
    and Lasso, and the analyses of Figs. 1c, 1d and 2b that read one model alone
    (:func:`~icl_core.head_analysis.analyse_model` on ``eval_prompts`` prompts; the head
    assessment only for h > 1), with P-probing's two references, so that every committed state
    carries its own analysis: ``<name>/head_delta`` (L, h), ``<name>/dominance_se`` (L,),
    ``<name>/probes`` (L + 1,),
    ``<name>/pprobe`` (101,), ``<name>/pprobe_lr``, ``<name>/pprobe_se``, and
    ``<name>/pprobe_ref/<raw x | Algorithm 1 (ideal)>`` as ``{curve, lr, se}``. ``pruned``: the
    models are pruned copies (names end ``_pruned``; no head assessment, their kept heads are
    recorded instead as ``<name>/kept_heads``, one per block after the first)."""
    def evaluate(models, cfg):
        out = {}
        for model, s in zip(models, cfg["noise_stds"]):
            name = model_name(h, cfg["L"], s, pruned=pruned, seed=cfg["seed"])
            out[f"{name}/risk_n10"] = query_risk(model, eval_prompts(cfg, s))
            for k, v in baseline_risks(cfg, s).items():
                out[f"{name}/{k}_n10"] = v
            an = analyse_model(model, cfg, s, n_prompts=cfg["eval_prompts"], pprobe_prompts=PPROBE_PROMPTS,
                               pprobe_steps=PPROBE_STEPS, assess_heads=h > 1 and not pruned)
            if pruned:
                out[f"{name}/kept_heads"] = [int(m.argmax()) for m in model.head_masks[1:]]
            elif h > 1:
                out[f"{name}/head_delta"] = an["delta"].tolist()
                out[f"{name}/dominance_se"] = an["dominance_se"].tolist()
            out[f"{name}/probes"] = an["probes"].tolist()
            out[f"{name}/pprobe"] = an["pprobe"].tolist()
            out[f"{name}/pprobe_lr"], out[f"{name}/pprobe_se"] = an["pprobe_lr"], an["pprobe_se"]
            for ref, pp in pprobe_references(cfg, s, PPROBE_PROMPTS, PPROBE_STEPS).items():
                out[f"{name}/pprobe_ref/{ref}"] = dict(pp, curve=pp["curve"].tolist())
        return out
    return evaluate


def _piece_names(h, pruned=False):
    return lambda cfg: [model_name(h, cfg["L"], s, pruned=pruned, seed=cfg["seed"]) for s in cfg["noise_stds"]]


# Fig. 1d's pruned transformer (Section 3): the finished 4-head model of a seed, all heads of layer 1
# kept and only the most important head of every later layer (by its committed head assessment,
# eq. 3.1), fine-tuned "with the same training data" for the paper's 60,000 steps (App. B) at Adam 1e-4
_SHAPE_KEYS = ("d", "s", "d_model", "L", "noise_stds", "seed")


def _pruned_build(cfg):
    """Models, samplers and training settings of a pruned fine-tune (``cfg["source"]``: the
    finished h = 4 run under ``chen.train``; ``cfg["source_folder"]``: where it is, default the
    committed one). Raises ValueError when the source is missing, unfinished, or of another shape."""
    from ..committed import find
    from ..long_runs import get_long_run, load_models, load_state
    folder = cfg.get("source_folder") or find("chen.train", cfg["source"],
                                              files=("state.pt", "progress.json", "run0.params.pt"))
    st = load_state(folder)
    if st is None:
        raise ValueError(f"source run chen.train.{cfg['source']} is not committed (looked in {folder}): "
                         "train it first")
    src_cfg = st["progress"]["config"]
    if st["step"] < src_cfg["steps"]:
        raise ValueError(f"source run chen.train.{cfg['source']} is at {st['step']:,} of {src_cfg['steps']:,} "
                         "steps: the paper prunes the trained model, so it must finish first")
    for k in _SHAPE_KEYS:
        if cfg[k] != src_cfg[k]:
            raise ValueError(f"{k} must equal the source run's ({src_cfg[k]!r}), got {cfg[k]!r}")
    src = get_long_run(f"chen.train.{cfg['source']}")
    loaded = load_models(src, folder, **{k: v for k, v in src_cfg.items() if k in src.config})
    metrics = st["progress"]["pieces"][-1]["metrics"]
    models = []
    for name, model in loaded.items():
        prune_to_top_heads(model, head_weights(np.array(metrics[f"{name}/head_delta"])))
        models.append(model.train())
    tasks = [SparseLinearRegression(cfg["d"], cfg["s"], s) for s in cfg["noise_stds"]]
    kwargs = dict(batch_size=cfg["batch_size"], lr=cfg["lr"], n_points=cfg["n_context"] + cfg["n_queries"],
                  n_queries=cfg["n_queries"], prefetch=cfg["prefetch"], grad_clip=cfg.get("grad_clip"),
                  seed=[derive_seed(cfg["seed"], 2, int(1000 * s)) for s in cfg["noise_stds"]])
    return models, tasks, kwargs


# A CPU probe for the schedule that leaves the ridge plateau: the committed mid models (width 64,
# lr 1e-3 decaying to 5e-5) stayed on it; this one keeps the learning rate constant (clipped at
# global norm 1, as mid) and is otherwise the paper's piece setting at width 64
PROBE_PIECES = dict(PAPER_PIECES, d_model=64, lr=1e-3, grad_clip=1.0, steps=100000)
# the same at the paper's learning rate 1e-4: the width-256 GPU models (Adam 1e-4) left the plateau by
# ~60k steps where the width-64 probe at 1e-3 did not by 94k; this one changes only the rate back
PROBE_LR_PIECES = dict(PROBE_PIECES, lr=1e-4, steps=320000)
for _h in (1, 4):
    for _name, _cfg, _what in (
            (paper_run_name(_h, 0), PAPER_PIECES,
             f"Chen et al. Fig. 1 encoder at the paper's scale (h={_h}, L=4, width 256, Adam 1e-4 constant, batch 64, "
             "320k steps, sigma=0.1), trained in pieces"),
            (paper_run_name(_h, 1), dict(PAPER_PIECES, seed=1),
             f"the same encoder (h={_h}, L=4) from a second seed (initialisation, training data and evaluation "
             "prompts all drawn anew): the seed spread Fig. 1b's h = 1 vs h = 4 gap is measured against"),
            (paper_run_name(_h, 2), dict(PAPER_PIECES, seed=2),
             f"the same encoder (h={_h}, L=4) from a third seed, trained because seed 1's h = 1 model finished the "
             "paper's 320,000 steps on the ridge plateau: Figs. 1b and 2b need two seeds past it"),
            (paper_run_name(_h, 3), dict(PAPER_PIECES, seed=3),
             f"the same encoder (h={_h}, L=4) from a fourth seed, trained because Fig. 2b's gap over seeds 0 and 2 "
             "stayed within two standard errors over the seeds once their runs finished: a third seed past the "
             "plateau may decide it"),
            (paper_run_name(_h, 4), dict(PAPER_PIECES, seed=4),
             f"the same encoder (h={_h}, L=4) from a fifth seed, trained because seed 3's h = 1 model finished the "
             "paper's 320,000 steps above its gate (it went back above ridge in a loss spike): seed 3 is set aside, "
             "as seed 1 was"),
            (f"probe-h{_h}-L4-w64", PROBE_PIECES,
             f"CPU probe: the Fig. 1 encoder (h={_h}, L=4) at width 64, Adam 1e-3 constant, clipped at 1, batch 64, "
             "sigma=0.1: does a constant learning rate leave the ridge plateau?"),
            (f"probe-h{_h}-L4-w64-lr1e-4", PROBE_LR_PIECES,
             f"CPU probe: the Fig. 1 encoder (h={_h}, L=4) at width 64 and the paper's Adam 1e-4 constant, clipped at "
             "1, batch 64, sigma=0.1: is it the width or the learning rate that keeps width 64 on the ridge plateau?")):
        register_long_run(LongRun(f"chen.train.{_name}", dict(_cfg), _piece_build(_h), _piece_evaluate(_h),
                                  _piece_names(_h), description=_what))
for _seed in PAPER_SEEDS:
    _source = paper_run_name(4, _seed)
    register_long_run(LongRun(
        f"chen.train.{pruned_run_name(_seed)}", dict(PAPER_PIECES, seed=_seed, steps=60000, source=_source,
                                             source_folder=None),
        _pruned_build, _piece_evaluate(4, pruned=True), _piece_names(4, pruned=True),
        description=f"Fig. 1d's pruned transformer: chen.train.{_source} once finished, all heads of layer 1 and "
                    "the most important head of each later layer kept (its committed head assessment), "
                    "fine-tuned 60,000 steps at Adam 1e-4 on the training distribution"))


# --- claims ------------------------------------------------------------------------------
CZZ = "Chen, Zhao, Zou (NeurIPS 2024)"
_TRAINED_SETTING = ("encoders with d_hid = 256, h in {1, 2, 4, 8}, L in {3, ..., 6}, Adam 1e-4, 320k steps at "
                    "batch 64, sigma in {0, ..., 0.8}, d = 16, s = 4")
_COMMITTED = "chen.train/committed"    # the committed trained models (mid, or paper once committed)
_MID = "width 64, 40k steps (lr 1e-3 decaying), sigma = 0.1 only, h in {1, 4}, pruned models fine-tuned 4k steps"


_czz = chapter("chen", CZZ)


def beyond_plateau(depth: int | None = None):
    """Gate of the trained-model claims: every analysed (unpruned) model is below tuned ridge
    at n = 10, i.e. it has left the ridge-level plateau and begun to use sparsity (the regime
    the paper's head analysis describes)."""
    def gate(v):
        ridge = v["baselines_n10"]["ridge"]
        risks = {k: r for k, r in v["trained_risk_n10"].items()
                 if not k.endswith("_pruned") and (depth is None or f"_L{depth}_" in k + "_")}
        worst = max(risks, key=risks.get)
        ok = risks[worst] < ridge
        return Gate(ok, f"{'every' if ok else 'not every'} trained model below tuned ridge at n = 10 "
                        f"(worst {worst}: {risks[worst]:.2f} vs ridge {ridge:.2f})")
    return gate


_czz("prop41", "theory", "Prop. 4.1",
     "There is a single linear-attention layer with h = d heads ... such that it implements Algorithm 1 (preprocessing)",
     below("prop41_max_abs", 1e-10),
     computed("prop41_max_abs"), ci_holds=True)
_czz("prop42", "theory", "Prop. 4.2",
     "single-head linear-attention layers stacked on H^(1) implement gradient descent on the preprocessed data",
     below("prop42_max_abs", 1e-10, extra=" over 5 layers; prediction = minus the query's label slot"),
     computed("prop42_max_abs"), ci_holds=True)
_czz("lemma_d1", "theory", "Lemma D.1",
     "max_j |r_hat_j - r_j| is of order sqrt(s log d / n)",
     lambda v: Check(abs(v["lemma_d1_slope"] + 0.5) < 0.05, f"log-log slope in n {v['lemma_d1_slope']:.3f} (-1/2 expected)"),
     computed("lemma_d1_slope"), ci_holds=True)
_czz("lemma_d2", "theory", "Lemma D.2",
     "if n >~ s log(d/delta) / beta^2 then P(|r_hat_i| >= |r_i| / 2 for all i in S) >= 1 - delta",
     lambda v: Check(v["lemma_d2_probs"][-1] >= 0.95
                     and all(b >= a - 0.03 for a, b in zip(v["lemma_d2_probs"], v["lemma_d2_probs"][1:])),
                     "P(event) at n = " + ", ".join(f"{n} ({n / v['lemma_d2_scale']:.1f} s log d / beta^2): {p:.3f}"
                                                  for n, p in zip(v["lemma_d2_ns"], v["lemma_d2_probs"]))
                     + " (rising to at least 0.95 is our reading of the unstated constant)"),
     computed("lemma_d2_probs"), setting="Sigma = I, s = 4 nonzeros +-1/sqrt(s) (beta = 1/sqrt(s)), d = 16, 500 tasks per n",
     ci_holds=True)
_BV_SETTING = ("Sigma = diag of 16 values from 0.25 to 4 (geometric; Thm. 5.1's diagonal Sigma), s = 4 nonzeros "
               "+-1/sqrt(s), sigma = 0.5, n = 64, eta = 1 / max lambda_max(Sigma~), t = 1 ... 20,000")
_czz("thm51_bias", "theory", "Thm. 5.1 (Lemma D.5, eq. D.5)",
     "Bias <~ I + II <= 1/(t beta^2) + 1/(eta t beta^2) <~ 1/(eta t beta^2)",
     lambda v: Check(v["bv_bias_falls"] and v["bv_bias_ratio_max"] < 1,
                     f"bias x eta t beta^2 at most {v['bv_bias_ratio_max']:.3g} over t = {v['bv_t_range'][0]} ... "
                     f"{v['bv_t_range'][1]} (constant 1: our reading of <~); bias falling at every step: {v['bv_bias_falls']}"),
     computed("bv_bias_ratio_max"), setting=_BV_SETTING)
_czz("thm51_variance", "theory", "Thm. 5.1 (Lemma D.6, eq. D.7)",
     "Variance = I + II <~ eta^2 t / n^2 ||R X^T eps||^2 + eta t log t / n^2 ||R X^T eps||^2 <~ eta t log t / n^2 ||R X^T eps||^2",
     lambda v: Check(v["bv_variance_rises"] and v["bv_var_ratio_max"] < 1,
                     f"variance / (eta t (1 + log t) ||R X^T eps||^2 / n^2) at most {v['bv_var_ratio_max']:.3g} over "
                     f"t = {v['bv_t_range'][0]} ... {v['bv_t_range'][1]} (constant 1: our reading of <~); variance rising "
                     f"at every step: {v['bv_variance_rises']}"),
     computed("bv_var_ratio_max"), setting=_BV_SETTING)
_czz("thm53", "theory", "Thm. 5.3",
     "pre-GD attains an excess risk of order s/n, while OLS, ridge and GD cannot beat sigma^2 d / n",
     lambda v: Check(v["rate_ratio_by_n"][str(v["rate_ns"][-1])] > 2.5,
                     f"ridge / pre-GD {v['rate_ratio_by_n'][str(v['rate_ns'][-1])]:.2f} at n = {v['rate_ns'][-1]} "
                     f"(d/s = 4); slopes pre-GD {v['rate_slopes']['pre-gd']:.2f}, ridge {v['rate_slopes']['ridge']:.2f}"),
     computed("rate_slopes"),
     deviations={"ci": "n up to 400 and d = 16: the theorem's sample-size conditions (n >= 4e4 already at t = 10) "
                       "are not met, so this checks the trend, not the bound"})
def _overparam_check(v):
    ns, d, s2 = v["op_ns"], v["op_d"], v["op_noise"] ** 2
    bound = [1 - n / d + s2 * n / d for n in ns]
    ridge_over = [r / b for r, b in zip(v["op_ridge"], bound)]
    pre_over = [p / b for p, b in zip(v["op_pre_gd"], bound)]
    holds = min(ridge_over) > 0.95 and min(pre_over[-1:]) < 0.6
    return Check(holds, f"d = {d}, n = {ns}: ridge / (1 - n/d + sigma^2 n/d) {[round(x, 2) for x in ridge_over]} "
                        f"(>= 0.95: the bound holds to Monte Carlo error); pre-GD / that bound {[round(x, 2) for x in pre_over]} "
                        "(< 0.6 at the largest n: pre-GD beats what ridge, GD and OLS can reach)")


_czz("thm53_overparam", "theory", "Thm. 5.3 (d >~ n)",
     "for d >~ n, OLS, ridge and GD have excess risk at least of order 1 - n/d + sigma^2 n/d, while pre-GD attains "
     "O~(sigma^2 (s/n + d s^2 / n^2)) [the over-parameterised regime]",
     _overparam_check, computed("op_ridge", what="Monte Carlo over tasks, each estimator at its best setting"),
     source="chen.rates/overparam",
     setting="x ~ N(0, I), s = 4 nonzeros +-1/sqrt(s), sigma = 0.5, d = 64, n in {8, 16, 32, 48}")
_czz("ols_risk", "theory", "Thm. 5.3 (lower bounds)",
     "OLS has excess risk sigma^2 d / (n - d - 1), infinite at the interpolation threshold",
     lambda v: Check(max(v["ols_formula_rel_err"].values()) < 0.05,
                     f"Monte Carlo within {100 * max(v['ols_formula_rel_err'].values()):.1f}% of the formula"),
     computed("ols_formula_rel_err"), ci_holds=True)
_czz("constructed_heads", "theory", "Sec. 4 (the chapter's own check of the construction)",
     "the first layer uses all its heads for preprocessing; each later layer uses its single head for a GD step",
     lambda v: Check(0.02 < v["constructed_layer1_weight_range"][0] and v["constructed_layer1_weight_range"][1] < 0.12,
                     f"first-layer head weights in [{v['constructed_layer1_weight_range'][0]:.3f}, "
                     f"{v['constructed_layer1_weight_range'][1]:.3f}] (1/d = 0.0625); every GD layer's head matters"),
     computed("constructed_layer1_weight_range"), ci_holds=True)

_OWN = "the chapter's own algorithmic check (pre-GD vs GD in closed form), not a trained-model figure"
_czz("fig2c", "experiments", "Fig. 2c",
     "pre-GD ... converges to a lower excess risk than GD (sparse linear regression, every noise level)",
     lambda v: Check(max(v["fig2c_ratio_by_sigma"].values()) < 0.9,
                     "best pre-GD / best GD: " + ", ".join(f"sigma {s}: {r:.2f}" for s, r in v["fig2c_ratio_by_sigma"].items())),
     computed("fig2c_ratio_by_sigma"), ci_holds=True)
_czz("pregd_dense", "experiments", "Sec. 5 (our check; cf. Fig. 10)",
     "the gain of pre-GD comes from sparsity (s << d): without it preprocessing has nothing to exploit",
     lambda v: Check(bool(v["fig10_pregd_not_better"]),
                     "pre-GD vs GD at s = d = 16: " + ", ".join(f"sigma {s}: {p:.2f} vs {g:.2f}"
                                                             for s, (g, p) in v["fig10_gd_pregd"].items())),
     computed("fig10_gd_pregd"), setting=_OWN, ci_holds=True)
_czz("pregd_correlated", "experiments", "App. G (our check; cf. Fig. 11)",
     "with correlated covariates (Sigma = I + zeta 11^T) the preprocessing still helps",
     lambda v: Check(all(v["fig11_pregd_better"].values()),
                     "pre-GD vs GD: " + ", ".join(f"zeta {z}: {p:.2f} vs {g:.2f}" for z, (g, p) in v["fig11_gd_pregd"].items())),
     computed("fig11_gd_pregd"), setting=_OWN, ci_holds=True)

_czz("fig1b", "experiments", "Fig. 1b",
     "With few examples the transformers beat OLS and ridge. More heads give lower excess risk",
     lambda v: Check(bool(v["fig1b_more_heads_better_every_seed"]),
                     f"at n = 10: h = 4 {v['fig1b_multi_single_mean'][0]:.2f}, h = 1 {v['fig1b_multi_single_mean'][1]:.2f} "
                     f"(seed means), ridge {v['baselines_n10']['ridge']:.2f}, Lasso {v['baselines_n10']['lasso']:.2f}; "
                     f"4 heads better in every seed: {v['fig1b_more_heads_better_every_seed']}"),
     beyond_plateau(4), setting=_TRAINED_SETTING, reduced={"mid": _MID}, source=_COMMITTED)
_czz("fig1c", "experiments", "Fig. 1c",
     "in the first layer no head distinctly outweighs the others ... there always exists a head that exhibits higher "
     "importance than others (later layers)",
     lambda v: Check(bool(v["fig1c_layer1_least_dominated_every_seed"]),
                     f"dominance max_j W per layer (sorted, seed-averaged): {[round(x, 2) for x in v['fig1c_dominance']]}; "
                     f"layer 1 least dominated in every seed: {v['fig1c_layer1_least_dominated_every_seed']}"),
     beyond_plateau(4), setting=_TRAINED_SETTING, reduced={"mid": _MID}, source=_COMMITTED)


def _fig1d_gate(v):
    plateau = beyond_plateau(4)(v)
    gap1 = v["fig1d_single_minus_original_last"]
    orig = v["fig1d_probes"]["h=1"][-1] - gap1
    ok = gap1 > 0.1 * orig
    cond = Gate(ok, f"1-head minus original at the last layer {gap1:+.3f} ({'>' if ok else '<='} 10% of the "
                    f"original's {orig:.2f}: {'the comparison is conditioned' if ok else 'too small to compare a pruning gap with'})")
    return Gate(plateau.ok and cond.ok, plateau.reason + "; " + cond.reason)


_czz("fig1d", "experiments", "Fig. 1d",
     "the pruned model's per-layer probes almost coincide with the original's, and both differ a lot from h = 1",
     lambda v: Check(v["fig1d_single_minus_original_last"] > 0
                     and abs(v["fig1d_pruned_minus_original_last"]) < 0.5 * v["fig1d_single_minus_original_last"],
                     f"last-layer probe: pruned - original {v['fig1d_pruned_minus_original_last']:+.3f}, "
                     f"1-head - original {v['fig1d_single_minus_original_last']:+.3f}"),
     _fig1d_gate, setting=_TRAINED_SETTING, reduced={"mid": _MID}, source=_COMMITTED)
_czz("fig2b", "experiments", "Fig. 2b",
     "The multi-head (h = 4, 8) first-layer features converge faster and to lower risk than h = 1 (P-probing)",
     lambda v: Check(bool(v["fig2b_multi_beats_single_every_seed"]),
                     "minimum excess risk: " + ", ".join(f"{k} {x:.2f}" for k, x in v["fig2b_min"].items())),
     beyond_plateau(4), setting=_TRAINED_SETTING, reduced={"mid": _MID + "; h = 8 not trained"}, source=_COMMITTED)
_czz("fig3", "experiments", "Fig. 3",
     "more heads give lower ICL error (across depths 3-6 and noise levels)",
     lambda v: Check(bool(v["fig3_more_heads_better_every_depth"]),
                     f"at n = 10 by depth {v['depths']}: " + "; ".join(f"h = {h} {[round(x, 2) for x in e]}"
                                                                     for h, e in v["fig3_err_by_depth"].items())),
     beyond_plateau(), setting=_TRAINED_SETTING, reduced={"mid": _MID + "; L in {3, 4}, one seed at L = 3"},
     source=_COMMITTED)
_czz("fig4", "experiments", "Fig. 4",
     "In most settings layer-1 heads contribute almost equally, and later layers always have one much larger weight",
     lambda v: Check(bool(v["fig4_layer1_least_dominated_every_depth"]),
                     "dominance per layer: " + "; ".join(f"L = {k}: {[round(x, 2) for x in d]}"
                                                        for k, d in v["fig4_dominance_by_depth"].items())),
     beyond_plateau(), setting=_TRAINED_SETTING,
     reduced={"mid": _MID + "; averaged over seeds, not noise levels"}, source=_COMMITTED)
_czz("fig5_8", "experiments", "Figs. 5-8",
     "In almost all cases pruned and original probes nearly coincide at every layer, and both differ a lot from h = 1",
     lambda v: Check(all(g1 > 0 and abs(gp) < 0.5 * g1 for gp, g1 in v["fig5_8_gaps_by_depth"].values()),
                     "last-layer probe [pruned - original, 1-head - original] by depth: "
                     + "; ".join(f"L = {k}: [{g[0]:+.2f}, {g[1]:+.2f}]" for k, g in v["fig5_8_gaps_by_depth"].items())),
     beyond_plateau(), setting=_TRAINED_SETTING, reduced={"mid": _MID + "; L in {3, 4}"}, source=_COMMITTED)
_czz("fig9", "experiments", "Fig. 9",
     "Same pattern as the encoder: uniform first layer, dominant head later (decoder-only models)",
     lambda v: Check(bool(v["fig9_layer1_least_dominated"]), "-"), beyond_plateau(),
     setting="decoders, d_hid = 256, h = 8, L in {4, 5, 6}, n = 24", source=_COMMITTED)
_czz("fig10_trained", "experiments", "Fig. 10",
     "with s = d the trained models with different head counts show no difference",
     lambda v: Check(bool(v["fig10_trained_no_difference"]), "-"), beyond_plateau(), setting=_TRAINED_SETTING + "; s = d",
     source=_COMMITTED)
_czz("fig11_trained", "experiments", "Fig. 11",
     "with a correlated design the trained models keep the head pattern",
     lambda v: Check(bool(v["fig11_trained_pattern"]), "-"), beyond_plateau(),
     setting=_TRAINED_SETTING + "; Sigma = I + zeta S", source=_COMMITTED)


def load_paper_runs() -> dict:
    """The committed paper-scale runs of Fig. 1b: training seed -> {heads: :func:`long_runs.load_state`
    of ``chen.train/paper-h{h}-L4<suffix>``, or None where nothing is committed} for :data:`PAPER_SEEDS`."""
    from ..committed import find
    from ..long_runs import load_state
    return {seed: {h: load_state(find("chen.train", paper_run_name(h, seed), files=("state.pt", "progress.json")))
                   for h in (1, 4)} for seed in PAPER_SEEDS}


def paper_pieces_labelled(runs: dict) -> dict:
    """The committed runs of :func:`load_paper_runs` by label ("h = 1", "h = 4, seed 1", ...)."""
    return {f"h = {h}" + (f", seed {seed}" if seed else ""): st
            for seed, by_h in runs.items() for h, st in by_h.items() if st is not None}


def _newest_metrics(st: dict, h: int) -> dict:
    """The newest committed piece's metrics of the one model of a paper-scale run (``st``:
    :func:`long_runs.load_state`, ``h`` its heads), keyed without the model's name."""
    cfg = st["progress"]["config"]
    prefix = model_name(h, cfg["L"], cfg["noise_stds"][0], seed=cfg["seed"]) + "/"
    return {k[len(prefix):]: x for k, x in st["progress"]["pieces"][-1]["metrics"].items() if k.startswith(prefix)}


def paper_pieces_lines(runs: dict) -> list[str]:
    """One line per committed run of :func:`load_paper_runs`: its step, its excess risk at n = 10
    beside tuned ridge and Lasso on the same prompts, and the machines its pieces ran on."""
    from ..long_runs import machine_kinds
    lines = []
    for seed, by_h in runs.items():
        for h, st in by_h.items():
            if st is None:
                continue
            m, pieces = _newest_metrics(st, h), st["progress"]["pieces"]
            lines.append(f"h = {h}, seed {seed}: step {st['step']:,}; excess risk at n = 10: {m['risk_n10']:.3f} "
                         f"(tuned ridge {m['ridge_n10']:.3f}, Lasso {m['lasso_n10']:.3f}); "
                         f"{len(pieces)} piece{'s' if len(pieces) > 1 else ''} on {machine_kinds(pieces)}")
    return lines


def paper_pieces_values(runs: dict) -> dict:
    """The record values of Fig. 1b's paper-scale runs, read from each run's newest committed
    piece. ``runs``: training seed -> {heads: :func:`long_runs.load_state` or None} for the h = 1
    and h = 4 runs of :data:`PAPER_SEEDS`; a seed counts once both its runs are committed, and
    seed 0 must be (else {}). Keys: ``paper_pieces_step`` (the lesser seed-0 run's step),
    ``_steps_total``, ``_risk`` ({"h1", "h4"} -> excess risk at n = 10, seed 0), ``_ridge``
    (tuned ridge on the same prompts); with two or more seeds also ``paper_pieces_seeds``: per
    seed {"seed", "step" (its lesser run's), "steps" ({"h1", "h4"} -> that run's step), "h1",
    "h4", "ridge"} (each seed draws its own evaluation prompts, so each has its own ridge), where
    both its newest pieces carry P-probing (Fig. 2b) its lowest point and its mean over the GD
    steps, ``pprobe_h1`` / ``pprobe_h4`` and ``pprobe_mean_h1`` / ``pprobe_mean_h4``, and where
    its h = 4 run's newest piece carries the head assessment (Fig. 1c) ``fig1c_gap`` /
    ``fig1c_gap_se`` (:func:`fig1c_gap`)."""
    seeds = []
    for seed, by_h in sorted(runs.items()):
        if not by_h or not all(by_h.values()):
            continue
        H = max(by_h)
        m = {h: _newest_metrics(st, h) for h, st in sorted(by_h.items())}
        seeds.append({"seed": seed, "step": min(st["step"] for st in by_h.values()),
                      "steps": {f"h{h}": st["step"] for h, st in sorted(by_h.items())},
                      "steps_total": by_h[H]["progress"]["pieces"][-1]["steps_total"],
                      **{f"h{h}": x["risk_n10"] for h, x in m.items()}, "ridge": m[H]["ridge_n10"]})
        if all("pprobe" in x for x in m.values()):
            for h, x in m.items():
                seeds[-1].update({f"pprobe_h{h}": min(x["pprobe"]), f"pprobe_mean_h{h}": float(np.mean(x["pprobe"]))})
        if "dominance_se" in m[H]:
            _, gap, se = fig1c_gap(dominance(head_weights(np.array(m[H]["head_delta"]))), m[H]["dominance_se"])
            seeds[-1].update({"fig1c_gap": gap, "fig1c_gap_se": se})
    if not seeds or seeds[0]["seed"] != 0:
        return {}
    first = seeds[0]
    out = {"paper_pieces_step": first["step"], "paper_pieces_steps_total": first["steps_total"],
           "paper_pieces_risk": {"h1": first["h1"], "h4": first["h4"]}, "paper_pieces_ridge": first["ridge"]}
    if len(seeds) > 1:
        out["paper_pieces_seeds"] = [{k: y for k, y in x.items() if k != "steps_total"} for x in seeds]
    return out


def pieces_records(pieces: dict) -> dict:
    """The record values of the paper-scale pieces' own analyses (:func:`_piece_evaluate`), read
    from each run's newest committed piece: ``pieces`` is ``heads -> long_runs.load_state`` for
    the h = 1 and h = 4 runs. Returns {} when a newest piece predates the analysis (its claims
    are then *not run*). Keys: ``pieces_analysis_step`` ({"h1": step, "h4": step}),
    ``pieces_fig1c_weights`` / ``_dominance`` / ``_dominance_se`` / ``_entropy`` (h = 4, per layer),
    ``pieces_fig1c_layer1_least_dominated``, ``pieces_probes`` (name -> (L + 1,)),
    ``pieces_pprobe`` / ``_lr`` / ``_se`` (name -> best curve, its step size, standard error at its
    lowest point; names "h=1", "h=4", "raw x", "Algorithm 1 (ideal)")."""
    m = {h: _newest_metrics(st, h) for h, st in pieces.items()}
    H = max(pieces)
    if "dominance_se" not in m[H] or any("pprobe" not in m[h] for h in pieces):
        return {}
    W = head_weights(np.array(m[H]["head_delta"]))
    D = dominance(W)
    curves = {f"h={h}": (m[h]["pprobe"], m[h]["pprobe_lr"], m[h]["pprobe_se"]) for h in sorted(pieces)}
    curves.update({k[len("pprobe_ref/"):]: (c["curve"], c["lr"], c["se"]) for k, c in m[H].items()
                   if k.startswith("pprobe_ref/")})
    return {"pieces_analysis_step": {f"h{h}": st["progress"]["pieces"][-1]["to_step"] for h, st in pieces.items()},
            "pieces_fig1c_weights": W.tolist(), "pieces_fig1c_dominance": D.tolist(),
            "pieces_fig1c_dominance_se": m[H]["dominance_se"],
            "pieces_fig1c_entropy": entropy(W).tolist(),
            "pieces_fig1c_layer1_least_dominated": bool(D[0] < D[1:].min()),
            "pieces_probes": {f"h={h}": m[h]["probes"] for h in sorted(pieces)},
            "pieces_pprobe": {k: c for k, (c, _, _) in curves.items()},
            "pieces_pprobe_lr": {k: lr for k, (_, lr, _) in curves.items()},
            "pieces_pprobe_se": {k: se for k, (_, _, se) in curves.items()}}


def paper_loss_rises(runs: dict, pruned: dict, window: int = 1000) -> dict:
    """The largest training-loss rise (:func:`long_runs.largest_loss_rise`, smoothed over ``window``
    updates) of every committed paper-scale run: ``runs`` as :func:`load_paper_runs`, ``pruned`` as
    :func:`load_pruned_runs`. Returns run name -> rise record, the Fig. 1b runs first."""
    from ..long_runs import largest_loss_rise
    states = {paper_run_name(h, seed): st for seed, by_h in runs.items() for h, st in by_h.items()}
    states.update({pruned_run_name(seed): st for seed, st in pruned.items()})
    return {name: largest_loss_rise(st["losses"][:, 0], window) for name, st in states.items() if st is not None}


def paper_loss_rise_lines(rises: dict) -> list[str]:
    """One line per run of :func:`paper_loss_rises`: the largest rise of its training loss (mean over
    the record's window of updates), from the lowest before it to the peak, the peak window's first
    update, and the mean over its last window."""
    return [f"{name}: training loss (mean over {r['window']:,} updates) rose at most {r['rise']:.3f}, "
            f"from {r['lowest']:.3f} to {r['peak']:.3f} (the {r['window']:,} updates from update {r['start']:,}); "
            f"{r['now']:.3f} over the last {r['window']:,} (to step {r['steps']:,})"
            for name, r in rises.items()]


def load_pruned_runs() -> dict:
    """Fig. 1d's committed pruned fine-tunes: training seed -> :func:`long_runs.load_state` of
    ``chen.train/paper-h4-L4<suffix>-pruned``, or None where nothing is committed."""
    from ..committed import find
    from ..long_runs import load_state
    return {seed: load_state(find("chen.train", pruned_run_name(seed),
                                  files=("state.pt", "progress.json"))) for seed in PAPER_SEEDS}


def pruned_pieces_values(runs: dict, pruned: dict) -> dict:
    """Fig. 1d's paper-scale records: ``runs`` as :func:`load_paper_runs`, ``pruned`` as
    :func:`load_pruned_runs`. Key ``pieces_fig1d_seeds``: one record per seed whose pruned run and
    both source runs are committed with probes, {"seed", "step" / "steps_total" (the pruned
    run's), "pruned", "h4", "h1" ((L + 1,) probe excess risks of the pruned, original 4-head and
    1-head model, read-in first)}; {} when no seed has one."""
    out = []
    for seed, st in sorted(pruned.items()):
        by_h = runs.get(seed) or {}
        if st is None or not all(by_h.get(h) for h in (1, 4)):
            continue
        m = {h: _newest_metrics(by_h[h], h) for h in (1, 4)}
        name = st["progress"]["run_names"][0]
        piece = st["progress"]["pieces"][-1]
        probes = piece["metrics"].get(f"{name}/probes")
        if probes is None or any("probes" not in x for x in m.values()):
            continue
        out.append({"seed": seed, "step": st["step"], "steps_total": piece["steps_total"], "pruned": probes,
                    "h4": m[4]["probes"], "h1": m[1]["probes"]})
    return {"pieces_fig1d_seeds": out} if out else {}


def _seed0(v) -> list:
    """Seed 0's runs as one record of :func:`paper_pieces_values`: the analysed state."""
    return [{"seed": 0, "step": v["paper_pieces_step"], **v["paper_pieces_risk"], "ridge": v["paper_pieces_ridge"]}]


def _all_seeds(v) -> list:
    """Every trained seed's record of :func:`paper_pieces_values` (one seed: seed 0's runs)."""
    return v.get("paper_pieces_seeds") or _seed0(v)


def _worst_model(x) -> str:
    """The key ("h1" or "h4") of the model with the higher excess risk in a seed's record."""
    return max(("h1", "h4"), key=x.get)


def _model_past_plateau(x, model: str) -> bool:
    """Whether ``model`` ("h1" or "h4") of a seed's record is clearly past the ridge plateau:
    excess risk at n = 10 below 0.9 x tuned ridge's on the same prompts."""
    return x[model] < 0.9 * x["ridge"]


def _past_plateau(x) -> bool:
    """Whether both models of a seed's record are clearly past the ridge plateau."""
    return _model_past_plateau(x, _worst_model(x))


def _unfinished(holds: bool) -> str:
    """What a gate says of a check on an unfinished run: it may confirm, never refute."""
    return (": unfinished, the check already holds" if holds
            else ": unfinished, and what does not hold yet may still come: only the last step can refute it")


def _se_over_seeds(a) -> np.ndarray:
    """Standard error of the mean over training seeds (axis 0 of ``a``, two seeds or more)."""
    a = np.asarray(a, dtype=float)
    return a.std(0, ddof=1) / math.sqrt(len(a))


def _model_step(x, model: str) -> int:
    """The step of ``model``'s ("h1" or "h4") own run in a seed's record (the seed's lesser
    step where the record has no per-run steps)."""
    return x.get("steps", {}).get(model, x["step"])


def _finished_on_plateau(x, total: int) -> list:
    """The models ("h1", "h4") of a seed's record whose run finished the paper's ``total`` steps
    still on the ridge plateau."""
    return [m for m in ("h1", "h4") if _model_step(x, m) >= total and not _model_past_plateau(x, m)]


def _set_aside(v) -> list:
    """The seeds with a model whose run finished the paper's budget still on the ridge plateau.
    The issue analyses a trained model only once it is past the plateau, and one that ends the
    paper's 320,000 steps on it never will be, so such a seed is set aside (the gate names it,
    with its own h = 1 vs h = 4 gap) and the next seed of :data:`PAPER_SEEDS` is trained in its
    place, without waiting for the seed's other run to finish. An unfinished run on the plateau
    is not set aside: it still fails the gate."""
    total = v["paper_pieces_steps_total"]
    return [x for x in _all_seeds(v) if _finished_on_plateau(x, total)]


def _seeds(v) -> list:
    """The seeds Figs. 1b and 2b are decided over: every trained seed but those :func:`_set_aside`."""
    aside = {x["seed"] for x in _set_aside(v)}
    return [x for x in _all_seeds(v) if x["seed"] not in aside]


def _set_aside_reason(x, total: int) -> str:
    """What the gate says of a seed :func:`_set_aside` (``x``: its record; ``total``: the paper's steps)."""
    m = max(_finished_on_plateau(x, total), key=x.get)             # the worse where both are
    return (f"seed {x['seed']} set aside: finished at {_model_step(x, m):,} steps with {m} on the ridge plateau "
            f"({x[m]:.3f}, not below 0.9 x ridge {0.9 * x['ridge']:.3f}; its gap h = 1 minus h = 4 "
            f"{x['h1'] - x['h4']:+.3f})")


def _pieces_decided(test, resolved=None, runs=_seed0):
    """Gate of the claims read off the paper-scale pieces' newest state: every run clearly past
    the ridge plateau (excess risk at n = 10 below 0.9 x tuned ridge's), and either training
    finished or the check already holds: an unfinished run can show the paper's pattern (at a
    reduced budget) but cannot show that it never appears, so a failing check stays
    inconclusive until the last step. ``runs``: ``values -> records`` of the seeds whose runs
    the claim reads ({"seed", "step", "h1", "h4", "ridge"}; seed 0's by default; for Figs. 1b and
    2b, which compare two trained models, :func:`_seeds`: every trained seed but those set aside,
    which the reason names). ``resolved``: ``values -> Gate``, a further condition (e.g. the effect
    beyond its sampling error)."""
    def gate(v):
        seeds, total = runs(v), v["paper_pieces_steps_total"]
        aside = _set_aside(v) if runs is _seeds else []
        before = "".join(_set_aside_reason(x, total) + "; " for x in aside)
        if not seeds:
            return Gate(False, before + "no seed left past the plateau: the next seed must be trained")
        if aside:
            before += f"decided over seed{'s' if len(seeds) > 1 else ''} {', '.join(str(x['seed']) for x in seeds)}; "
        tag = (lambda x: f"seed {x['seed']}") if len(seeds) + len(aside) > 1 else (lambda x: "")
        x = max(seeds, key=lambda x: x[_worst_model(x)] / x["ridge"])          # the least far past the plateau
        worst = _worst_model(x)
        left = _past_plateau(x)
        lesser = min(seeds, key=lambda x: x["step"])
        done = lesser["step"]
        holds = test(v).holds
        reason = before + ((f"{tag(x)} at step {x['step']:,}: " if tag(x) else "") +
                  f"worst {worst} {x[worst]:.3f} vs tuned ridge {x['ridge']:.3f} at n = 10 "
                  f"({'past' if left else 'not past'} the plateau: below 0.9 x ridge); the lesser run"
                  f"{', ' + tag(lesser) if tag(lesser) else ''} at {done:,} of {total:,} steps ({100 * done / total:.0f}%)")
        if done < total:
            reason += _unfinished(holds)
        ok = left and (done >= total or holds)
        if resolved is not None:
            extra = resolved(v)
            ok, reason = ok and extra.ok, reason + "; " + extra.reason
        return Gate(ok, reason)
    return gate


def _pprobe_seeds(v) -> list:
    """The records of :func:`_seeds` (the seeds not set aside) that carry P-probing (Fig. 2b),
    when two or more seeds do; else [] (seed 0's curves alone)."""
    seeds = [x for x in _seeds(v) if "pprobe_h1" in x]
    return seeds if len(seeds) > 1 else []


def _fig2b_pieces_test(v):
    c = v["pieces_pprobe"]
    lo = {k: min(x) for k, x in c.items()}
    mean = {k: float(np.mean(x)) for k, x in c.items()}
    seeds, over = _pprobe_seeds(v), ""
    if seeds:               # the models' points as means over the seeds; the references stay seed 0's
        for h in (1, 4):
            lo[f"h={h}"] = float(np.mean([x[f"pprobe_h{h}"] for x in seeds]))
            mean[f"h={h}"] = float(np.mean([x[f"pprobe_mean_h{h}"] for x in seeds]))
        over = f" (mean over {len(seeds)} seeds; the references seed 0's)"
    return Check(lo["h=4"] < lo["h=1"] and mean["h=4"] < mean["h=1"],
                 f"lowest excess risk over 100 GD steps: h = 4 {lo['h=4']:.3f}, h = 1 {lo['h=1']:.3f}; mean over the "
                 f"steps h = 4 {mean['h=4']:.3f}, h = 1 {mean['h=1']:.3f}{over}; raw x {lo['raw x']:.3f}, ideal "
                 f"Algorithm 1 {lo['Algorithm 1 (ideal)']:.3f} ({PPROBE_PROMPTS:,} prompts)")


def _beyond_2se(what: str, gap: float, se_a: float, se_b: float, kind: str = "SE") -> Gate:
    """Resolved when ``gap`` (a difference of two independent estimates with standard errors
    ``se_a``, ``se_b``) is larger in size than two standard errors of the difference."""
    err = math.hypot(se_a, se_b)
    ok = abs(gap) > 2 * err
    return Gate(ok, f"{what} {gap:+.3f} ({'beyond' if ok else 'within'} 2 {kind} {2 * err:.3f})")


def _gap_over_seeds(seeds: list, what: str, key) -> Gate:
    """The mean over ``seeds`` (records of ``paper_pieces_seeds``) of h = 1's value minus h = 4's
    (``key(h)``: the record's key) beyond two standard errors over the seeds."""
    vals = {h: [x[key(h)] for x in seeds] for h in (1, 4)}
    mean = {h: float(np.mean(x)) for h, x in vals.items()}
    se = {h: float(_se_over_seeds(x)) for h, x in vals.items()}
    return _beyond_2se(f"{what}, mean over {len(seeds)} seeds", mean[1] - mean[4], se[1], se[4], kind="SE over seeds")


def _one_seed(gap: str) -> Gate:
    """One seed per head count: a gap between the two models (``gap``: what it is, measured)
    cannot be told from the spread over training seeds, whatever its size against the sampling
    error of the evaluation, so it neither confirms nor refutes."""
    return Gate(False, f"{gap}; 1 seed per head count: no seed spread to measure it against (a second seed past "
                       "the plateau is needed)")


def _fig2b_pieces_resolved(v):
    """The lowest points of h = 1 and h = 4 apart by more than two standard errors over training
    seeds; with one seed (their standard errors over prompts, unpaired, shown) never resolved:
    like Fig. 1b's, the gap is between two trained models, so the seed spread is part of it."""
    seeds = _pprobe_seeds(v)
    if seeds:
        return _gap_over_seeds(seeds, "h = 1 minus h = 4 at their lowest points", lambda h: f"pprobe_h{h}")
    lo, se = {k: min(x) for k, x in v["pieces_pprobe"].items()}, v["pieces_pprobe_se"]
    return _one_seed(_beyond_2se("h = 1 minus h = 4 at their lowest points", lo["h=1"] - lo["h=4"], se["h=1"],
                                 se["h=4"], kind="SE over prompts").reason)


def fig1c_gap(D, se) -> tuple:
    """Fig. 1c's contrast in one h = 4 model: the least dominated later layer's dominance minus
    layer 1's (positive: layer 1 is the least dominated, the paper's pattern). ``D``: (L,)
    dominance max_j W per layer (:func:`head_analysis.dominance`), ``se``: (L,) their bootstrap
    standard errors. Returns (that layer's index from 0, the gap, its standard error)."""
    k = 1 + int(np.argmin(D[1:]))
    return k, float(D[k] - D[0]), float(math.hypot(se[0], se[k]))


def _fig1c_seeds(v) -> list:
    """The seed records of :func:`paper_pieces_values` that Fig. 1c is decided over: seed 0 (held
    to :func:`_pieces_decided`) and every other seed whose h = 4 run finished the paper's budget
    past the plateau (Fig. 1c reads the h = 4 model alone, so a seed set aside for its h = 1 model
    counts here), each with its layer gap."""
    total = v["paper_pieces_steps_total"]
    return [x for x in v.get("paper_pieces_seeds", []) if "fig1c_gap" in x and
            (x["seed"] == 0 or (_model_step(x, "h4") >= total and _model_past_plateau(x, "h4")))]


def _fig1c_pieces_resolved(v):
    """Layer 1's dominance and the least dominated later layer's apart by more than two
    bootstrap standard errors (over the 8,192 prompts) in seed 0, and the gap's mean over the
    seeds of :func:`_fig1c_seeds` beyond two standard errors over them: the pattern of one
    trained model may be its seed's, so with one seed it neither confirms nor refutes."""
    D, se = v["pieces_fig1c_dominance"], v["pieces_fig1c_dominance_se"]
    k, gap, err = fig1c_gap(D, se)
    first = _beyond_2se(f"seed 0: least dominated later layer ({k + 1}) minus layer 1", gap, err, 0.0,
                        kind="bootstrap SE")
    seeds = _fig1c_seeds(v)
    if len(seeds) < 2:
        return Gate(False, f"{first.reason}; 1 seed: the layers of one trained model, no seed spread to measure "
                           "them against (a second seed's h = 4 model, finished past the plateau, is needed)")
    gaps = [x["fig1c_gap"] for x in seeds]
    each = ", ".join(f"seed {x['seed']} {x['fig1c_gap']:+.3f} (2 bootstrap SE {2 * x['fig1c_gap_se']:.3f})"
                     for x in seeds)
    over = _beyond_2se(f"that gap per seed {each}; mean over {len(seeds)} seeds", float(np.mean(gaps)),
                       float(_se_over_seeds(gaps)), 0.0, kind="SE over seeds")
    return Gate(first.ok and over.ok, f"{first.reason}; {over.reason}")


def _fig1c_pieces_test(v):
    seeds = _fig1c_seeds(v)
    mean = float(np.mean([x["fig1c_gap"] for x in seeds])) if len(seeds) > 1 else None
    over = (f"; least dominated later layer minus layer 1, mean over {len(seeds)} seeds {mean:+.3f}"
            if mean is not None else "")
    return Check(bool(v["pieces_fig1c_layer1_least_dominated"]) if mean is None else mean > 0,
                 f"h = 4, seed 0, step {v['pieces_analysis_step']['h4']:,}: dominance max_j W per layer "
                 f"{[round(x, 2) for x in v['pieces_fig1c_dominance']]}, normalised entropy "
                 f"{[round(x, 2) for x in v['pieces_fig1c_entropy']]}; layer 1 least dominated: "
                 f"{v['pieces_fig1c_layer1_least_dominated']}{over}")


def _fig1d_seeds(v) -> list:
    """The records of ``pieces_fig1d_seeds`` whose seed Figs. 1b and 2b are decided over
    (:func:`_seeds`: past the plateau, not set aside; Fig. 1d too compares the 1-head model)."""
    keep = {x["seed"] for x in _seeds(v)}
    return [x for x in v["pieces_fig1d_seeds"] if x["seed"] in keep]


def _fig1d_layers(seeds: list) -> tuple:
    """Per seed and block (the read-in, the same input for every model, left out) the margin, half
    the 1-head model's probe gap to the original 4-head one less the pruned model's distance to the
    original (positive: the pruned model is closer to the original than to the 1-head model; the
    mid claim's criterion), and the 1-head minus pruned gap: two (seeds, L) arrays."""
    P, O, S = (np.array([x[k] for x in seeds])[:, 1:] for k in ("pruned", "h4", "h1"))
    return 0.5 * (S - O) - np.abs(P - O), S - P


def _fig1d_pieces_test(v):
    seeds = _fig1d_seeds(v) or v["pieces_fig1d_seeds"]
    margin, gap = (a.mean(0) for a in _fig1d_layers(seeds))
    over = f"mean over {len(seeds)} seeds" if len(seeds) > 1 else f"seed {seeds[0]['seed']}"
    last = {k: float(np.mean([x[k][-1] for x in seeds])) for k in ("pruned", "h4", "h1")}
    return Check(bool((margin > 0).all() and (gap > 0).all()),
                 f"probe excess risk after the last block: pruned {last['pruned']:.3f}, original h = 4 "
                 f"{last['h4']:.3f}, h = 1 {last['h1']:.3f}; per block, half the 1-head gap minus the pruned "
                 f"distance {[round(float(x), 3) for x in margin]}, h = 1 minus pruned "
                 f"{[round(float(x), 3) for x in gap]} ({over})")


def _fig1d_pieces_gate(v):
    """Decided over :func:`_fig1d_seeds` once every one's runs (sources and pruned fine-tune) have
    finished, or earlier where the check already holds. The claim has two parts, at every block:
    "almost the same" as the original (the margin) and "better" than one head (the 1-head model's
    gap to the pruned one), each read at the block where it is smallest. Both compare trained
    models, so with one seed it neither confirms nor refutes. Confirming it needs both parts
    positive beyond two standard errors over the seeds. Refuting it (finished runs only) needs one
    part negative beyond them, whatever the other, since a claim fails with either of its parts."""
    seeds = _fig1d_seeds(v)
    if not seeds:
        return Gate(False, "no committed pruned run of a seed past the plateau (Figs. 1b and 2b's seeds)")
    src = {x["seed"]: x for x in _seeds(v)}
    total = v["paper_pieces_steps_total"]
    lesser = min(seeds, key=lambda x: x["step"] / x["steps_total"])
    unfinished = [x["seed"] for x in seeds if src[x["seed"]]["step"] < total]
    reason = (f"pruned runs: the lesser, seed {lesser['seed']}, at {lesser['step']:,} of {lesser['steps_total']:,} "
              f"fine-tuning steps")
    if unfinished:
        reason += f"; seed {', '.join(map(str, unfinished))}: source runs unfinished"
    plateau = [x["seed"] for x in seeds if not _past_plateau(src[x["seed"]])]
    if plateau:
        return Gate(False, reason + f"; seed {', '.join(map(str, plateau))}: a source model still on the ridge plateau "
                                    "(not below 0.9 x ridge at n = 10)")
    holds = _fig1d_pieces_test(v).holds
    done = lesser["step"] >= lesser["steps_total"] and not unfinished
    if not done:
        reason += _unfinished(holds)
    if len(seeds) < 2:
        return Gate(False, reason + "; 1 seed: the pruned, original and 1-head models of one seed, no seed spread to "
                                    "measure them against (a second seed's pruned run is needed)")
    margin, gap = _fig1d_layers(seeds)
    k, q = int(np.argmin(margin.mean(0))), int(np.argmin(gap.mean(0)))
    mean_a, mean_b = float(margin[:, k].mean()), float(gap[:, q].mean())
    a = _beyond_2se(f"margin at block {k + 1}, mean over {len(seeds)} seeds", mean_a,
                    float(_se_over_seeds(margin[:, k])), 0.0, kind="SE over seeds")
    b = _beyond_2se(f"h = 1 minus pruned at block {q + 1}, mean over {len(seeds)} seeds", mean_b,
                    float(_se_over_seeds(gap[:, q])), 0.0, kind="SE over seeds")
    if holds:
        return Gate(a.ok and b.ok, f"{reason}; {a.reason}; {b.reason}")
    failed = [name for name, x, m in (("the margin", a, mean_a), ("h = 1 minus pruned", b, mean_b)) if m <= 0 and x.ok]
    why = (f"; {' and '.join(failed)} below zero beyond the seed spread refutes the claim whatever the other part"
           if done and failed else "")
    return Gate(done and bool(failed), f"{reason}; {a.reason}; {b.reason}{why}")


_PIECES_RUNS = ("sigma = 0.1 only, L = 4, h in {1, 4}; Adam's first moment restarts at each piece, on a GPU or a "
                "CPU core (compact checkpoints)")
_PIECES_SETTING = "one seed, " + _PIECES_RUNS
# Figs. 1b and 2b compare two trained models (h = 1, h = 4): decided over the committed seeds
_PIECES_SEEDS = ("the paper trains one seed per configuration (\"We fix the random seed such that each model is "
                 "trained and evaluated with the same training and evaluation dataset\"); here each seed does the "
                 "same, and the gap is decided over the seeds whose runs are committed (the gate counts them), "
                 "less any seed whose runs finished the paper's 320,000 steps with a model still on the ridge "
                 "plateau: the issue analyses a model only past it, so such a seed is set aside (the gate names "
                 "it, with its own gap) and another seed is trained in its place; "
                 + _PIECES_RUNS)
_PIECES_BUDGET = "the newest committed pieces (steps in the gate) of the paper's 320,000"


def _fig1b_pieces_test(v):
    seeds = _seeds(v) or _all_seeds(v)       # every seed set aside: the gate fails, the numbers are still shown
    r = {k: float(np.mean([x[k] for x in seeds])) for k in ("h1", "h4", "ridge")}
    over = f" (mean over {len(seeds)} seeds)" if len(seeds) > 1 else ""
    return Check(r["h4"] < r["h1"] < r["ridge"], f"at n = 10: h = 4 {r['h4']:.3f}, h = 1 {r['h1']:.3f}, "
                                                 f"tuned ridge {r['ridge']:.3f}{over} (8,192 prompts)")


def _fig1b_pieces_resolved(v):
    """The h = 1 vs h = 4 gap against the spread over training seeds (:func:`_seeds`: the seeds
    not set aside; each is held to the plateau and unfinished rules of :func:`_pieces_decided`).
    With one seed per head count there is no spread to measure the gap against, so the claim can
    neither be confirmed nor refuted."""
    seeds = _seeds(v)                         # never empty here: the gate stops before this when it is
    if len(seeds) < 2:
        return _one_seed(f"the gap h = 1 minus h = 4 {seeds[0]['h1'] - seeds[0]['h4']:+.3f}")
    return _gap_over_seeds(seeds, "h = 1 minus h = 4", lambda h: f"h{h}")


_czz("fig1b_paper", "experiments", "Fig. 1b",
     "With few examples the transformers beat OLS and ridge. More heads give lower excess risk",
     _fig1b_pieces_test, _pieces_decided(_fig1b_pieces_test, _fig1b_pieces_resolved, runs=_seeds),
     setting=_TRAINED_SETTING, source="chen.train/paper-L4",
     deviations={"paper": _PIECES_SEEDS},
     reduced={"paper": _PIECES_BUDGET})
_czz("fig1c_paper", "experiments", "Fig. 1c",
     "in the first layer no head distinctly outweighs the others ... there always exists a head that exhibits higher "
     "importance than others (later layers)",
     _fig1c_pieces_test, _pieces_decided(_fig1c_pieces_test, _fig1c_pieces_resolved), setting=_TRAINED_SETTING, source="chen.train/paper-L4",
     deviations={"paper": _PIECES_SETTING + "; not averaged over noise levels"}, reduced={"paper": _PIECES_BUDGET})
_czz("fig2b_paper", "experiments", "Fig. 2b",
     "compared to the transformer with single-head attention (h = 1), the query entries extracted from the "
     "transformer with multiple heads (h = 4, 8) preserve better convergence performance and can dive into a lower risk",
     _fig2b_pieces_test, _pieces_decided(_fig2b_pieces_test, _fig2b_pieces_resolved, runs=_seeds),
     setting=_TRAINED_SETTING, source="chen.train/paper-L4",
     deviations={"paper": _PIECES_SEEDS + "; h = 8 not trained"}, reduced={"paper": _PIECES_BUDGET})

_czz("fig1d_paper", "experiments", "Fig. 1d",
     "the \u201cpruned transformer\u201d and the original model exhibit almost the same performance for each layer ... "
     "the probing result is largely different between single-head transformers and the \u201cpruned "
     "transformers\u201d, the latter has better performances compared to the former",
     _fig1d_pieces_test, _fig1d_pieces_gate, setting=_TRAINED_SETTING + "; pruned models fine-tuned 60,000 steps",
     source="chen.train/paper-L4",
     deviations={"paper": _PIECES_SEEDS + "; 'almost the same' read as the mid claim's criterion at every block: "
                          "the pruned model within half the 1-head gap of the original (for a pruned model no "
                          "better than the original: closer to it than to the 1-head model)"},
     reduced={"paper": _PIECES_BUDGET})

register_page("chen/theory", ci=dict(tasks=4000), paper=dict(tasks=40000))
# prompts for the trained-model analyses (the committed models are analysed at every scale)
register_page("chen/experiments", ci=dict(curve_prompts=1024, analysis_prompts=4096),
              mid=dict(curve_prompts=4096, analysis_prompts=8192),
              paper=dict(curve_prompts=4096, analysis_prompts=8192))
