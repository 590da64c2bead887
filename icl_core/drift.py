"""Is a quantity of a model moving because the loss's gradient moves it, or because of the noise
of fresh batches?

Training on fresh prompts steps along one batch's gradient ``g_b`` at a time (Adam: along
``g_b / sqrt(v)``, ``v`` its running second moment). To first order a quantity ``q(theta)`` (a
distance to the identity, a norm) changes at the rate

    D_b = d/dt q(theta - t P g_b) at t = 0 = -<grad q, P g_b>,   P = 1 or diag(1 / (sqrt(v) + eps)),

per unit of step. ``D_b`` is linear in ``g_b``, so the mean of ``D_b`` over ``B`` batches is the
rate along the ``B``-batch gradient, and ``sd(D_b) / sqrt(B)`` its standard error: a mean beyond
two standard errors is a systematic pull (its sign says which way); a mean inside them with a
large ``sd`` says the single batches push ``q`` both ways and the quantity moves by noise, whose
second-order effect on a distance at its minimum is to raise it.
"""
from __future__ import annotations

import numpy as np
import torch

from .ensembles import stacked_params, unstack_into
from .validation import check_int


def second_moments(state: dict, names: list[str], runs: int) -> list[dict]:
    """Adam's bias-corrected second moments ``v_hat`` of a training checkpoint of
    :func:`~icl_core.training.train` that trained ``runs`` models as one call, one
    ``{parameter name: tensor}`` per model (shapes of the model's parameters). ``names``: the
    model's parameter names in ``named_parameters`` order."""
    opt = state["optimizer"]
    order = opt["param_groups"][0]["params"]
    slots = [opt["state"][i] for i in order]
    beta2 = opt["param_groups"][0]["betas"][1]

    def v_hat(slot, k=None):                          # bias-corrected; slice k of a stacked slot
        v = slot["exp_avg_sq"] if k is None else slot["exp_avg_sq"][k]
        return v / (1 - beta2 ** float(slot["step"]))
    if state.get("mode") == "single":                 # one model, unstacked
        if runs != 1 or len(slots) != len(names):
            raise ValueError(f"the checkpoint holds one model's {len(slots)} parameter slots, not runs x parameters "
                             f"= {runs} x {len(names)}")
        return [{n: v_hat(s) for n, s in zip(names, slots)}]
    if state.get("mode") == "separate":              # one optimizer slot per model and parameter
        if len(slots) != runs * len(names):
            raise ValueError(f"the checkpoint holds {len(slots)} parameter slots, not runs x parameters = "
                             f"{runs} x {len(names)}")
        per = [{n: slots[k * len(names) + j] for j, n in enumerate(names)} for k in range(runs)]
        return [{n: v_hat(s) for n, s in p.items()} for p in per]
    if len(slots) != len(names):                      # stacked over the runs: one slot per parameter
        raise ValueError(f"the checkpoint holds {len(slots)} parameter slots, not {len(names)} ({names})")
    return [{n: v_hat(s, k) for n, s in zip(names, slots)} for k in range(runs)]


def load_runs(state: dict, models: list[torch.nn.Module]) -> list[dict]:
    """Copy a checkpoint's parameters (:func:`~icl_core.ensembles.stacked_params`) into
    ``models``; return each model's Adam second moments
    (:func:`second_moments`)."""
    unstack_into(models, stacked_params(state))
    return second_moments(state, [n for n, _ in models[0].named_parameters()], len(models))


def batch_derivatives(model: torch.nn.Module, quantities, loss, batches, moments: dict | None = None,
                      eps: float = 1e-8) -> np.ndarray:
    """``(len(batches), len(quantities))``: per batch ``b``, the first-order rate of change of each
    quantity along that batch's descent step, ``-<grad q, P grad loss(model, b)>`` (module doc);
    ``P = 1 / (sqrt(moments) + eps)`` where ``moments`` (a ``{name: v_hat}`` of
    :func:`second_moments`) is given, else 1 (plain gradient descent).

    ``quantities``: functions ``model -> scalar tensor`` (differentiable in the parameters);
    ``loss``: ``(model, batch) -> scalar tensor``."""
    return batch_rates(model, quantities, loss, batches, {"step": moments}, eps)["step"]


def batch_rates(model: torch.nn.Module, quantities, loss, batches, steps: dict, eps: float = 1e-8) -> dict:
    """:func:`batch_derivatives` for several steps at once, each batch's loss gradient taken once:
    ``steps`` maps a name to its ``moments`` (``None``: plain gradient descent); returns
    ``{name: (len(batches), len(quantities)) array}``."""
    if not steps:
        raise ValueError("steps must name at least one step ({name: moments or None}), got none")
    params = dict(model.named_parameters())
    pre = {k: {n: 1.0 / (v[n].sqrt() + eps) if v is not None else 1.0 for n in params} for k, v in steps.items()}

    def grad(scalar):
        gs = torch.autograd.grad(scalar, list(params.values()), allow_unused=True)
        return {n: torch.zeros_like(p) if g is None else g for (n, p), g in zip(params.items(), gs)}
    dq = [grad(q(model)) for q in quantities]
    out = {k: [] for k in steps}
    for b in batches:
        g = grad(loss(model, b))
        for k, P in pre.items():
            out[k].append([-sum(float((d[n] * P[n] * g[n]).sum()) for n in params) for d in dq])
    return {k: np.array(v) for k, v in out.items()}


def summarize(derivs: np.ndarray) -> list[dict]:
    """Per quantity (a column of :func:`batch_derivatives`): ``mean`` (the rate along the
    all-batch gradient), ``se`` (its standard error), ``sd`` (one batch's spread) and ``pull``
    (``"up"``, ``"down"``: beyond two standard errors; ``"none"``: within them)."""
    d = np.asarray(derivs, dtype=float)
    check_int("batches", d.shape[0], minimum=2)
    out = []
    for col in d.T:
        mean, sd = float(col.mean()), float(col.std(ddof=1))
        se = sd / np.sqrt(len(col))
        out.append({"mean": mean, "se": se, "sd": sd,
                    "pull": "up" if mean > 2 * se else "down" if mean < -2 * se else "none"})
    return out
