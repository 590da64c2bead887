"""Recipes of the chapter on Collins et al., *Softmax Attention Adapts to Function
Lipschitzness* (NeurIPS 2024). No public code exists for the paper; these are its reference
implementation. Shared defaults (Appendix J): tied ``M = W^T W`` with ``W_0 = 0.001 I``, Adam
with the learning rate multiplied by 0.999 every step, ``floor(sqrt(n))`` query points per
task, clean targets in the test error."""
from __future__ import annotations

import math

import numpy as np
import torch

from ..models import SoftmaxUnit
from ..prompts import derive_seed
from ..results import Result
from ..tasks import LipschitzTask, LowRankTask
from ..theory import collins as C
from ..training import progress_enabled, train
from ..claims import Check, Gate, below, chapter, computed, converged
from . import register, register_page


def test_error(model, sampler, n: int, n_tasks: int, seed: int, n_queries: int = 1) -> float:
    """Mean squared error of ``model`` against the clean labels of the queries, on noisy
    contexts of n points from ``sampler``."""
    p = sampler.sample(n_tasks, n + n_queries, seed=seed, n_context=n)
    clean = sampler.evaluate(p.x, p.task)[:, n:]
    with torch.no_grad():
        return float(((model(p.x, p.y, n) - clean) ** 2).mean())


def M_stats(models) -> list[list[float]]:
    """``[||M||_2, tr(M)/d]`` for each unit (the paper plots the spectral norm; the trace is
    less inflated by noise in individual directions)."""
    out = []
    for m in [models] if isinstance(models, torch.nn.Module) else models:   # one unit or a list
        M = m.M.detach().double()
        out.append([float(torch.linalg.matrix_norm(M, 2)), float(torch.trace(M) / m.d)])
    return out


def _units(R, d, attention="softmax"):
    return [SoftmaxUnit(d, attention=attention) for _ in range(R)]


# --- Figure 1 ---------------------------------------------------------------------------

@register(
    "collins.figure1",
    ci=dict(nus=[0.0, 1.5, 6.0], ns=[4, 8, 16, 32, 64, 128], sigma=0.1, mode="optimum",
            num_tasks=4000, steps=0, seeds=1, hills="literal", seed=0),
    paper=dict(prefetch=100, nus=[0.0, 1.5, 6.0], ns=[2, 4, 8, 16, 32, 64, 128, 256], sigma=0.1, mode="train",
               num_tasks=1000, steps=15000, seeds=10, hills="literal", seed=0),
    description="Collins et al. Fig. 1 (d = 2, 'hills' tasks of Lipschitzness nu): the softmax "
                "window shrinks as nu grows; softmax vs linear attention error against n.",
)
def figure1_recipe(cfg, device) -> Result:
    """For each nu and n: the softmax unit's error at its best window ``M = w* I`` (ci:
    population optimum by Monte Carlo grid search, which Lemma B.5 justifies restricting to
    scalar windows; paper: units trained 15,000 steps at lr 1e-2, 1 task per step, then tested)
    and the best linear attention (ci: exact least squares over M; paper: trained).
    Stated choices: sigma = 0.1 and the n grid (the paper states neither); the hills formula
    read literally, ``nu cos(theta - b)`` (set ``hills="wrapped"`` for ``cos(nu (theta - b))``)."""
    arrays = {"ns": np.array(cfg["ns"]), "nus": np.array(cfg["nus"])}
    metrics = {}
    bar = None
    if cfg["mode"] == "train" and progress_enabled():     # one bar over the (nu, n) settings
        from tqdm.auto import tqdm
        bar = tqdm(total=len(cfg["nus"]) * len(cfg["ns"]), desc="collins.figure1 (nu, n)", leave=False)
    for nu in cfg["nus"]:
        soft, lin, wstar = [], [], []
        for n in cfg["ns"]:
            if bar is not None:
                bar.update(1)
            s = LipschitzTask(2, "hills", nu, cfg["sigma"], hills=cfg["hills"])
            if cfg["mode"] == "optimum":
                seed = derive_seed(cfg["seed"], n, int(10 * nu))
                ws = C.DEFAULT_WS
                S, N = _hills_terms(ws, nu, n, cfg["num_tasks"], seed, cfg["hills"])
                loss = S + cfg["sigma"] ** 2 * N
                wstar.append(float(ws[np.argmin(loss)])); soft.append(float(loss.min()))
                lin.append(_hills_linear(nu, n, cfg["sigma"], cfg["num_tasks"], seed, cfg["hills"]))
            else:
                nq = max(1, int(math.isqrt(n)))
                units = _units(cfg["seeds"], 2) + _units(cfg["seeds"], 2, "linear")
                kw = dict(steps=cfg["steps"], batch_size=1, n_points=n + nq, n_queries=nq,
                          device=device, progress=False, prefetch=cfg.get("prefetch", 1))
                train(units[:cfg["seeds"]], s, lr=1e-2, seed=cfg["seed"], **kw)
                train(units[cfg["seeds"]:], s, lr=1e-2, seed=cfg["seed"], **kw)
                errs = [test_error(u.cpu(), s, n, cfg["num_tasks"], derive_seed(cfg["seed"], 5, n)) for u in units]
                soft.append(float(np.mean(errs[:cfg["seeds"]]))); lin.append(float(np.mean(errs[cfg["seeds"]:])))
                wstar.append(float(np.mean([m[1] for m in M_stats(units[:cfg["seeds"]])])))
        key = f"nu{nu:g}"
        arrays.update({f"{key}/softmax": np.array(soft), f"{key}/linear": np.array(lin),
                       f"{key}/wstar": np.array(wstar)})
        metrics[f"{key}_wstar"] = wstar
        metrics[f"{key}_softmax"] = soft
        metrics[f"{key}_linear"] = lin
    if bar is not None:
        bar.close()
    return Result("collins.figure1", "", cfg, metrics, arrays)


def _hills_terms(ws, nu, n, num_tasks, seed, hills):
    p = LipschitzTask(2, "hills", nu, 0.0, hills=hills).sample(num_tasks, n + 1, seed=seed)
    return C.window_terms(ws, p.x.double(), p.y.double(), n)


def _hills_linear(nu, n, sigma, num_tasks, seed, hills):
    """Exact least-squares best linear attention on the hills class (fit, then fresh test)."""
    def data(sd):
        s = LipschitzTask(2, "hills", nu, sigma, hills=hills)
        p = s.sample(num_tasks, n + 1, seed=sd)
        return p.x.double(), p.y.double(), s.evaluate(p.x, p.task).double()[:, n]
    return C.linear_attention_fit(data(seed), data(seed + 1), n)[0]


# --- Figures 3 and 4: the window during pretraining --------------------------------------

def _window_runs(settings, cfg, device, n, n_queries, tag, steps=None):
    """Train one unit per (setting, seed) in one batched call; settings: list of
    ``(label, sampler)``. Returns trajectories of [||M||_2, tr(M)/d] and final test errors."""
    runs = [(label, s) for label, s in settings for _ in range(cfg["seeds"])]
    units = _units(len(runs), settings[0][1].d)
    fit = train(units, [s for _, s in runs], steps or cfg["steps"], batch_size=cfg["batch_size"],
                lr=cfg["lr"], lr_decay=cfg["lr_decay"], seed=derive_seed(cfg["seed"], tag),
                n_points=n + n_queries, n_queries=n_queries, device=device,
                trace=M_stats, trace_every=cfg["trace_every"], prefetch=cfg.get("prefetch", 1))
    steps = np.array([t for t, _ in fit.trace])
    traj = np.array([v for _, v in fit.trace])                 # (S, R, 2)
    errors = [test_error(u.cpu(), s, n, cfg["test_tasks"], derive_seed(cfg["seed"], 9, k))
              for k, (u, (_, s)) in enumerate(zip(units, runs))]
    return steps, traj, np.array(errors), runs


def _optima(settings, n, cfg):
    """MC population optimum w* for each setting (families with L, sigma)."""
    return np.array([C.optimal_window(s.family, s.L, s.noise_std, n, s.d, num_tasks=cfg["mc_tasks"],
                                      seed=cfg["seed"], covariates=s.covariates) for _, s in settings])


def _window_unit(d, w):
    """A softmax unit with ``M = w I`` exactly."""
    return SoftmaxUnit(d, param="M", init_scale=w)


@register(
    "collins.figure3",
    ci=dict(d=5, n=20, panels=[["relu", "sphere"]], Ls=[0.25, 0.5, 1.0, 2.0, 4.0], sigma=0.5,
            seeds=2, batch_size=32, steps=400, lr=0.1, lr_decay=0.999, trace_every=20,
            test_tasks=4000, mc_tasks=4000, seed=0),
    paper=dict(prefetch=100, d=5, n=20, panels=[["relu", "sphere"], ["relu", "nonisotropic"], ["cosine", "sphere"],
                                  ["cosine", "nonisotropic"]],
               Ls=[0.01, 0.1, 1.0, 10.0], sigma=0.01, seeds=10, batch_size=1, steps=1500, lr=0.1,
               lr_decay=0.999, trace_every=25, test_tasks=4000, mc_tasks=4000, seed=0),
    description="Collins et al. Fig. 3: the trained window ||M|| grows with the Lipschitz "
                "constant L (ci: sigma = 0.5, where the effect is visible; paper: sigma = 0.01).",
)
def figure3_recipe(cfg, device) -> Result:
    """Units trained on each L (all panels x L x seeds batched per panel), 4 queries per task.
    The paper's sigma = 0.01 at n = 20 puts every L >= 0.1 in the saturated regime (the
    optimal window depends on L only through sigma/L and stops moving below sigma/L ~ 0.1),
    so ci uses sigma = 0.5 and L in {0.25..4}; the paper config keeps the paper's settings
    with our choice of the unstated L grid."""
    arrays, metrics = {"Ls": np.array(cfg["Ls"])}, {}
    n, nq = cfg["n"], 4
    for family, cov in cfg["panels"]:
        settings = [(f"L={L:g}", LipschitzTask(cfg["d"], family, L, cfg["sigma"], cov)) for L in cfg["Ls"]]
        tag = ["relu", "cosine"].index(family) * 2 + ["sphere", "nonisotropic"].index(cov)
        steps, traj, errors, runs = _window_runs(settings, cfg, device, n, nq, tag)
        wstar = _optima(settings, n, cfg)
        # the optimal window scored on exactly the trained units' test tasks
        opt_err = np.array([test_error(_window_unit(cfg["d"], wstar[k // cfg["seeds"]]), s, n,
                                       cfg["test_tasks"], derive_seed(cfg["seed"], 9, k))
                            for k, (_, s) in enumerate(runs)])
        key = f"{family}_{cov}"
        arrays.update({f"{key}/steps": steps, f"{key}/traj": traj, f"{key}/errors": errors,
                       f"{key}/wstar": wstar, f"{key}/opt_errors": opt_err})
        final_tr = traj[-1, :, 1].reshape(len(cfg["Ls"]), cfg["seeds"])
        metrics[f"{key}_final_trace_by_L"] = final_tr.tolist()
        metrics[f"{key}_final_norm_mean_by_L"] = traj[-1, :, 0].reshape(len(cfg["Ls"]), cfg["seeds"]).mean(1).tolist()
        metrics[f"{key}_wstar_by_L"] = wstar.tolist()
        metrics[f"{key}_test_over_optimum_max"] = float((errors / opt_err).max())
    return Result("collins.figure3", "", cfg, metrics, arrays)


@register(
    "collins.figure4",
    ci=dict(d=5, L=1.0, sigmas=[0.1, 0.25, 0.5, 1.0, 2.0], n_sigma=20, ns=[5, 10, 20, 50, 100],
            sigma_n=0.5, families=["relu"], seeds=2, batch_size=32, steps=300, steps_n=1000,
            lr=0.1, lr_decay=0.999, trace_every=20, test_tasks=4000, mc_tasks=4000, seed=0),
    paper=dict(prefetch=100, d=5, L=1.0, sigmas=[0.01, 0.1, 0.3, 1.0], n_sigma=20, ns=[5, 10, 20, 50, 100],
               sigma_n=0.01, families=["relu", "cosine"], seeds=10, batch_size=1, steps=1500,
               steps_n=1500, lr=0.01, lr_decay=0.999, trace_every=25, test_tasks=4000,
               mc_tasks=4000, seed=0),
    description="Collins et al. Fig. 4: the trained window shrinks with the noise sigma and "
                "grows with the context length n.",
)
def figure4_recipe(cfg, device) -> Result:
    """(a) sigma-ablation at n = 20 with floor(sqrt(n)) = 4 queries, all sigmas x seeds in one
    batched call; (b) n-ablation with 1 query (so it gets ``steps_n`` steps), one batched call
    (the seeds) per n. ci uses lr 0.1 (the paper's 0.01 converges too slowly for a few hundred
    steps) and sigma_n = 0.5 for (b) (at the paper's 0.01 the window saturates)."""
    arrays, metrics = {"sigmas": np.array(cfg["sigmas"]), "ns": np.array(cfg["ns"])}, {}
    for family in cfg["families"]:
        settings = [(f"sigma={s:g}", LipschitzTask(cfg["d"], family, cfg["L"], s)) for s in cfg["sigmas"]]
        n = cfg["n_sigma"]
        tag = 11 + ["relu", "cosine"].index(family)
        steps, traj, errors, _ = _window_runs(settings, cfg, device, n, int(math.isqrt(n)), tag)
        wstar = _optima(settings, n, cfg)
        arrays.update({f"{family}/sigma/steps": steps, f"{family}/sigma/traj": traj,
                       f"{family}/sigma/wstar": wstar})
        metrics[f"{family}_sigma_final_trace"] = traj[-1, :, 1].reshape(len(cfg["sigmas"]), cfg["seeds"]).tolist()
        metrics[f"{family}_sigma_wstar"] = wstar.tolist()
        finals, wstars = [], []
        for n in cfg["ns"]:
            s = LipschitzTask(cfg["d"], family, cfg["L"], cfg["sigma_n"])
            steps, traj, _, _ = _window_runs([(f"n={n}", s)], cfg, device, n, 1, 13 + n,
                                             steps=cfg["steps_n"])
            arrays[f"{family}/n{n}/traj"] = traj
            arrays[f"{family}/n{n}/steps"] = steps
            finals.append(traj[-1, :, 1].tolist())
            wstars.append(float(_optima([(None, s)], n, cfg)[0]))
        metrics[f"{family}_n_final_trace"] = finals
        metrics[f"{family}_n_wstar"] = wstars
        arrays[f"{family}/n/wstar"] = np.array(wstars)
    return Result("collins.figure4", "", cfg, metrics, arrays)


# --- Figure 5: generalisation -----------------------------------------------------------

FIG5_PRETRAIN = (("affine", 1.0), ("relu", 1.0), ("cosine", 1.0), ("cosine", 0.1), ("cosine", 10.0))


@register(
    "collins.figure5",
    ci=dict(d=5, n=100, sigma=0.01, seeds=2, batch_size=8, steps=300, lr=0.1, lr_decay=0.999,
            trace_every=10, curve_tasks=64, test_tasks=500, seed=0),
    paper=dict(prefetch=100, d=5, n=200, sigma=0.01, seeds=10, batch_size=1, steps=2000, lr=0.1, lr_decay=0.999,
               trace_every=10, curve_tasks=5, test_tasks=500, seed=0),
    description="Collins et al. Fig. 5: units pretrained on affine / ReLU / cosine tasks with "
                "the same L transfer to each other; cosine pretraining with L = 0.1 or 10 does "
                "not transfer to L = 1.",
)
def figure5_recipe(cfg, device) -> Result:
    """Five pretraining distributions x seeds in one batched call (one sampler per run), with
    floor(sqrt(n)) queries per task. Learning curves: test error on ``curve_tasks`` fixed tasks
    of each test class every ``trace_every`` steps (the paper smooths 5-task errors with an
    EMA of rate 0.01; we average more tasks instead). Final: ``test_tasks`` tasks per test
    class. ci uses n = 100 and batch 8 (the paper: n = 200, 1 task per step)."""
    d, n, sig = cfg["d"], cfg["n"], cfg["sigma"]
    nq = int(math.isqrt(n))
    runs = [(fam, L) for fam, L in FIG5_PRETRAIN for _ in range(cfg["seeds"])]
    samplers = [LipschitzTask(d, fam, L, sig) for fam, L in runs]
    tests = {name: LipschitzTask(d, name, 1.0, sig) for name in ("affine", "relu", "cosine")}
    fixed = {name: s.sample(cfg["curve_tasks"], n + 1, seed=derive_seed(cfg["seed"], 21, i), n_context=n)
             for i, (name, s) in enumerate(tests.items())}

    def curve(models):
        out = []
        for name, p in fixed.items():
            clean = tests[name].evaluate(p.x, p.task)[:, n:]
            out.append([float(((m.cpu()(p.x, p.y, n) - clean) ** 2).mean()) for m in models])
        return out                                              # (3 tests, R)
    units = _units(len(runs), d)
    fit = train(units, samplers, cfg["steps"], batch_size=cfg["batch_size"], lr=cfg["lr"],
                lr_decay=cfg["lr_decay"], seed=cfg["seed"], n_points=n + nq, n_queries=nq,
                device=device, trace=curve, trace_every=cfg["trace_every"],
                prefetch=cfg.get("prefetch", 1))
    final = np.array([[test_error(u.cpu(), s, n, cfg["test_tasks"], derive_seed(cfg["seed"], 22, j))
                       for u in units] for j, s in enumerate(tests.values())])      # (3, R)
    labels = [f"{fam} L={L:g}" for fam, L in FIG5_PRETRAIN]
    per = final.reshape(3, len(FIG5_PRETRAIN), cfg["seeds"]).mean(-1)            # (3 tests, 5 pretrain)
    same = per[:, :3]
    metrics = {"pretrain_labels": labels, "test_labels": list(tests),
               "final_error": per.tolist(),
               "same_L_max_over_min": float((same.max(1) / same.min(1)).max()),
               "mismatch_ratio_cos01": float(per[2, 3] / per[2, 0]),
               "mismatch_ratio_cos10": float(per[2, 4] / per[2, 0]),
               "final_trace_M": [float(torch.trace(u.M.detach())) / d for u in units]}
    arrays = {"curve_steps": np.array([t for t, _ in fit.trace]),
              "curves": np.array([v for _, v in fit.trace]), "final": final}
    return Result("collins.figure5", "", cfg, metrics, arrays)


# --- Figure 9: low-rank structure ---------------------------------------------------------

@register(
    "collins.figure9",
    ci=dict(d=10, k=2, n=50, sigma=0.01, covariates="assumption43", seeds=2, batch_size=16,
            steps=300, lr_softmax=0.1, lr_linear=1e-3, trace_every=20, test_tasks=256, seed=0),
    paper=dict(prefetch=100, d=10, k=2, n=50, sigma=0.01, covariates="random_J", seeds=5, batch_size=1,
               steps=10000, lr_softmax=0.1, lr_linear=1e-3, trace_every=200, test_tasks=500, seed=0),
    description="Collins et al. Fig. 9: on tasks varying only along col(B), softmax attention "
                "learns M ~ B B^T (rho -> 0) and a low test error; linear attention does not.",
)
def figure9_recipe(cfg, device) -> Result:
    """Classes a^T B^T x + 2, (a^T B^T x)^2, cos(4 a^T B^T x) x seeds (a fresh B per seed),
    softmax and linear units in two batched calls, floor(sqrt(n)) = 7 queries. ci uses
    Assumption 4.3's covariates (c_u = c_v = 1/sqrt 2), the theorem's setting; the paper's
    random-J covariates make rho plateau at 0.07-1.4 in our probes (paper config keeps them).
    Linear and softmax are separated by test error: on the affine class linear attention also
    shrinks rho but cannot output the offset."""
    d, n = cfg["d"], cfg["n"]
    nq = int(math.isqrt(n))
    families = ("affine", "quadratic", "cosine")
    runs = [(fam, sd) for fam in families for sd in range(cfg["seeds"])]
    samplers = [LowRankTask(d, cfg["k"], fam, cfg["sigma"], cfg["covariates"], seed=derive_seed(cfg["seed"], sd))
                for fam, sd in runs]
    Bs = [s.B.numpy() for s in samplers]
    tests = [s.sample(cfg["test_tasks"], n + nq, seed=derive_seed(cfg["seed"], 31, k), n_context=n)
             for k, s in enumerate(samplers)]
    cleans = [s.evaluate(p.x, p.task)[:, n:] for s, p in zip(samplers, tests)]

    def stats(models):
        return [[C.rho(m.M.detach().numpy(), B), float(((m.cpu()(p.x, p.y, n) - c) ** 2).mean())]
                for m, B, p, c in zip(models, Bs, tests, cleans)]
    arrays, metrics = {}, {}
    for attention in ("softmax", "linear"):
        units = _units(len(runs), d, attention)
        fit = train(units, samplers, cfg["steps"], batch_size=cfg["batch_size"],
                    lr=cfg[f"lr_{attention}"], seed=cfg["seed"], n_points=n + nq, n_queries=nq,
                    device=device, trace=stats, trace_every=cfg["trace_every"],
                    prefetch=cfg.get("prefetch", 1))
        traj = np.array([v for _, v in fit.trace])              # (S, R, 2)
        arrays[f"{attention}/steps"] = np.array([t for t, _ in fit.trace])
        arrays[f"{attention}/traj"] = traj
        final = traj[-1].reshape(len(families), cfg["seeds"], 2)
        metrics[f"{attention}_final_rho"] = final[..., 0].tolist()
        metrics[f"{attention}_final_error"] = final[..., 1].mean(1).tolist()
    metrics["families"] = list(families)
    return Result("collins.figure9", "", cfg, metrics, arrays)


# --- claims ------------------------------------------------------------------------------
COLLINS = "Collins et al. (NeurIPS 2024)"


_col = chapter("collins", COLLINS)


def _up(v):
    return all(a < b for a, b in zip(v, v[1:]))


def _down(v):
    return all(a > b for a, b in zip(v, v[1:]))


def _r(v, k=2):
    return [round(float(x), k) for x in v]


_col("nw", "theory", "Sec. 2",
     "The Nadaraya-Watson (NW) estimator ... interpolates the data as f_NW(x_{n+1}) = sum_i K(x_{n+1}, x_i) f(x_i) / "
     "sum_j K(x_{n+1}, x_j); the softmax attention unit is one, with its window set by M",
     below("nw_equivalence_max_abs", 1e-12, "max difference"),
     computed("nw_equivalence_max_abs"), ci_holds=True)
_col("thm34", "theory", "Thm. 3.4",
     "optimizing the pretraining population loss ... leads to attention key-query parameters that scale with the "
     "Lipschitzness of the function class, as well as the noise level and number of in-context samples",
     lambda v: Check(all(lo <= v[f"slope_{f}"] <= hi for f in ("affine", "relu") for lo, hi in [v[f"slope_{f}_bounds"]]),
                     f"fitted slopes: affine {v['slope_affine']:.3f} in {_r(v['slope_affine_bounds'], 3)}, "
                     f"ReLU {v['slope_relu']:.3f} in {_r(v['slope_relu_bounds'], 3)}"),
     computed("slope_affine", "slope_relu"), ci_holds=True)
_col("thm35_36", "theory", "Thm. 3.5",
     "pretraining on D(F_L) yields a model that can in-context learn downstream tasks if and only if they have "
     "similar Lipschitzness as L",
     lambda v: Check(v["diagonal_near_best_max"] < 1.05 and v["off_diagonal_far_min"] > 1.5,
                     f"matched window / best {v['diagonal_near_best_max']:.3f}; mismatched / best >= "
                     f"{v['off_diagonal_far_min']:.2f}"),
     computed("diagonal_near_best_max", "off_diagonal_far_min"), ci_holds=True)
_col("thm44", "theory", "Thm. 3.6",
     "Lower Bound for Linear Attention ... strictly larger than the upper bound on L from Theorem 3.5",
     lambda v: Check(v["linear_min_over_floor"] >= 0.98 and v["softmax_best_at_n100"] < 1 / 3,
                     f"linear attention's best / its floor {v['linear_min_over_floor']:.3f}; softmax at n = 100: "
                     f"{v['softmax_best_at_n100']:.4f} (floor L^2/3 = 0.333)"),
     computed("linear_min_over_floor", "softmax_best_at_n100"), ci_holds=True)
_col("lowrank", "theory", "Thm. 4.4",
     "the optimal softmax attention weight matrix from pretraining projects the data onto this subspace",
     lambda v: Check(bool(v["lowrank_zero_not_optimal"]),
                     f"loss excess at the projection (c_hat = 0) {v['lowrank_sigma0_excess_at_0']:.1e}; "
                     f"every c_hat != 0 worse: {v['lowrank_zero_not_optimal']}"),
     computed("lowrank_sigma0_excess_at_0"), ci_holds=True)

_CI = "fewer tasks, steps and seeds than the paper"
_col("fig1", "experiments", "Fig. 1",
     "Adapting to function Lipschitzness leads softmax attention to achieve small error",
     lambda v: Check(all(v["fig1_softmax_decreasing_in_n"]) and all(v["fig1_softmax_below_linear_n64"]),
                     f"softmax error decreasing in n: {v['fig1_softmax_decreasing_in_n']}; below linear at n >= 64: "
                     f"{v['fig1_softmax_below_linear_n64']}"),
     computed("fig1_softmax_below_linear_n64", what="population optimum on a window grid (ci) or trained units"),
     reduced={"ci": _CI}, deviations={"ci": "the hills task read literally, nu cos(theta - b) (linear in x); the paper calls it non-linear"},
     ci_holds=True)
_col("fig3_4", "experiments", "Figs. 3, 4",
     "||M|| increases with L ... ||M|| increases slower during pretraining for larger sigma ... faster during "
     "pretraining for larger n",
     lambda v: Check(_up(v["fig3_trace_by_L"]) and _down(v["fig4_trace_by_sigma"]) and _up(v["fig4_trace_by_n"]),
                     f"final tr(M)/d by L {_r(v['fig3_trace_by_L'])}, by sigma {_r(v['fig4_trace_by_sigma'])}, "
                     f"by n {_r(v['fig4_trace_by_n'])}"),
     converged("fig34_traj_tenths", 0.05, "||M||_2"), reduced={"ci": _CI},
     deviations={"ci": "sigma = 0.5 and L in {0.25, ..., 4} (the paper: sigma = 0.01, where the optimal window "
                       "is saturated for L >= 0.1); our sigma and n grids for Fig. 4"})
_col("fig3_optimal", "experiments", "Fig. 3 (with Thm. 3.4)",
     "the relationship between the attention window scale ... and L, sigma and n matches our bounds in Theorem 3.4",
     lambda v: Check(v["fig3_test_over_optimum_max"] < 1.1,
                     f"trained units' test loss / the optimal window's <= {v['fig3_test_over_optimum_max']:.3f}"),
     computed("fig3_test_over_optimum_max", what="trained units against the optimal window on the same tasks"),
     reduced={"ci": _CI}, ci_holds=True)
_col("fig9", "experiments", "Fig. 9",
     "softmax attention recovers the low-rank structure when tasks are drawn from each of the three function classes",
     lambda v: Check(v["fig9_softmax_rho_max"] < 0.05,
                     f"largest final rho(M, B) over the three classes: {v['fig9_softmax_rho_max']:.4f}"),
     converged("fig9_error_tenths", 0.05, "test error"), reduced={"ci": _CI},
     deviations={"ci": "Assumption 4.3's covariates (Thm. 4.4's setting), not the paper's random-J ones"})
_col("fig5", "experiments", "Fig. 5",
     "the necessary and sufficient condition for downstream generalization ... is that the pretraining and "
     "downstream tasks have similar Lipschitzness",
     lambda v: Check(v["fig5_same_L_max_over_min"] < 1.5,
                     f"max/min error across pretraining families at the same L {v['fig5_same_L_max_over_min']:.3f}"),
     converged("fig5_curve_tenths", 0.05, "test error"), reduced={"ci": _CI + "; n = 100 (paper 200), batch 8"})

_col("fig1_paper", "experiments", "Fig. 1",
     "From left to right, the Lipschitzness of the target function grows and the optimal softmax attention window "
     "(shaded blue) shrinks ... Adapting to function Lipschitzness leads softmax attention to achieve small error",
     lambda v: Check(all(v["paper_fig1_softmax_decreasing_in_n"]) and all(v["paper_fig1_softmax_below_linear_n64"])
                     and all(v["paper_fig1_window_increasing_in_nu"]),
                     f"decreasing in n: {v['paper_fig1_softmax_decreasing_in_n']}; below linear at n >= 64: "
                     f"{v['paper_fig1_softmax_below_linear_n64']}; window narrowing with nu at n >= 16: "
                     f"{v['paper_fig1_window_increasing_in_nu']}"),
     computed("paper_fig1_softmax_below_linear_n64", what="measured on trained units; this recipe records no training curve"),
     source="collins.figure1/paper", deviations={"paper": "the hills task read literally, nu cos(theta - b) (linear in x); the paper calls it non-linear"})
_col("fig3_paper", "experiments", "Fig. 3",
     "Figure 3 shows that ||M|| increases with L in various settings",
     lambda v: Check(all(_up(x) for x in v["paper_fig3_norms"].values()),
                     "final ||M||_2 by L: " + "; ".join(f"{k} {_r(x)}" for k, x in v["paper_fig3_norms"].items())),
     converged("paper_fig3_traj_tenths", 0.05, "||M||_2"), source="collins.figure3/paper",
     deviations={"paper": "the L grid {0.01, 0.1, 1, 10} is ours (the paper's legend is unreadable)"})
_col("fig4_paper", "experiments", "Fig. 4",
     "||M|| increases slower during pretraining for larger sigma ... ||M|| increases faster during pretraining for "
     "larger n",
     lambda v: Check(all(_down(x) for x in v["paper_fig4_early_by_sigma"].values())
                     and all(_up(x) for x in v["paper_fig4_early_by_n"].values()),
                     "||M||_2 at a tenth of pretraining: " + "; ".join(
                         f"{f}: by sigma {_r(v['paper_fig4_early_by_sigma'][f])}, by n {_r(v['paper_fig4_early_by_n'][f])}"
                         for f in v["paper_fig4_early_by_n"])),
     lambda v: Gate(v["paper_fig4_early_over_final_max"] < 0.9,
                    f"at a tenth of pretraining every norm is at most {v['paper_fig4_early_over_final_max']:.2f} of its "
                    f"final value ({'< 0.9: the growth phase is resolved' if v['paper_fig4_early_over_final_max'] < 0.9 else '>= 0.9: some norm is already at or past its final value, so growth speed is not resolved there'})"),
     source="collins.figure4/paper",
     deviations={"paper": "the sigma and n grids are ours (the paper's legends are unreadable or unstated)"})
_col("fig5_paper", "experiments", "Fig. 5",
     "pretraining on D(F_L) yields a model that can in-context learn downstream tasks if and only if they have "
     "similar Lipschitzness as L",
     lambda v: Check(v["paper_fig5_same_L_max_over_min"] < 1.5
                     and min(v["paper_fig5_mismatch_ratio_cos01"], v["paper_fig5_mismatch_ratio_cos10"]) > 2,
                     f"same-L max/min {v['paper_fig5_same_L_max_over_min']:.3f}; mismatched L on cos L = 1: "
                     f"{v['paper_fig5_mismatch_ratio_cos01']:.2f}x / {v['paper_fig5_mismatch_ratio_cos10']:.2f}x"),
     converged("paper_fig5_curve_tenths", 0.05, "test error"), source="collins.figure5/paper")
_col("fig9_rho_paper", "experiments", "Fig. 9",
     "softmax attention recovers the low-rank structure when tasks are drawn from each of the three function classes",
     lambda v: Check(v["paper_fig9_softmax_rho_median"] < 0.05,
                     f"median final rho(M, B) over classes and seeds {v['paper_fig9_softmax_rho_median']:.3f}"),
     converged("paper_fig9_error_tenths", 0.05, "test error"), source="collins.figure9/paper")
_col("fig9_error_paper", "experiments", "Fig. 9",
     "In contrast, linear attention does not learn any meaningful structure in these cases",
     lambda v: Check(all(r < 1 for r in v["paper_fig9_softmax_over_linear_error"]),
                     "softmax / linear test error: " + ", ".join(f"{r:.3f}" for r in v["paper_fig9_softmax_over_linear_error"])),
     converged("paper_fig9_error_tenths", 0.05, "test error"), source="collins.figure9/paper")

register_page("collins/theory", ci=dict(tasks=1500), paper=dict(tasks=10000))    # tasks per window estimate
