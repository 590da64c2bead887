"""Speed benchmarks, run by hand (``make bench``), never part of CI's pass/fail.

Every number is a ratio (or a rate) measured in this one run on this machine, so the ratios
are comparable even when the machine is busy; the absolute times are not. Results are printed
and saved as JSON (``benchmarks/results/<device>.json`` by default) with provenance.

1. ensemble: K = 10 softmax attention units (Collins et al. Figure 3: d = 5, n = 20, 4 queries,
   sigma = 0.01, Adam lr 0.1 with decay 0.999) trained in one batched ``train`` call vs ten
   ``train`` calls one after another, one thread; steps per second and the ratio (at the
   paper's 1 task per step with one draw per step and with ``prefetch=100`` as the Collins
   recipes' paper configs use, and at batch 32). The ideal ratio is K (a batched step costing
   no more than one run's step). Then ensembles of models without native run support (4 small
   transformers, 2 Cheng et al. kernel transformers at the ci size of their recipe): the
   ``vmap`` and the separate modes of ``train`` against sequential runs.
2. transformer: a training step (forward, MSE, backward, Adam) of ``icl_core``'s Transformer
   vs Hugging Face ``GPT2Model`` wrapped the way Garg et al. do (linear read-in,
   ``inputs_embeds``, linear read-out), same width / depth / heads, batch 64, d = 20, 41
   points (82 tokens), one thread; ms per step, the ratio, and the achieved FLOP/s of our
   step against this machine's float32 matmul peak measured in the same run.
3. book: every notebook executed at scale="ci" (``scripts/book.py execute --force``): wall
   time per notebook and total, with as many parallel kernels as cores.
4. paper: each chapter's largest paper-scale training call (its models, batch and prompt
   length; lr and data law do not change the time): time per step after a warm-up, and the
   hours the paper recipe would take if every call were this size (an upper bound). Few steps
   on CPU (``--paper-steps``); the point is a GPU run.

Usage: python benchmarks/run.py [--device cpu|cuda] [--skip ensemble transformer book paper]
                                [--paper-steps N] [--compile] [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from icl_core import LinearRegression, SoftmaxUnit, Transformer, train  # noqa: E402
from icl_core.devices import device_name, pick_device  # noqa: E402
from icl_core.results import provenance  # noqa: E402


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


def bench_ensemble(dev, K=10, steps=400, batch_size=1, repeats=3, prefetch=1) -> dict:
    sampler = LinearRegression(5, noise_std=0.01, cov="identity")
    kw = dict(steps=steps, batch_size=batch_size, lr=0.1, lr_decay=0.999, n_points=24,
              n_queries=4, device=dev, progress=False, prefetch=prefetch)
    seq, ens = [], []
    for _ in range(repeats):        # interleave the two so load drifts hit both alike
        t0 = time.perf_counter()
        for k in range(K):
            train(SoftmaxUnit(5), sampler, seed=k, **kw)
        sync(dev); seq.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        train([SoftmaxUnit(5) for _ in range(K)], sampler, seed=0, **kw)
        sync(dev); ens.append(time.perf_counter() - t0)
    s, e = min(seq), min(ens)
    return {"K": K, "steps": steps, "batch_size": batch_size, "prefetch": prefetch,
            "sequential_run_steps_per_s": K * steps / s, "ensemble_run_steps_per_s": K * steps / e,
            "sequential_s": s, "ensemble_s": e, "speedup": s / e, "ideal_speedup": K,
            "sequential_us_per_run_step": 1e6 * s / (K * steps),
            "ensemble_us_per_step": 1e6 * e / steps}


def bench_model_ensemble(dev, make, sampler, K, steps, repeats=2, **kw) -> dict:
    """K models without native run support: one ``train`` call (vmap, then separate) vs K
    calls; the best of ``repeats`` interleaved rounds."""
    kw = dict(steps=steps, device=dev, progress=False, **kw)
    times = {"sequential": [], "vmap": [], "separate": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        for k in range(K):
            train(make(), sampler, seed=k, **kw)
        sync(dev); times["sequential"].append(time.perf_counter() - t0)
        for name, flag in (("vmap", True), ("separate", False)):
            t0 = time.perf_counter()
            train([make() for _ in range(K)], sampler, seed=0, vmap=flag, **kw)
            sync(dev); times[name].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    return {"K": K, "steps": steps, **{f"{k}_s": v for k, v in best.items()},
            "speedup_vmap": best["sequential"] / best["vmap"],
            "speedup_separate": best["sequential"] / best["separate"]}


def bench_transformer_ensemble(dev) -> dict:
    """4 small decoders (width 32, 2 layers, batch 64, 21 points)."""
    return bench_model_ensemble(dev, lambda: Transformer(5, 32, 2, 2), LinearRegression(5), K=4,
                                steps=30, batch_size=64, lr=1e-3, n_points=21)


def bench_kernel_ensemble(dev) -> dict:
    """2 seeds of Cheng et al.'s 3-layer kernel transformer with the four activations, at the
    ci size of ``cheng.figure1`` (batch 256, n = 14, a pool of 20 GP batches)."""
    from icl_core.models import KernelTransformer
    from icl_core.tasks import GPTask
    from icl_core.tasks.pool import PoolSampler
    pool = PoolSampler(GPTask(5, "exp", seed=0), 256, 15, 20, seed=1)
    acts = ["linear", "relu", "exp", "softmax"]
    return bench_model_ensemble(dev, lambda: KernelTransformer(5, 3, acts), pool, K=2, steps=60,
                                batch_size=256, lr=0.01, grad_clip=1.0, n_points=15)


class GargGPT2(torch.nn.Module):
    """Garg et al.'s TransformerModel: read-in, GPT2Model on inputs_embeds, read-out."""

    def __init__(self, d, width, layers, heads, n_points):
        super().__init__()
        from transformers import GPT2Config, GPT2Model
        cfg = GPT2Config(n_positions=2 * n_points, n_embd=width, n_layer=layers, n_head=heads,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        self.read_in = torch.nn.Linear(d, width)
        self.backbone = GPT2Model(cfg)
        self.read_out = torch.nn.Linear(width, 1)

    def forward(self, x, y, n_context):
        from icl_core.embed import interleaved_tokens
        h = self.backbone(inputs_embeds=self.read_in(interleaved_tokens(x, y))).last_hidden_state
        return self.read_out(h).squeeze(-1)[:, ::2]

    def target_of(self, y, n_context):
        return y


def step_time(model, x, y, dev, n=30, warmup=5) -> float:
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    times = []
    for i in range(warmup + n):
        sync(dev); t0 = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(x, y, x.shape[1] - 1), y)
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
        sync(dev)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def step_flops(model, x, y) -> int:
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        loss = torch.nn.functional.mse_loss(model(x, y, x.shape[1] - 1), y)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return fc.get_total_flops()


def matmul_peak(dev, n=1024, reps=20) -> float:
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    for _ in range(3):
        a @ b
    sync(dev); t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(dev)
    return 2 * n ** 3 * reps / (time.perf_counter() - t0)


def bench_transformer(dev, use_compile=False) -> dict:
    d, n_points, batch = 20, 41, 64
    sampler = LinearRegression(d)
    p = sampler.sample(batch, n_points, seed=0).to(dev)
    peak = matmul_peak(dev)
    out = {"matmul_peak_gflops": peak / 1e9, "configs": []}
    for width, layers, heads in ((64, 3, 2), (256, 12, 8)):
        torch.manual_seed(0)
        ours = Transformer(d, width, layers, heads).to(dev)
        torch.manual_seed(0)
        gpt2 = GargGPT2(d, width, layers, heads, n_points).to(dev)
        n, warm = (30, 5) if width == 64 else (3, 1)   # the big step takes seconds on one core
        t_ours, t_gpt2 = [], []
        for _ in range(2):          # interleaved repeats; the best of each
            t_ours.append(step_time(ours, p.x, p.y, dev, n=n, warmup=warm))
            t_gpt2.append(step_time(gpt2, p.x, p.y, dev, n=n, warmup=warm))
        flops = step_flops(ours, p.x, p.y)
        row = {"width": width, "layers": layers, "heads": heads, "batch": batch,
               "tokens": 2 * n_points, "ours_ms": 1e3 * min(t_ours), "gpt2_ms": 1e3 * min(t_gpt2),
               "ratio_ours_over_gpt2": min(t_ours) / min(t_gpt2),
               "ours_params": sum(q.numel() for q in ours.parameters()),
               "gpt2_params": sum(q.numel() for q in gpt2.parameters()),
               "ours_fwd_bwd_gflop": flops / 1e9,
               "ours_achieved_gflops": flops / min(t_ours) / 1e9,
               "ours_fraction_of_matmul_peak": flops / min(t_ours) / peak}
        if use_compile:
            t0 = time.perf_counter()
            compiled = torch.compile(ours)
            step_time(compiled, p.x, p.y, dev, n=1, warmup=0)
            row["compile_s"] = time.perf_counter() - t0
            row["ours_compiled_ms"] = 1e3 * step_time(compiled, p.x, p.y, dev, n=n)
        out["configs"].append(row)
    return out


def paper_calls():
    """(name, make models, sampler, train kwargs, steps of one call, calls in the recipe)."""
    from icl_core.models import LSA, KernelTransformer
    from icl_core.tasks import GPTask
    from icl_core.tasks.pool import PoolSampler
    from icl_core.tasks.sparse import SparseLinearRegression
    return [
        ("zhang.figure1 / foundations: Transformer 256/12/8 (Garg standard), 101 points, batch 64",
         lambda: Transformer(20, 256, 12, 8), LinearRegression(20),
         dict(batch_size=64, n_points=101), 500_000, 7),
        ("zhang.error_vs_M: structured LSA, d = 20, N = 100, batch 8192",
         lambda: LSA(20, "structured"), LinearRegression(20), dict(batch_size=8192, n_points=101),
         20_000, 3),
        ("collins.figure3: 40 softmax units (a panel: 4 L x 10 seeds), n = 20, batch 1, prefetch 100",
         lambda: [SoftmaxUnit(5) for _ in range(40)], LinearRegression(5, noise_std=0.01),
         dict(batch_size=1, n_points=24, n_queries=4, prefetch=100), 1500, 4),
        ("chen.train: 5 encoders 256/6/8 (one (h, L), the 5 noise levels), 12 + 4 points, batch 64",
         lambda: [Transformer(16, 256, 6, 8, layout="stacked", norm="post") for _ in range(5)],
         SparseLinearRegression(16, 4, 0.1), dict(batch_size=64, n_points=16, n_queries=4),
         380_000, 16),
        ("cheng.figure2: 3 seeds of an 8-layer softmax kernel transformer, n = 14, batch 30000",
         lambda: [KernelTransformer(5, 8, ["softmax"]) for _ in range(3)],
         PoolSampler(GPTask(5, "exp", seed=0), 30000, 15, 2, seed=1),
         dict(batch_size=30000, n_points=15, grad_clip=1.0), 20_000, 2 * 3 * 8),
    ]


def bench_paper(dev, steps) -> list:
    rows = []
    for name, make, sampler, kw, call_steps, calls in paper_calls():
        kw = dict(kw, lr=1e-4, device=dev, progress=False)
        train(make(), sampler, steps=1, **kw)                   # warm-up (allocator, kernels)
        sync(dev); t0 = time.perf_counter()
        train(make(), sampler, steps=steps, **kw)
        sync(dev); per = (time.perf_counter() - t0) / steps
        rows.append({"call": name, "s_per_step": per, "steps_per_call": call_steps,
                     "calls": calls, "recipe_hours_upper_bound": per * call_steps * calls / 3600})
        print(f"paper scale, {name}: {1e3 * per:.1f} ms per step -> recipe <= "
              f"{rows[-1]['recipe_hours_upper_bound']:.3g} h on {device_name(dev)}", flush=True)
    return rows


def bench_book() -> dict:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "scripts" / "book.py"), "execute", "--force"],
                   check=True, cwd=ROOT)
    total = time.perf_counter() - t0
    per = json.loads((ROOT / "_build" / "timings.json").read_text())
    return {"total_s": total, "per_notebook": per, "cores": os.cpu_count()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip", nargs="*", default=[],
                    choices=["ensemble", "transformer", "book", "paper"])
    ap.add_argument("--paper-steps", type=int, default=None,
                    help="timed steps per paper-scale call (default 20 on a GPU, 2 on CPU)")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile'd steps")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    dev = pick_device(args.device)
    torch.set_num_threads(1)
    report, t0 = {}, time.perf_counter()
    if "ensemble" not in args.skip:
        for key, kw in (("ensemble", {}), ("ensemble_prefetch", dict(prefetch=100))):
            e = report[key] = bench_ensemble(dev, **kw)
            print(f"ensemble of {e['K']} softmax units, {e['steps']} steps, batch "
                  f"{e['batch_size']}, prefetch {e['prefetch']}: sequential "
                  f"{e['sequential_us_per_run_step']:.0f} us per run-step, batched "
                  f"{e['ensemble_us_per_step']:.0f} us per step of all {e['K']} -> "
                  f"{e['speedup']:.1f}x (ideal {e['ideal_speedup']}x)", flush=True)
        e32 = report["ensemble_batch32"] = bench_ensemble(dev, batch_size=32, steps=200)
        print(f"  same at batch 32, prefetch 1: {e32['speedup']:.1f}x", flush=True)
        for key, label, f in (("ensemble_transformer", "4 transformers (32/2/2)",
                               bench_transformer_ensemble),
                              ("ensemble_kernel", "2 kernel transformers (Cheng ci)",
                               bench_kernel_ensemble)):
            et = report[key] = f(dev)
            print(f"ensemble of {label} vs sequential: vmap {et['speedup_vmap']:.2f}x, "
                  f"separate {et['speedup_separate']:.2f}x", flush=True)
    if "transformer" not in args.skip:
        tr = report["transformer"] = bench_transformer(dev, args.compile)
        print(f"matmul peak (float32, 1024^2, 1 thread): {tr['matmul_peak_gflops']:.1f} GFLOP/s")
        for r in tr["configs"]:
            extra = (f", compiled {r['ours_compiled_ms']:.1f} ms (compile {r['compile_s']:.0f} s)"
                     if "ours_compiled_ms" in r else "")
            print(f"transformer {r['width']}/{r['layers']}/{r['heads']}: ours {r['ours_ms']:.1f} ms, "
                  f"GPT2Model {r['gpt2_ms']:.1f} ms -> ratio {r['ratio_ours_over_gpt2']:.2f}; "
                  f"ours {r['ours_achieved_gflops']:.1f} GFLOP/s = "
                  f"{100 * r['ours_fraction_of_matmul_peak']:.0f}% of peak{extra}", flush=True)
    if "paper" not in args.skip:
        report["paper"] = bench_paper(dev, args.paper_steps or (2 if dev.type == "cpu" else 20))
    if "book" not in args.skip:
        b = report["book"] = bench_book()
        print(f"book at ci scale: {b['total_s']:.0f} s total on {b['cores']} cores: "
              + ", ".join(f"{k} {v}" for k, v in b["per_notebook"].items()))
    report["provenance"] = provenance(device_name(dev), time.perf_counter() - t0, None)
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"{dev.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"saved {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
