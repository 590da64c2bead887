"""``train(...)``: the one training loop of the library, for one model or many at once.

* fresh prompts every step from the run's own three random streams (covariates, tasks,
  noise; :class:`~icl_core.prompts.Streams`) seeded by ``seed``; the streams' states are
  checkpointed, so a resumed run sees exactly the batches an uninterrupted one would;
* **ensembles**: pass a list of K models of the same shape (and optionally K samplers and
  K seeds) and they train together in one call: the loss computed for all runs at once (one
  call of a run-batched model on parameters stacked with ``torch.func.stack_module_state``;
  ``vmap`` of any other model on an accelerator, on CPU each model in turn: see :class:`icl_core.ensembles.Runs`),
  one Adam over all the runs' parameters. Adam is elementwise and the runs' losses are
  summed, so each run follows exactly the trajectory it would follow alone (to float
  tolerance), on its own data;
* ``prefetch``: the prompts of several steps drawn at once (tiny models at one task per
  step spend a quarter of their step drawing data);
* Adam (Garg et al.: lr 1e-4, batch 64), MSE over every predicted position;
* optional curriculum (Garg et al. Section 3: dimensions 5 -> 20 and points 11 -> 41,
  stepped every 2,000 steps);
* checkpoints every ``checkpoint_every`` steps, written atomically; ``resume=True``
  continues from the checkpoint at ``checkpoint_path`` if there is one;
* a non-finite loss raises :class:`TrainingDiverged` naming the step and the last good
  checkpoint; losses stay on the device and are checked every 100 steps and before every
  checkpoint and trace (one host-device synchronisation per check, not per step);
* a tqdm progress bar, silent when ``CI`` is set, when ``ICL_CORE_PROGRESS=0``, or when
  stderr is neither a terminal nor a notebook.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .checkpoints import atomic_save, fingerprint, fingerprint_mismatch, load_checkpoint
from .devices import pick_device
from .ensembles import LossLog, Runs
from .prompts import Streams
from .validation import check_float, check_int


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite."""


@dataclass
class Curriculum:
    """Garg et al.'s curriculum: ``d_active`` and ``n_points`` grow by ``*_step`` every
    ``interval`` steps from their start to their end values."""

    dims: tuple[int, int, int]       # (start, end, increment)
    points: tuple[int, int, int]     # (start, end, increment)
    interval: int = 2000

    def __post_init__(self):
        for name, (start, end, inc) in (("dims", self.dims), ("points", self.points)):
            check_int(f"{name} start", start, minimum=1)
            check_int(f"{name} end", end, minimum=start)
            check_int(f"{name} increment", inc, minimum=0)
        check_int("interval", self.interval, minimum=1)

    @classmethod
    def garg(cls, d: int = 20, n_points: int = 41, interval: int = 2000) -> "Curriculum":
        """Garg et al.'s schedule for linear regression, ending at (d, n_points)."""
        return cls((min(5, d), d, 1), (min(11, n_points), n_points, 2), interval)

    def at(self, step: int) -> tuple[int, int]:
        """``(d_active, n_points)`` at ``step``."""
        k = step // self.interval
        (d0, d1, dd), (p0, p1, dp) = self.dims, self.points
        return min(d1, d0 + k * dd), min(p1, p0 + k * dp)


@dataclass
class TrainResult:
    """What a training run hands back: the per-step losses (``(steps,)``, or ``(K, steps)``
    for an ensemble of K runs) and how the run was made."""

    losses: np.ndarray
    steps: int
    seed: int | list
    device: str
    wall_time_s: float
    checkpoint: str | None = None
    config: dict = field(default_factory=dict)
    trace: list = field(default_factory=list)   # [(step, trace(models)), ...] if asked for
    finished: bool = True                        # False: stopped by max_seconds at ``steps``


def progress_enabled() -> bool:
    """Whether training shows a progress bar (see the module docstring)."""
    if os.environ.get("CI") or os.environ.get("ICL_CORE_PROGRESS", "1") == "0":
        return False
    return sys.stderr.isatty() or "ipykernel" in sys.modules


class _Prompts:
    """The runs' training prompts, drawn ``prefetch`` steps at a time.

    Run k's prompts for the steps of one chunk come from one ``draw`` of ``L * B`` prompts
    from its own streams (step j of the chunk takes prompts ``j B .. (j + 1) B - 1``), so a run
    sees the same data alone or in an ensemble. Chunks start at multiples of ``prefetch``
    counted from the start of each curriculum stage and never cross a stage (``prefetch = 1``:
    one draw per step). A chunk is drawn whole even past the last step, so the data of a step
    never depends on ``steps`` and a resumed run matches an uninterrupted one."""

    def __init__(self, samplers, streams, batch_size, prefetch, n_points, n_queries,
                 curriculum, device, keep_states):
        self.samplers, self.streams = samplers, streams
        self.B, self.P, self.T, self.nq = batch_size, prefetch, n_points, n_queries
        self.curriculum, self.device, self.keep_states = curriculum, device, keep_states
        self.shared = len(samplers) > 1 and all(s is samplers[0] for s in samplers)
        self.start, self.length, self.states = 0, 0, None

    def chunk_start(self, step: int) -> int:
        stage = step - step % self.curriculum.interval if self.curriculum is not None else 0
        return stage + (step - stage) // self.P * self.P

    def _draw(self, step: int):
        start = self.chunk_start(step)
        length = self.P
        if self.curriculum is not None:
            interval = self.curriculum.interval
            length = min(length, interval - start % interval)
        self.states = ([st.get_state() for st in self.streams]
                       if self.keep_states and length > 1 else None)
        d_active, T = self.curriculum.at(start) if self.curriculum is not None else (None, self.T)
        B, K, n = self.B, len(self.samplers), length * self.B
        if self.shared:
            x, y = self.samplers[0].draw_runs(self.streams, n, T, d_active)
        else:
            draws = [s.draw(st, n, T, d_active) for s, st in zip(self.samplers, self.streams)]
            x, y = torch.stack([dr[0] for dr in draws]), torch.stack([dr[1] for dr in draws])
        # (K, L B, ...) -> (L, K, B, ...): the batch of step j is the contiguous x[j]
        self.x = x.view(K, length, B, T, -1).transpose(0, 1).contiguous().to(self.device)
        self.y = y.view(K, length, B, T).transpose(0, 1).contiguous().to(self.device)
        self.n_context = T - min(self.nq, T - 1)
        self.start, self.length = start, length

    def at(self, step: int):
        """``x (K, B, T, d), y (K, B, T), n_context`` of ``step`` (steps come in order)."""
        if not self.start <= step < self.start + self.length:
            self._draw(step)
        j = step - self.start
        return self.x[j], self.y[j], self.n_context

    def state(self, step: int) -> tuple[int, list]:
        """For a checkpoint taken before ``step``: the step the saved stream states belong to
        (the start of ``step``'s chunk if that chunk is already drawn) and those states."""
        if self.start < step < self.start + self.length:
            return self.start, self.states
        return step, [st.get_state() for st in self.streams]


class _DeferredInterrupt:
    """While active (and ``enabled``), Ctrl-C (SIGINT) only sets a flag that the training loop
    reads between steps, so a checkpoint is written from a consistent state before the
    interrupt is raised again. Only in the main thread; elsewhere a no-op."""

    def __init__(self, enabled: bool):
        self.enabled, self.hit, self.previous = enabled, False, None

    def __bool__(self):
        return self.hit

    def __enter__(self):
        import signal
        import threading
        if self.enabled and threading.current_thread() is threading.main_thread():
            def handler(signum, frame):
                self.hit = True
            self.previous = signal.signal(signal.SIGINT, handler)
        return self

    def __exit__(self, *exc):
        import signal
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
        return False


def _adam(params, lr, weight_decay, betas=(0.9, 0.999)):
    """Adam, the fused kernel where this torch has one for the device (fewer launches: the
    step of a small model is launch-bound), else the default implementation."""
    try:
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, betas=betas, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, betas=betas)


def _layer_clip(schedule) -> list[tuple[int, list[float]]]:
    """``train``'s ``layer_clip``, checked: ``[(from_step, [radius per layer]), ...]`` with
    steps rising from 0 and radii > 0, all entries the same number of layers."""
    try:
        rows = [(int(a), [float(r) for r in b]) for a, b in schedule]
    except (TypeError, ValueError):
        raise ValueError(f"layer_clip must be a list of (from_step, [radius per layer]) pairs, got {schedule!r}") from None
    if not rows or rows[0][0] != 0 or any(a >= b for (a, _), (b, _) in zip(rows, rows[1:])):
        raise ValueError(f"layer_clip's steps must start at 0 and rise, got {[a for a, _ in rows]}")
    if any(len(b) != len(rows[0][1]) or not b or min(b) <= 0 for _, b in rows):
        raise ValueError(f"layer_clip's radii must be > 0, one per layer, as many in every entry; got {schedule!r}")
    return rows


def available_memory(device) -> int:
    """Bytes that can still be allocated on ``device`` (CUDA: free device memory; CPU: the
    kernel's MemAvailable, else physical pages)."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def memory_estimate(models, d: int, batch_size: int, n_points: int, prefetch: int) -> int:
    """A lower estimate of the bytes one training step needs (float32): each run's parameters,
    gradients and Adam's two moments, its prefetched prompts, and for transformers the
    activations kept for the backward pass (about 16 values per token, width and layer)."""
    K = len(models)
    params = sum(p.numel() for p in models[0].parameters())
    state = 4 * params * 4
    data = prefetch * batch_size * n_points * (d + 1) * 4
    cfg = getattr(models[0], "config", None) or {}
    width, layers = cfg.get("d_model"), cfg.get("n_layers")
    tokens = batch_size * n_points * (2 if cfg.get("layout") == "interleaved" else 1)
    act = 16 * tokens * width * layers * 4 if width and layers else 0
    return K * (state + data + act)


def _check_memory(models, samplers, batch_size, n_points, prefetch, device):
    need = memory_estimate(models, samplers[0].d, batch_size, n_points, prefetch)
    have = available_memory(device)
    if need > have:
        raise ValueError(f"this run needs at least {need / 2**30:.1f} GiB on {torch.device(device).type} "
                         f"({len(models)} run(s), batch_size={batch_size}, n_points={n_points}, "
                         f"prefetch={prefetch}) but {have / 2**30:.1f} GiB are available: lower batch_size, "
                         "n_points, prefetch or the number of runs")


def _as_list(value, K: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != K:
            raise ValueError(f"{name} must have one entry per model ({K}), got {len(value)}")
        return list(value)
    return [value] * K


def train(model, sampler, steps: int, batch_size: int = 64, lr: float = 1e-4,
          seed=0, n_points: int | None = None, n_queries: int = 1,
          curriculum: Curriculum | None = None, checkpoint_every: int = 0,
          checkpoint_path: str | Path | None = None, resume: bool = True, device=None,
          grad_clip: float | None = None, weight_decay: float = 0.0,
          lr_decay: float | None = None, progress: bool | None = None,
          compile: bool = False, trace=None, trace_every: int = 0,
          prefetch: int = 1, vmap: bool | None = None,
          max_seconds: float | None = None, adam_betas: tuple = (0.9, 0.999),
          layer_clip=None) -> TrainResult:
    """Train ``model`` (or a list of K models, together) on prompts from ``sampler``.

    Args:
        model: a module with ``forward(x, y, n_context)`` and ``target_of(y, n_context)``
            (:class:`~icl_core.models.Transformer`, :class:`~icl_core.models.SoftmaxUnit`),
            or a list of K such modules of identical shape: an ensemble, trained in one
            batched call.
        sampler: a :class:`~icl_core.tasks.TaskSampler`, or a list of K (one per run, e.g.
            different noise levels); each sampler's ``d`` must equal its model's.
        steps: total optimisation steps (>= 1), counted from step 0 even when resuming.
        batch_size: prompts per step and run; lr: Adam learning rate (> 0).
        seed: the data seed of the run; for an ensemble a list of K seeds, or an int ``s``
            meaning seeds ``s, s+1, ..., s+K-1``. Run k of an ensemble sees exactly the data
            of ``train(models[k], samplers[k], ..., seed=seeds[k])``.
        n_points: points per prompt (context + queries); required without a curriculum.
        n_queries: how many of the points are queries (their labels are hidden; stacked
            models are scored on them). Interleaved decoders predict every point anyway.
        curriculum: a :class:`Curriculum`; overrides ``n_points`` and truncates dimensions.
        checkpoint_every: save every K steps (0: only at the end, if a path is given).
        checkpoint_path: where the checkpoint lives (parameters, optimizer, random streams,
            step, losses). resume: continue from it when it exists.
        device: ``None``/"auto" picks cuda, then mps, then cpu.
        grad_clip: clip each run's global gradient norm to this value.
        layer_clip: clip each run's gradient layer by layer instead (``Runs.clip_layers``;
            every parameter has a leading layer axis): ``[(from_step, [radius per layer]),
            ...]``, from step 0 on, each entry holding from its step to the next. With radii far
            below Adam's epsilon the step is a momentum step along each layer's normalised
            gradient: how Cheng et al.'s code trains (``icl_core.recipes.cheng``).
        adam_betas: Adam's (beta1, beta2), each in [0, 1).
        lr_decay: multiply the learning rate by this factor every step (ExponentialLR).
        trace: ``f(models) -> value`` called on the (list of) models at step 0 and every
            ``trace_every`` steps (e.g. the norm of M, a test error); the values are in
            ``TrainResult.trace`` as ``(step, value)`` pairs. Tracing is not checkpointed.
        compile: run the model through ``torch.compile`` (single models only), falling back
            to eager mode with a warning if compiling fails. Off by default: on small CPUs it
            costs tens of seconds and did not pay off (see ``benchmarks/``).
        prefetch: draw the prompts of this many steps at once (>= 1; each run one draw of
            ``prefetch * batch_size`` prompts from its streams, step j taking the j-th block of
            ``batch_size``). It pays where a step is tiny (a softmax unit at 1 task per step
            spends a quarter of its step drawing) and costs ``prefetch`` batches of memory per
            run. The data of a run is a function of (seed, prefetch): runs with other
            ``prefetch`` values see different, equally distributed prompts; a checkpoint
            resumes only with its own value. 1 (the default): one draw per step.
        vmap: for an ensemble of models without native run support (e.g. transformers):
            ``True`` computes the runs' losses with ``torch.func.vmap`` on stacked parameters,
            ``False`` runs each model's forward and backward in turn (same numbers); ``None``
            (default): vmap except on CPU, where it was 1.4-1.5x slower (``benchmarks/``). A
            resumed run keeps its checkpoint's choice (the optimizer state is laid out by it).
        max_seconds: stop after this much wall time (> 0; checked after every step), write
            the checkpoint and return with ``TrainResult.finished`` False and ``steps`` the
            step reached: a long run done in pieces (``icl_core.long_runs``). None: no limit.

    A checkpoint stores a fingerprint of everything that shapes the trajectory (the models'
    class, config and shapes, the samplers, batch size, learning rate and its decay, clipping,
    weight decay, prompt lengths, curriculum, prefetch, seeds); resuming with another value of
    any of them raises ``ValueError`` naming the keys that differ. Ctrl-C writes a checkpoint
    (when a path is given) before the interrupt propagates.

    Returns:
        :class:`TrainResult`; the models are trained in place.

    Raises:
        TrainingDiverged: a loss became non-finite (the message names the run, the step and
            the last good checkpoint).
    """
    models = list(model) if isinstance(model, (list, tuple)) else [model]
    K = len(models)
    if K == 0:
        raise ValueError("model must be a module or a non-empty list of modules")
    samplers = _as_list(sampler, K, "sampler")
    if isinstance(seed, (list, tuple)):
        seeds = [check_int("seed", s, minimum=0) for s in _as_list(seed, K, "seed")]
    else:
        seeds = [check_int("seed", seed, minimum=0) + k for k in range(K)]
    steps = check_int("steps", steps, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    lr = check_float("lr", lr, minimum=0.0, strict=True)
    checkpoint_every = check_int("checkpoint_every", checkpoint_every, minimum=0)
    prefetch = check_int("prefetch", prefetch, minimum=1)
    if lr_decay is not None:
        lr_decay = check_float("lr_decay", lr_decay, minimum=0.0, strict=True, maximum=1.0)
    if grad_clip is not None:
        grad_clip = check_float("grad_clip", grad_clip, minimum=0.0, strict=True)
    weight_decay = check_float("weight_decay", weight_decay, minimum=0.0)
    betas = tuple(check_float("adam_betas", b, minimum=0.0, maximum=0.999999) for b in adam_betas)
    if len(betas) != 2:
        raise ValueError(f"adam_betas must be two numbers in [0, 1), got {adam_betas!r}")
    clip_rows = None if layer_clip is None else _layer_clip(layer_clip)
    if clip_rows is not None and grad_clip is not None:
        raise ValueError("pass grad_clip or layer_clip, not both")
    if max_seconds is not None:
        max_seconds = check_float("max_seconds", max_seconds, minimum=0.0, strict=True)
    if checkpoint_every and checkpoint_path is None:
        raise ValueError(f"checkpoint_every={checkpoint_every} needs a checkpoint_path "
                         "(nothing would be written)")
    if curriculum is None:
        if n_points is None:
            raise ValueError("n_points must be given (an integer >= 2) when there is no curriculum")
        n_points = check_int("n_points", n_points, minimum=2)
    n_queries = check_int("n_queries", n_queries, minimum=1,
                          maximum=None if n_points is None else n_points - 1)
    for m, s in zip(models, samplers):
        if getattr(m, "d", s.d) != s.d:
            raise ValueError(f"the sampler has d={s.d} but the model was built for d={m.d}")
        if curriculum is not None and curriculum.dims[1] > s.d:
            raise ValueError(f"curriculum dims end at {curriculum.dims[1]}, above the sampler's d={s.d}: "
                             f"the curriculum's dimensions must be <= {s.d}")
    dev = pick_device(device)
    _check_memory(models, samplers, batch_size,
                  n_points if curriculum is None else curriculum.points[1], prefetch, dev)
    ckpt = Path(checkpoint_path) if checkpoint_path is not None else None
    state = None
    if ckpt is not None and resume and ckpt.exists():
        state = load_checkpoint(ckpt, map_location=dev)
        # the optimizer state is laid out per mode: resume in the checkpoint's (checkpoints
        # from before the separate mode existed were all vmap for such ensembles)
        legacy = "vmap" if K > 1 and not getattr(type(models[0]), "supports_runs", False) else None
        saved = state.get("mode", legacy)
        if saved in ("vmap", "separate"):
            if vmap is None:
                vmap = saved == "vmap"
            elif vmap != (saved == "vmap"):
                raise ValueError(f"vmap={vmap} but the checkpoint ({ckpt}) was written with "
                                 f"vmap={not vmap}, whose optimizer state it holds: pass "
                                 f"vmap={not vmap} (same numbers) or resume=False")
    runs = Runs(models, dev, compile=compile, use_vmap=vmap)
    opt = _adam(list(runs.params.values()), lr, weight_decay, betas)
    clip_from, clip_radii = ([a for a, _ in clip_rows], [torch.tensor(b, device=dev) for _, b in clip_rows]) \
        if clip_rows is not None else ([], [])
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, lr_decay) if lr_decay else None
    streams = [Streams.from_seed(s) for s in seeds]
    prompts = _Prompts(samplers, streams, batch_size, prefetch, n_points, n_queries, curriculum,
                       dev, keep_states=ckpt is not None)
    fp = None if ckpt is None else fingerprint(   # only checkpoints store and compare it
        models, samplers, seeds, batch_size=batch_size, lr=lr, lr_decay=lr_decay, grad_clip=grad_clip,
        weight_decay=weight_decay, n_points=n_points, n_queries=n_queries, prefetch=prefetch,
        layer_clip=clip_rows and [[a, b] for a, b in clip_rows], adam_betas=list(betas),
        curriculum=None if curriculum is None else
        [list(curriculum.dims), list(curriculum.points), curriculum.interval])
    start, losses, last_good = 0, [], None
    if state is not None:
        if state["seeds"] != seeds:
            raise ValueError(f"seed={seeds if K > 1 else seeds[0]} differs from the "
                             f"checkpoint's seed={state['seeds'] if K > 1 else state['seeds'][0]} "
                             f"({ckpt}); pass resume=False to start over")
        if state.get("prefetch", 1) != prefetch:
            raise ValueError(f"prefetch={prefetch} differs from the checkpoint's "
                             f"prefetch={state.get('prefetch', 1)} ({ckpt}): the data would "
                             "differ; pass the checkpoint's value or resume=False")
        if "fingerprint" in state:
            differ = fingerprint_mismatch(state["fingerprint"], fp)
            if differ:
                detail = "; ".join(f"{k}: checkpoint {state['fingerprint'][k]!r}, now {fp[k]!r}"
                                   for k in differ if k not in ("samplers", "model"))
                raise ValueError(f"the checkpoint {ckpt} was written by a run with other "
                                 f"{', '.join(differ)} ({detail or 'see the model and samplers'}); "
                                 "resuming would mix two trajectories: pass the checkpoint's "
                                 "settings, another checkpoint_path, or resume=False")
        if state["step"] > steps:
            raise ValueError(f"steps={steps} is below the checkpoint's step {state['step']} "
                             f"({ckpt}): pass steps >= {state['step']} or resume=False")
        runs.load(state["params"])
        opt.load_state_dict(state["optimizer"])
        if sched is not None:
            sched.load_state_dict(state["scheduler"])
        for st, saved in zip(streams, state["streams"]):
            st.set_state(saved)
        saved = state["losses"]           # a (steps, K) tensor; checkpoints of older versions: a list of rows
        start, last_good = state["step"], str(ckpt)
        losses = saved.tolist() if torch.is_tensor(saved) else list(saved)
        # the saved streams stand at the start of the chunk holding the next step
        if state.get("stream_step", start) != prompts.chunk_start(start):
            raise ValueError(f"the checkpoint's random streams ({ckpt}) do not match its step; "
                             "was it written by another version of icl_core?")

    log = LossLog(K, losses)

    def check(step_now):
        """Check the pending losses; a non-finite one raises (before any later checkpoint)."""
        bad = log.flush()
        if bad is None:
            return
        if bar is not None:
            bar.close()
        step, run, value = bad
        which = f"run {run} (seed {seeds[run]}): " if K > 1 else ""
        later = step_now - step - 1
        raise TrainingDiverged(
            f"{which}loss is {value} at step {step}; last good checkpoint: "
            f"{last_good or 'none (no checkpoint was written)'}"
            + (f" (losses are checked every {log.every} steps: the models in memory took "
               f"{later} more steps)" if later > 0 else ""))

    def save(step):
        check(step)
        stream_step, stream_states = prompts.state(step)
        atomic_save({"params": runs.state(), "optimizer": opt.state_dict(),
                      "scheduler": sched.state_dict() if sched is not None else None,
                      "streams": stream_states, "stream_step": stream_step,
                      "prefetch": prefetch, "mode": runs.mode, "step": step,
                      "losses": torch.tensor(losses, dtype=torch.float64).reshape(-1, K),
                      "seeds": seeds, "fingerprint": fp,
                      "model_config": getattr(models[0], "config", None)}, ckpt)
        return str(ckpt)

    trace_every = check_int("trace_every", trace_every, minimum=0)
    if trace is not None and not trace_every:
        raise ValueError("trace_every must be an integer >= 1 when trace is given, got 0")
    traced = []

    def record(step):
        check(step)                       # a trace never sees a diverged model
        runs.write_back()
        with torch.no_grad():
            traced.append((step, trace(runs.models if K > 1 else runs.models[0])))

    show = progress_enabled() if progress is None else progress
    bar = None
    if show:
        from tqdm.auto import tqdm
        bar = tqdm(total=steps, initial=start, desc=f"train x{K}" if K > 1 else "train",
                   leave=False)
    t0 = time.perf_counter()
    for m in runs.models:
        m.train()
    end = steps
    interrupted = _DeferredInterrupt(enabled=ckpt is not None)
    with interrupted:
        for step in range(start, steps):
            if trace is not None and step % trace_every == 0:
                record(step)
            x, y, n_context = prompts.at(step)
            opt.zero_grad(set_to_none=True)
            total, run_losses = runs.loss(x, y, n_context)
            log.add(step, run_losses)
            runs.backward(total)
            if grad_clip is not None:
                runs.clip(grad_clip)
            elif clip_rows is not None:
                runs.clip_layers(clip_radii[sum(a <= step for a in clip_from) - 1])
            opt.step()
            if sched is not None:
                sched.step()
            if log.due():
                check(step + 1)
                if bar is not None:
                    bar.set_postfix(loss=f"{sum(losses[-1]) / K:.4f}")
            if ckpt is not None and checkpoint_every and (step + 1) % checkpoint_every == 0:
                last_good = save(step + 1)
            if bar is not None:
                bar.update(1)
            if interrupted or (max_seconds is not None and time.perf_counter() - t0 >= max_seconds):
                end = step + 1
                break
    check(end)
    if bar is not None:
        bar.close()
    if ckpt is not None and start < end:
        last_good = save(end)
    if interrupted:
        print(f"interrupted: checkpoint at step {end} written to {last_good}", file=sys.stderr)
        raise KeyboardInterrupt
    if trace is not None and start < end:
        record(end)
    runs.write_back()
    for m in runs.models:
        m.eval()
    arr = np.asarray(losses, dtype=np.float64).reshape(-1, K).T
    return TrainResult(arr[0] if K == 1 else arr, end, seeds[0] if K == 1 else seeds,
                       dev.type, time.perf_counter() - t0, last_good,
                       {"batch_size": batch_size, "lr": lr, "n_points": n_points,
                        "n_queries": n_queries, "lr_decay": lr_decay, "n_runs": K,
                        "prefetch": prefetch,
                        "curriculum": None if curriculum is None else vars(curriculum)},
                       traced, finished=end == steps)
