"""Command line: ``python -m icl_core list`` and
``python -m icl_core run <recipe> --scale ci|paper|<extra> --device auto --out results/<recipe>/<scale>``."""
from __future__ import annotations

import argparse
import json
import shlex
import sys

from .recipes import SCALES, get_recipe, list_recipes, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m icl_core", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the recipes and their scales")
    p_run = sub.add_parser("run", help="run a recipe and save its Result")
    p_run.add_argument("recipe")
    p_run.add_argument("--scale", default="ci",
                       help=f"{' | '.join(SCALES)}, or an extra scale the recipe lists (e.g. mid)")
    p_run.add_argument("--device", default="auto", help="auto (cuda, mps, cpu), cpu, cuda, mps")
    p_run.add_argument("--out", default=None,
                       help="folder for result.json + arrays.npz (default results/<recipe>/<scale>)")
    p_run.add_argument("--seed", type=int, default=None)
    p_run.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                       help="override a config entry, e.g. --set steps=100")
    args = parser.parse_args(argv)

    if args.cmd == "list":
        for r in list_recipes():
            print(f"{r.name}\n    {r.description}")
            for scale in r.configs:
                print(f"    {scale:5s} {json.dumps(r.configs[scale])}")
        return 0
    try:
        get_recipe(args.recipe)
        overrides = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--set expects KEY=VALUE, got {item!r}")
            try:
                overrides[key] = json.loads(value)
            except json.JSONDecodeError:
                overrides[key] = value
        if args.seed is not None:
            overrides["seed"] = args.seed
        out = args.out or f"results/{args.recipe}/{args.scale}"
        command = "python -m icl_core " + " ".join(shlex.quote(a) for a in
                                                   (argv if argv is not None else sys.argv[1:]))
        result = run(args.recipe, args.scale, device=args.device, out=out, command=command,
                     **overrides)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result.metrics, indent=1))
    print(f"saved to {out}  ({result.provenance['wall_time_s']:.1f} s on "
          f"{result.provenance['device']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
