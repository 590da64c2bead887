"""Ensembles: the K runs of one :func:`~icl_core.training.train` call as one batched loss.

A list of K models of one class, config and shape trains in one call; run k follows exactly
the trajectory it would follow alone (Adam is elementwise and the runs' losses are summed), on
its own data. How the K losses are computed depends on the model and the device
(:class:`Runs`); :class:`LossLog` keeps the per-step losses on the device and checks them in
batches.
"""
from __future__ import annotations

import copy
import math
import warnings

import torch

from .checkpoints import describe


def run_mode(models, device, use_vmap: bool | None = None) -> str:
    """How :class:`Runs` computes the K losses: ``"single"``, ``"stacked"``, ``"vmap"`` or
    ``"separate"`` (see :class:`Runs`); ``use_vmap`` None picks vmap except on CPU."""
    if len(models) == 1:
        return "single"
    if getattr(type(models[0]), "supports_runs", False):
        return "stacked"
    if use_vmap is None:
        use_vmap = torch.device(device).type != "cpu"
    return "vmap" if use_vmap else "separate"


def stacked_params(state: dict) -> dict:
    """A training checkpoint's parameters stacked over its runs, ``{name: (K, ...)}``: a
    checkpoint of one model (mode ``"single"``) holds them unstacked and gains a leading axis of 1."""
    if state.get("mode") == "single":
        return {n: v.unsqueeze(0) for n, v in state["params"].items()}
    return state["params"]


def unstack_into(models: list[torch.nn.Module], stacked: dict) -> None:
    """Copy parameters stacked over the runs (``{name: (K, ...)}``, as :meth:`Runs.state` and
    training checkpoints hold them) into the ``K`` models, model ``k`` taking slice ``k``."""
    if any(v.shape[0] != len(models) for v in stacked.values()):
        raise ValueError(f"the stacked parameters hold {sorted({v.shape[0] for v in stacked.values()})} runs, "
                         f"not the {len(models)} models given")
    with torch.no_grad():
        for k, m in enumerate(models):
            for n, p in m.named_parameters():
                p.copy_(stacked[n][k])


class Runs:
    """The K runs of one ``train`` call: their parameters and a batched loss.

    * ``"single"``: K = 1, the model called directly;
    * ``"stacked"``: K > 1 models declaring ``supports_runs`` (their forward accepts parameters
      and inputs with a leading run dimension, e.g. :class:`~icl_core.models.SoftmaxUnit`):
      one copy of the model holds the parameters stacked by ``torch.func.stack_module_state``
      and is called once on ``(K, B, ...)`` inputs;
    * ``"vmap"``: other models, parameters stacked, the loss ``vmap`` of a functional call
      (the default on accelerators, where a small model's step is launch-bound);
    * ``"separate"``: other models on CPU by default, where ``vmap`` measured 1.4-1.5x slower
      than training the runs one after another (``benchmarks/``): each model keeps its own
      parameters and does its forward and backward in turn (activations stay in cache), and
      one optimizer steps them all. Checkpoints store the parameters stacked in every mode."""

    def __init__(self, models: list[torch.nn.Module], device, compile: bool = False,
                 use_vmap: bool | None = None):
        self.models = [m.to(device) for m in models]
        self.K = len(models)
        self.stacked = None
        self.mode = run_mode(self.models, device, use_vmap)
        if self.mode == "single":
            self.params = dict(self.models[0].named_parameters())
            self.call = torch.compile(self.models[0]) if compile else self.models[0]
            return
        if compile:
            raise ValueError("compile=True is only supported for a single model, not an ensemble")
        from torch.func import functional_call, stack_module_state, vmap
        first = self.models[0]
        shapes, config = [p.shape for p in first.parameters()], describe(first).get("config")
        for k, m in enumerate(self.models[1:], 1):
            if type(m) is not type(first) or [p.shape for p in m.parameters()] != shapes or \
                    describe(m).get("config") != config:
                # the config too: e.g. transformers with 1 and 4 heads have equal shapes, but
                # a batched call would run every model with model 0's head count
                raise ValueError(f"models must all have the same class, config and shapes to "
                                 f"train as an ensemble; model {k} differs from model 0")
        if self.mode == "stacked":
            self.params, _ = stack_module_state(self.models)
            self.stacked = copy.deepcopy(first)
            for name, value in self.params.items():
                owner, _, leaf = name.rpartition(".")
                mod = self.stacked.get_submodule(owner) if owner else self.stacked
                mod._parameters[leaf] = value if isinstance(value, torch.nn.Parameter) \
                    else torch.nn.Parameter(value)
            self.params = dict(self.stacked.named_parameters())
            return
        if self.mode == "separate":
            self.names = [name for name, _ in first.named_parameters()]
            self.params = {f"{k}.{name}": p for k, m in enumerate(self.models)
                           for name, p in m.named_parameters()}
            return
        self.params, self.buffers = stack_module_state(self.models)
        base = copy.deepcopy(first).to("meta")

        def one_run(params, buffers, x, y, n_context):
            pred = functional_call(base, (params, buffers), (x, y, n_context))
            return ((pred - base.target_of(y, n_context)) ** 2).mean()
        self._losses = vmap(one_run, in_dims=(0, 0, 0, 0, None))

    def loss(self, x: torch.Tensor, y: torch.Tensor, n_context: int):
        """``x (K, B, T, d), y (K, B, T)`` -> ``(total, values)``: ``total`` the scalar whose
        :meth:`backward` gives each run the gradient of its own mean squared error, and
        ``values`` those K errors ``(K,)``, detached (stacked mode: the prediction errors
        ``(K, ...)``, whose mean square per run is that error; :class:`LossLog` takes both).
        Call with the gradients zeroed: the separate mode accumulates each run's gradients
        here already (``total`` is None)."""
        mse = torch.nn.functional.mse_loss
        if self.mode == "single":
            m = self.models[0]
            try:
                pred = self.call(x[0], y[0], n_context)
            except Exception as err:  # torch.compile failed (no compiler, unsupported op...)
                if self.call is m:
                    raise
                warnings.warn(f"torch.compile failed ({type(err).__name__}: {err}); "
                              "continuing without it")
                self.call = m
                pred = m(x[0], y[0], n_context)
            total = mse(pred, m.target_of(y[0], n_context))
            return total, total.detach().reshape(1)
        if self.mode == "stacked":
            pred, target = self.stacked(x, y, n_context), self.stacked.target_of(y, n_context)
            # every run has the same number of targets: the sum of the runs' means is K times
            # the mean over all of them; the factor K enters as the seed of the backward pass
            # (see backward), one autograd node instead of five
            total = mse(pred, target)
            return total, pred.detach() - target     # errors: squared and averaged by LossLog
        if self.mode == "separate":
            values = []
            for m, xk, yk in zip(self.models, x, y):
                loss = mse(m(xk, yk, n_context), m.target_of(yk, n_context))
                loss.backward()
                values.append(loss.detach())
            return None, torch.stack(values)
        values = self._losses(self.params, self.buffers, x, y, n_context)
        return values.sum(), values.detach()

    def backward(self, total: torch.Tensor | None):
        """Gradients of the sum of the runs' losses from ``loss``'s ``total``."""
        if self.mode == "stacked":
            total.backward(torch.full_like(total, float(self.K)))
        elif total is not None:
            total.backward()

    def clip(self, max_norm: float):
        """Clip each run's global gradient norm to ``max_norm`` (runs never mix)."""
        if self.mode == "separate":    # per model, the leading dimension is not a run's
            groups = [(1, [p.grad for p in m.parameters() if p.grad is not None])
                      for m in self.models]
        else:
            groups = [(self.K, [p.grad for p in self.params.values() if p.grad is not None])]
        for lead, grads in groups:
            if not grads:
                continue
            sq = sum(g.reshape(lead, -1).pow(2).sum(1) for g in grads)       # (lead,)
            coef = (max_norm / (sq.sqrt() + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.view(-1, *[1] * (g.dim() - 1)) if lead > 1 else coef[0])

    def clip_layers(self, radii: torch.Tensor):
        """Clip each run's gradient layer by layer: the gradients of layer l (index l of every
        parameter's layer axis, its first after the run axis) to norm ``radii[l]`` together,
        ``radii (L,)`` (runs never mix). Every parameter must have that layer axis."""
        lead = 0 if self.mode in ("single", "separate") else 1       # where the layer axis is
        if self.mode == "separate":
            groups = [[p.grad for p in m.parameters() if p.grad is not None] for m in self.models]
        else:
            groups = [[p.grad for p in self.params.values() if p.grad is not None]]
        for grads in groups:
            bad = [tuple(g.shape) for g in grads if g.dim() <= lead or g.shape[lead] != len(radii)]
            if bad:
                raise ValueError(f"layer_clip gives {len(radii)} layers, but gradients of shapes {bad} have no "
                                 f"layer axis of that length (axis {lead})")
            if not grads:
                continue
            norm = sum(g.reshape(*g.shape[:lead + 1], -1).pow(2).sum(-1) for g in grads).sqrt()   # ([K,] L)
            r = radii.to(norm)
            coef = torch.where(norm > r, r / norm, torch.ones_like(norm))    # norm <= r (a zero one too): as is
            for g in grads:
                g.mul_(coef.view(*coef.shape, *[1] * (g.dim() - lead - 1)))

    def state(self) -> dict:
        """The parameters, stacked over the runs for an ensemble (the same in every mode)."""
        if self.mode == "separate":
            return {n: torch.stack([m.get_parameter(n).detach() for m in self.models]).clone()
                    for n in self.names}
        return {k: v.detach().clone() for k, v in self.params.items()}

    def load(self, state: dict):
        with torch.no_grad():
            if self.mode == "separate":
                for k, m in enumerate(self.models):
                    for n in self.names:
                        m.get_parameter(n).copy_(state[n][k])
                return
            for k, v in self.params.items():
                v.copy_(state[k])

    def write_back(self):
        """Copy the stacked parameters into the K models (a no-op unless stacked)."""
        if self.mode not in ("stacked", "vmap"):
            return
        with torch.no_grad():
            for k, m in enumerate(self.models):
                for name, p in m.named_parameters():
                    p.copy_(self.params[name][k])


class LossLog:
    """The runs' per-step losses, kept on the device and checked every ``every`` steps: one
    host-device synchronisation per check instead of one per step (and, for run-batched
    models, one reduction over many steps' errors instead of one per step)."""

    def __init__(self, K: int, losses: list, every: int = 100):
        self.K, self.losses, self.every = K, losses, every
        self.pending, self.first = [], 0

    def add(self, step: int, item: torch.Tensor):
        """``item``: the K losses ``(K,)``, or the K runs' errors ``(K, ...)``."""
        if not self.pending:
            self.first = step
        self.pending.append(item)

    def due(self) -> bool:
        return len(self.pending) >= self.every

    def flush(self):
        """Move the pending losses to ``losses``; returns ``(step, run, value)`` of the first
        non-finite one (the losses before it are kept), or None."""
        if not self.pending:
            return None
        rows, group = [], [self.pending[0]]
        for item in self.pending[1:] + [None]:        # consecutive items of one shape at once
            if item is not None and item.shape == group[0].shape:
                group.append(item)
                continue
            g = torch.stack(group)                     # (S, K) or (S, K, ...)
            rows.append(g if g.dim() == 2 else g.reshape(len(group), self.K, -1).pow(2).mean(-1))
            group = [item]
        values = torch.cat(rows).tolist()
        first, self.pending = self.first, []
        for i, row in enumerate(values):
            bad = [k for k, v in enumerate(row) if not math.isfinite(v)]
            if bad:
                return first + i, bad[0], row[bad[0]]
            self.losses.append(row)
        return None


