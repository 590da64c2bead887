"""Command line: ``python -m icl_core list``,
``python -m icl_core run <recipe> --scale ci|paper|<extra> --device auto --out results/<recipe>/<scale>``
and ``python -m icl_core continue <long run> --minutes 8 --device cuda`` (a long run, one piece)."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import textwrap

from .recipes import SCALES, get_recipe, list_recipes, run


def _overrides(items) -> dict:
    """``["steps=100", ...]`` -> ``{"steps": 100}`` (values parsed as JSON where they parse)."""
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def _committed_time(name: str, scale: str) -> str:
    """The wall time of the result committed for ``name`` at ``scale`` (where the package sits in
    a checkout with ``results/``), as a short string; "-" when none is committed."""
    from pathlib import Path
    from .results import Result
    folder = Path(__file__).resolve().parent.parent / "results" / name / scale
    if not (folder / "result.json").exists():
        return "-"
    try:
        prov = Result.load(folder).provenance
    except ValueError:
        return "-"
    t = float(prov.get("wall_time_s", 0.0))
    when = f"{t:.0f} s" if t < 120 else (f"{t / 60:.0f} min" if t < 7200 else f"{t / 3600:.1f} h")
    return f"{when} on {prov.get('device', '?')}"


def _list(pattern: str | None, configs: bool) -> int:
    """The recipes as a table: name, scales, and the wall time of each committed result."""
    rows = [r for r in list_recipes() if not pattern or pattern.lower() in (r.name + " " + r.description).lower()]
    if not rows:
        print(f"no recipe matches {pattern!r}", file=sys.stderr)
        return 2
    width = max(len(r.name) for r in rows)
    print(f"{'recipe':{width}s}  scales (committed result: its wall time)")
    for r in rows:
        times = {sc: _committed_time(r.name, sc) for sc in r.configs}
        scales = ", ".join(sc if t == "-" else f"{sc} ({t})" for sc, t in times.items())
        print(f"{r.name:{width}s}  {scales}")
        print(f"{'':{width}s}  {textwrap.shorten(r.description, 100)}")
        if configs:
            for scale, cfg in r.configs.items():
                print(f"{'':{width}s}    {scale}: {json.dumps(cfg)}")
    print(f"\n{len(rows)} recipe(s). Run one with: python -m icl_core run <recipe> --scale ci|paper|mid"
          + ("" if configs else "   (--configs shows every setting)"))
    return 0


def _summary(metrics: dict, limit: int = 8) -> str:
    """A few scalar metrics, rounded: what a person reads after a run (the rest is in result.json)."""
    scalars = [(k, v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    shown = ", ".join(f"{k} = {v:.4g}" for k, v in scalars[:limit])
    more = len(metrics) - min(len(scalars), limit)
    return shown + (f" (+{more} more in result.json)" if more > 0 else "")


def _plot(folder: str, out: str | None) -> int:
    import matplotlib
    matplotlib.use("Agg")
    from .figures import figure_for
    from .plotting import result_label, use_style
    from .results import Result
    try:
        result = Result.load(folder)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    draw = figure_for(result.name, result.config)
    if draw is None:
        print(f"error: result {result.name!r} has no figure function of its own (see its chapter)",
              file=sys.stderr)
        return 2
    use_style()
    fig = draw(result, result_label(result, committed=True))
    target = out or f"{folder.rstrip('/')}/figure.png"
    fig.savefig(target, dpi=110)
    print(f"drew {result.name} ({result.scale} scale) to {target}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl_core", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_list = sub.add_parser("list", help="list the recipes, their scales and committed results")
    p_list.add_argument("pattern", nargs="?", help="only recipes whose name or description contains this")
    p_list.add_argument("--configs", action="store_true", help="show every scale's settings")
    names = ", ".join(r.name for r in list_recipes())
    p_run = sub.add_parser("run", help="run a recipe and save its Result",
                           epilog=textwrap.fill(f"recipes: {names}. Their scales and settings: "
                                                "python -m icl_core list --configs", 100),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    p_run.add_argument("recipe")
    p_run.add_argument("--scale", default="ci",
                       help=f"{' | '.join(SCALES)}, or an extra scale the recipe lists (e.g. mid)")
    p_run.add_argument("--device", default="auto", help="auto (cuda, mps, cpu), cpu, cuda, mps")
    p_run.add_argument("--out", default=None,
                       help="folder for result.json + arrays.npz (default $ICL_BOOK_RESULTS or ./results, "
                            "then <recipe>/<scale>: where the notebooks look first)")
    p_run.add_argument("--seed", type=int, default=None)
    p_run.add_argument("--overwrite", action="store_true",
                       help="replace an existing result in --out (refused otherwise)")
    p_run.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                       help="override a config entry, e.g. --set steps=100")
    p_run.add_argument("--json", action="store_true", help="print every metric as JSON at the end")
    p_cont = sub.add_parser("continue", help="continue a long run from its committed checkpoint "
                                              "for a time budget (icl_core.long_runs)")
    p_cont.add_argument("long_run", nargs="?", help="its name; leave out to list them")
    p_cont.add_argument("--minutes", type=float, default=8.0, help="training budget (default 8)")
    p_cont.add_argument("--device", default="auto", help="auto (cuda, mps, cpu), cpu, cuda, mps")
    p_cont.add_argument("--dir", default=None, help="the run's folder (default results/<recipe>/<scale>)")
    p_cont.add_argument("--sha", default=None, help="git sha for provenance (where no .git is)")
    p_cont.add_argument("--compile", action="store_true", help="torch.compile the model (one-model runs)")
    p_cont.add_argument("--evaluate-only", action="store_true",
                        help="train nothing: score the committed state with this code's evaluation and add "
                             "the keys its newest piece lacks (on the CPU)")
    p_cont.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                        help="override a config entry (a folder written with others is refused)")
    p_plot = sub.add_parser("plot", help="draw a saved result with the book's figure function")
    p_plot.add_argument("folder", help="a result folder (result.json + arrays.npz)")
    p_plot.add_argument("--out", default=None, help="image file (default <folder>/figure.png)")
    args = parser.parse_args(argv)
    command = "python -m icl_core " + " ".join(shlex.quote(a) for a in
                                               (argv if argv is not None else sys.argv[1:]))

    if args.cmd == "plot":
        return _plot(args.folder, args.out)

    if args.cmd == "continue":
        from .long_runs import LONG_RUNS, committed_summary, continue_run, default_folder
        try:
            if args.long_run is None:
                from .recipes import _load_all
                _load_all()
                for name, r in sorted(LONG_RUNS.items()):
                    print(f"{name}\n    {r.description}\n    folder: {default_folder(r)} "
                          f"({committed_summary(default_folder(r))})")
                return 0
            if args.evaluate_only:
                from .long_runs import evaluate_committed
                if args.set or args.compile:
                    raise ValueError("--evaluate-only takes the committed settings: leave out --set and --compile")
                entry = evaluate_committed(args.long_run, folder=args.dir, sha=args.sha, command=command)
                added = entry["evaluations"][-1]["added"]
                print(f"step {entry['to_step']:,}: {len(added)} metric(s) added to the newest piece"
                      + (": " + ", ".join(added) if added else " (it had every one)"))
                return 0
            entry = continue_run(args.long_run, args.minutes, device=args.device, folder=args.dir,
                                 sha=args.sha, command=command, compile=args.compile,
                                 **_overrides(args.set))
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(json.dumps(entry["metrics"], indent=1))
        print(f"steps {entry['from_step']} -> {entry['to_step']} of {entry['steps_total']} "
              f"({entry['steps_per_s']:.1f} steps/s on {entry['provenance']['device']})")
        return 0

    if args.cmd == "list":
        return _list(args.pattern, args.configs)
    try:
        get_recipe(args.recipe)
        overrides = _overrides(args.set)
        if args.seed is not None:
            overrides["seed"] = args.seed
        from .committed import write_root
        out = args.out or str(write_root() / args.recipe / args.scale)
        result = run(args.recipe, args.scale, device=args.device, out=out, command=command,
                     overwrite=args.overwrite, **overrides)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.metrics, indent=1))
    else:
        print(_summary(result.metrics))
    print(f"saved to {out}  ({result.provenance['wall_time_s']:.1f} s on {result.provenance['device']}); "
          f"draw it with: python -m icl_core plot {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
