"""Which heads a trained transformer uses, and what each layer computes (Chen, Zhao, Zou 2024,
Section 3 and Appendix B).

* :func:`head_importance`: mask one head at a time (zero its slice of the concatenated
  attention output, the residual stream untouched; Hugging Face's ``head_mask``) and measure
  the rise of the in-context error, ``Delta E(i, j)`` (eq. 3.1); :func:`head_weights`
  normalises each layer's row to sum to one, ``W_{i,j}``.
* :func:`sort_and_average` (the paper's "avg" heat-maps: rows sorted, then averaged over
  models, so a column is a rank, not a head), :func:`dominance` and :func:`entropy`.
* :func:`prune_to_top_heads`: keep every head of layer 1 and the most important head of
  every later layer (a persistent mask in the model's ``head_mask`` buffers).
* :func:`layer_probes`: a ridge probe from the query token's hidden state after the read-in
  and after each block to the query's label ("input, 1, ..., L").
* :func:`p_probing`: the first block's query-token outputs as features, gradient descent on
  ``q - 1`` of them, risk on the last one (Section 6, Figure 2a).

Models are :class:`~icl_core.models.Transformer` (stacked encoders; head masking also
works on interleaved decoders, Fig. 9) or the theory's
:class:`~icl_core.models.MultiHeadLinearTransformer`. Errors are at the first query.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np
import torch

from .models import Transformer
from .prompts import derive_seed
from .results import Result
from .tasks import SparseLinearRegression
from .validation import check_int


def query_prediction(model, prompt) -> torch.Tensor:
    """The prediction for the first query point (index ``n_context``) from the
    ``n_context`` examples before it: ``(B,)``. Stacked models predict at the query tokens;
    interleaved decoders (Garg et al.) predict every point, so the same index is read."""
    with torch.no_grad():
        pred = model.predict(prompt)
    layout = getattr(model, "layout", None)
    return pred[:, prompt.n_context] if getattr(layout, "kind", "stacked") == "interleaved" else pred[:, 0]


def query_sq_errors(model, prompt) -> torch.Tensor:
    """Squared error of :func:`query_prediction` against the first query's label, per prompt:
    ``(B,)`` float64."""
    pred = query_prediction(model, prompt)
    return (pred.double() - prompt.y[:, prompt.n_context].double()) ** 2


def query_error(model, prompt) -> float:
    """Mean squared error of :func:`query_prediction` against the first query's label."""
    return float(query_sq_errors(model, prompt).mean())


@contextmanager
def masked_head(model, layer: int, head: int):
    """Temporarily zero head ``head`` of block ``layer`` (0-indexed), keeping other masks."""
    mask = model.head_masks[layer]
    old = mask[head].item()
    mask[head] = 0.0
    try:
        yield model
    finally:
        mask[head] = old


def head_importance(model, prompt, per_prompt: bool = False):
    """``Delta E(i, j)`` of Chen et al. eq. (3.1) for every block i and head j.

    Args:
        model: a stacked-layout :class:`~icl_core.models.Transformer`.
        prompt: the evaluation prompts (the paper: n = 10 examples, 1 query, 8192 prompts);
            every mask is scored on the same prompts.
        per_prompt: also return each prompt's change of squared error.

    Returns:
        ``(delta, base)``: ``delta`` of shape ``(L, H)`` (NaN for heads already masked),
        ``base`` the unmasked squared error at the first query; with ``per_prompt``,
        ``(delta, base, samples)`` with ``samples`` of shape ``(L, H, B)`` (``delta`` its mean).
    """
    base_sq = query_sq_errors(model, prompt)
    masks = model.head_masks
    samples = np.full((len(masks), len(masks[0]), len(base_sq)), np.nan)
    for i, mask in enumerate(masks):
        for j in range(len(mask)):
            if mask[j] == 0:
                continue
            with masked_head(model, i, j):
                samples[i, j] = (query_sq_errors(model, prompt) - base_sq).numpy()
    delta, base = samples.mean(axis=2), float(base_sq.mean())
    return (delta, base, samples) if per_prompt else (delta, base)


def head_weights(delta: np.ndarray) -> np.ndarray:
    """``W_{i,j} = Delta_{i,j} / sum_k Delta_{i,k}`` (rows sum to 1; masked heads count 0).
    Negative deltas (masking helped) are kept, so a weight can leave [0, 1]."""
    delta = np.nan_to_num(np.asarray(delta, dtype=float), nan=0.0)
    return delta / delta.sum(axis=1, keepdims=True)


def sort_and_average(weights: list[np.ndarray]) -> np.ndarray:
    """The paper's ``W_avg``: sort each row in descending order, then average over models."""
    return np.mean([-np.sort(-np.asarray(w), axis=1) for w in weights], axis=0)


def dominance(weights: np.ndarray) -> np.ndarray:
    """``D_i = max_j W_{i,j}`` per layer."""
    return np.asarray(weights).max(axis=1)


def dominance_se(samples: np.ndarray, n_boot: int = 200, seed: int = 0) -> np.ndarray:
    """Bootstrap standard error over prompts of each layer's dominance ``max_j W_{i,j}``:
    ``samples`` ``(L, H, B)`` from :func:`head_importance` (``per_prompt=True``); returns ``(L,)``."""
    rng = np.random.default_rng(seed)
    B = samples.shape[2]
    boots = [dominance(head_weights(samples[:, :, rng.integers(0, B, B)].mean(axis=2))) for _ in range(n_boot)]
    return np.std(boots, axis=0, ddof=1)


def entropy(weights: np.ndarray) -> np.ndarray:
    """Normalised entropy per layer, ``-sum_j W log W / log h`` after clipping W at 0
    (1: all heads equal; 0: one head does everything)."""
    w = np.clip(np.asarray(weights, dtype=float), 0.0, None)
    w = w / w.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(w > 0, -w * np.log(w), 0.0)
    return terms.sum(axis=1) / math.log(w.shape[1])


def prune_to_top_heads(model, weights: np.ndarray) -> list[int]:
    """Keep all heads of block 0 and only the highest-weight head of every later block
    (Chen et al. Section 3). Sets the model's ``head_mask`` buffers in place; returns the
    kept head of each block after the first."""
    kept = []
    with torch.no_grad():
        for i, mask in enumerate(model.head_masks[1:], start=1):
            top = int(np.nanargmax(weights[i]))
            mask.zero_()
            mask[top] = 1.0
            kept.append(top)
    return kept


def _query_states(model, prompt, position: int) -> list[torch.Tensor]:
    with torch.no_grad():
        states = model.hidden_states(prompt.x, prompt.y, prompt.n_context)
    return [h[:, position].double() for h in states]


def layer_probes(model, train, test, ridge: float = 1e-3) -> np.ndarray:
    """Excess risk of a linear probe (with bias, ridge ``ridge``) from the first query
    token's hidden state to its label, for the read-in output and each block's output.

    Args:
        model: stacked-layout transformer; train / test: prompts with the same n_context
            (the probe is fit on ``train`` and scored on ``test``).

    Returns:
        ``(L + 1,)`` held-out ``MSE - noise_std^2`` (Chen et al. Fig. 1d / 5-8).
    """
    if train.n_context != test.n_context:
        raise ValueError(f"train and test must have the same n_context, got "
                         f"{train.n_context} and {test.n_context}")
    tr = _query_states(model, train, train.n_context)
    te = _query_states(model, test, test.n_context)
    y_tr = train.y[:, train.n_context].double()
    y_te = test.y[:, test.n_context].double()
    out = []
    for h_tr, h_te in zip(tr, te):
        A = torch.cat([h_tr, torch.ones(len(h_tr), 1, dtype=h_tr.dtype)], 1)
        B = torch.cat([h_te, torch.ones(len(h_te), 1, dtype=h_te.dtype)], 1)
        reg = ridge * len(A) * torch.eye(A.shape[1], dtype=A.dtype)
        reg[-1, -1] = 0.0
        coef = torch.linalg.solve(A.T @ A + reg, A.T @ y_tr)
        out.append(float(((B @ coef - y_te) ** 2).mean()) - test.noise_std ** 2)
    return np.array(out)


def first_block_query_features(model, prompt) -> torch.Tensor:
    """The first block's output at the ``q`` query tokens: ``(B, q, d_model)`` float64
    (Chen et al. Fig. 2a's ``x~_{n+1..n+q}``; query tokens carry no label)."""
    with torch.no_grad():
        h1 = model.hidden_states(prompt.x, prompt.y, prompt.n_context)[1]
    return h1[:, prompt.n_context:].double()


def p_probing(features: torch.Tensor, y: torch.Tensor, steps: int, lrs, noise_std: float = 0.0,
              per_prompt: bool = False):
    """GD from 0 on the first ``q - 1`` (feature, label) pairs, scored on the last pair.

    Args:
        features: ``(B, q, D)``; y: ``(B, q)`` the query labels; steps: GD steps (>= 0);
        lrs: step sizes to try (the paper's grid 1, 0.1, ..., 1e-6); per_prompt: also return
        the squared errors of every prompt for the selected step size.

    Returns:
        ``(curves, best)``: ``curves`` of shape ``(len(lrs), steps + 1)``, the mean excess
        risk ``(yhat_q - y_q)^2 - noise_std^2`` after k steps for each step size (inf where
        GD diverged), and the index of the step size with the lowest mean over steps; with
        ``per_prompt``, ``(curves, best, errors)`` where ``errors`` is ``(steps + 1, B)``, the
        squared errors at step size ``lrs[best]``.
    """
    from .theory.chen import best_curve, gd_path
    steps = check_int("steps", steps, minimum=0)
    X, Y = features[:, :-1].double(), y[:, :-1].double()
    xq, yq = features[:, -1].double(), y[:, -1].double()
    curves, errors = [], []
    for lr in lrs:
        W = gd_path(X, Y, float(lr), steps)                      # (steps + 1, B, D)
        err = (torch.einsum("tbd,bd->tb", W, xq) - yq) ** 2        # (steps + 1, B)
        c = err.mean(1).numpy() - noise_std ** 2
        curves.append(np.where(np.isfinite(c), c, np.inf))
        errors.append(err)
    curves = np.array(curves)
    best = best_curve(curves)
    return (curves, best, errors[best]) if per_prompt else (curves, best)


# --- Chen et al.'s trained encoders: building, loading, evaluating, analysing ----------------
def model_name(h: int, L: int, noise_std: float, pruned: bool = False, seed: int = 0) -> str:
    """Key of a trained model in a ``chen.train`` result, e.g. ``"h4_L4_s0.1"``
    (``"h4_L4_s0.1_seed1"`` for another seed, ``..._pruned`` after pruning)."""
    return f"h{h}_L{L}_s{noise_std:g}" + (f"_seed{seed}" if seed else "") + ("_pruned" if pruned else "")


def build_encoder(cfg, h, L):
    if cfg.get("decoder"):   # Appendix G: GPT-2-like decoder on Garg et al.'s interleaved tokens
        return Transformer(cfg["d"], d_model=cfg["d_model"], n_layers=L, n_heads=h, norm="pre",
                           layout="interleaved")
    return Transformer(cfg["d"], d_model=cfg["d_model"], n_layers=L, n_heads=h, norm="post",
                       layout="stacked")


def eval_prompts(cfg, noise_std, n_context=10, n_queries=1, n_prompts=None, tag=0):
    """The shared evaluation prompts (same seed for every model)."""
    task = SparseLinearRegression(cfg["d"], cfg["s"], noise_std)
    return task.sample(n_prompts or cfg["eval_prompts"], n_context + n_queries, n_context=n_context,
                       seed=derive_seed(cfg["seed"], 777, tag, int(round(1000 * noise_std))))


def query_risk(model, prompt):
    """Excess risk at the query: its mean squared error minus the noise variance."""
    return query_error(model, prompt) - prompt.noise_std ** 2


def load_models(result: Result) -> dict:
    """``name -> Transformer`` (eval mode, CPU) rebuilt from a ``chen.train`` result."""
    cfg, models = result.config, {}
    for name in result.metrics["models"]:
        h, L = (int(part[1:]) for part in name.split("_")[:2])
        model = build_encoder(cfg, h, L)
        prefix = f"model/{name}/"
        state = {k[len(prefix):]: torch.from_numpy(np.asarray(v)) for k, v in result.arrays.items()
                 if k.startswith(prefix)}
        model.load_state_dict(state)
        models[name] = model.eval()
    return models


def icl_curve(model, cfg, noise_std, ns, n_prompts=2048) -> np.ndarray:
    """The model's excess risk at one query after n examples, for each n (Fig. 1b / 3: the
    models are trained at n = 12 only, other n test length generalisation)."""
    return np.array([query_risk(model, eval_prompts(cfg, noise_std, n, 1, n_prompts, tag=1))
                     for n in ns])


def _pprobe_prompts(cfg, noise_std, pprobe_prompts):
    """P-probing's prompts (Fig. 2b): 117 examples and 11 queries, the same for every model."""
    return eval_prompts(cfg, noise_std, 117, 11, pprobe_prompts, tag=4)


def _analysis_prompts(cfg, noise_std, n_prompts):
    """The shared prompts of the head assessment (n = 10, one query) and the probes' training
    set (same seeds for every model)."""
    return (eval_prompts(cfg, noise_std, 10, 1, n_prompts, tag=2), eval_prompts(cfg, noise_std, 10, 1, n_prompts, tag=3))


def _pprobe(features, long, steps, noise_std) -> dict:
    """P-probing on ``features`` of the 117-example prompts ``long``: the best curve over the
    paper's step sizes, its step size, and the standard error over prompts at its lowest step."""
    from .theory.chen import LRS
    curves, best, errors = p_probing(features, long.y[:, 117:], steps, LRS, noise_std, per_prompt=True)
    curve = curves[best]
    err = errors[int(np.argmin(curve))]
    return {"curve": curve, "lr": LRS[best], "se": float(err.std() / math.sqrt(len(err)))}


def analyse_model(model, cfg: dict, noise_std: float, n_prompts: int = 8192, pprobe_prompts: int = 1024,
                  pprobe_steps: int = 100, assess_heads: bool = True) -> dict:
    """The analyses of Chen et al. that read one trained model alone (its prompts shared with
    every other model at ``noise_std``): ``delta`` / ``weights`` ((L, h) head assessment, eq. 3.1,
    Fig. 1c / 4; n = 10, one query, ``n_prompts`` prompts) and ``dominance_se`` ((L,) bootstrap
    standard error of each layer's largest weight), only with ``assess_heads``; ``probes`` ((L + 1,) per-layer ridge
    probes, Fig. 1d / 5-8), and, when ``pprobe_steps`` > 0, ``pprobe`` / ``pprobe_lr`` /
    ``pprobe_se`` (Fig. 2b: the best curve over ``pprobe_steps`` GD steps on the first block's
    query features, its step size, and the standard error over prompts at its lowest point)."""
    test, probe_train = _analysis_prompts(cfg, noise_std, n_prompts)
    out = {}
    if assess_heads:
        out["delta"], out["base"], samples = head_importance(model, test, per_prompt=True)
        out["weights"] = head_weights(out["delta"])
        out["dominance_se"] = dominance_se(samples)
    out["probes"] = layer_probes(model, probe_train, test)
    if pprobe_steps:
        long = _pprobe_prompts(cfg, noise_std, pprobe_prompts)
        pp = _pprobe(first_block_query_features(model, long), long, pprobe_steps, noise_std)
        out["pprobe"], out["pprobe_lr"], out["pprobe_se"] = pp["curve"], pp["lr"], pp["se"]
    return out


def pprobe_references(cfg: dict, noise_std: float, pprobe_prompts: int = 1024, pprobe_steps: int = 100) -> dict:
    """Fig. 2b's two references, on :func:`analyse_model`'s P-probing prompts: GD on the raw
    covariates and on the ideal Algorithm 1 (``r_hat`` from the 117 examples): name ->
    ``{"curve": (pprobe_steps + 1,) best curve, "lr": its step size, "se": standard error}``."""
    from .theory.chen import preprocess
    long = _pprobe_prompts(cfg, noise_std, pprobe_prompts)
    return {"raw x": _pprobe(long.x[:, 117:].double(), long, pprobe_steps, noise_std),
            "Algorithm 1 (ideal)": _pprobe(preprocess(long.x.double(), long.y.double(), 117)[:, 117:], long,
                                           pprobe_steps, noise_std)}


def analyse_trained(models: dict, cfg: dict, noise_std: float, h: int, L: int,
                    n_prompts: int = 8192, pprobe_prompts: int = 1024, pprobe_steps: int = 100,
                    seed: int = 0) -> dict:
    """Every trained-model analysis of Chen et al. on the ``h``-head, ``L``-layer model, its
    pruned version and the 1-head model of the same depth (all at ``noise_std``), from
    :func:`analyse_model` and :func:`pprobe_references`.

    Returns a dict with ``delta`` / ``weights`` (head assessment, Fig. 1c / 4, n = 10, one
    query, ``n_prompts`` prompts), ``probes`` (per-layer ridge probes, Fig. 1d / 5-8: name ->
    ``(L + 1,)``), ``pprobe`` (Fig. 2b: name -> best curve over ``pprobe_steps`` GD steps,
    for the 1- and h-head models, raw x and the ideal Algorithm 1) and ``pprobe_lr``."""
    kw = dict(n_prompts=n_prompts, pprobe_prompts=pprobe_prompts, pprobe_steps=pprobe_steps)
    pruned = models.get(model_name(h, L, noise_std, pruned=True, seed=seed))
    each = {"h=%d" % h: analyse_model(models[model_name(h, L, noise_std, seed=seed)], cfg, noise_std, **kw),
            "pruned h=%d" % h: None if pruned is None else analyse_model(pruned, cfg, noise_std, **dict(kw, pprobe_steps=0),
                                                                  assess_heads=False),
            "h=1": analyse_model(models[model_name(1, L, noise_std, seed=seed)], cfg, noise_std, **kw, assess_heads=False)}
    multi = each["h=%d" % h]
    out = {"delta": multi["delta"], "base": multi["base"], "weights": multi["weights"],
           "probes": {name: a["probes"] for name, a in each.items() if a is not None}}
    curves = {name: {"curve": each[name]["pprobe"], "lr": each[name]["pprobe_lr"]}
              for name in ("h=1", "h=%d" % h)} if pprobe_steps else {}
    if pprobe_steps:
        curves.update(pprobe_references(cfg, noise_std, pprobe_prompts, pprobe_steps))
    out["pprobe"] = {name: c["curve"] for name, c in curves.items()}
    out["pprobe_lr"] = {name: c["lr"] for name, c in curves.items()}
    return out


def load_committed() -> tuple[dict, dict, str, list]:
    """The committed trained models: ``chen.train/paper`` if it exists, else every
    ``chen.train/mid*`` folder merged, found by :mod:`icl_core.committed` (downloaded
    outside a checkout). Returns ``(models, config, scale, results)``; ``models`` is empty when
    nothing is committed; ``config`` is the first result's with ``heads``, ``layers`` and
    ``seeds`` merged over all of them."""
    from . import committed
    names = committed.folders("chen.train")
    paper = committed.find("chen.train", "paper") if "paper" in names else None
    folders = [paper] if paper is not None else [
        f for f in (committed.find("chen.train", n) for n in names if n.startswith("mid")) if f is not None]
    models, results = {}, [Result.load(f) for f in folders]
    for r in results:
        models.update(load_models(r))
    cfg = dict(results[0].config) if results else {}
    if results:   # the merged folders differ in their head counts, depths and seeds only
        cfg["heads"] = sorted({h for r in results for h in r.config["heads"]})
        cfg["layers"] = sorted({L for r in results for L in r.config["layers"]})
        cfg["seeds"] = sorted({r.config["seed"] for r in results})
    return models, cfg, (results[0].scale if results else ""), results
