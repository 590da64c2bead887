"""Recipes: each figure of the book as a named, configurable, rerunnable computation.

A recipe is a function ``fn(config: dict, device) -> Result`` registered with two
configs, ``"ci"`` (about a minute on 2 CPU cores, still shows the effect) and ``"paper"``
(the paper's settings, each deviation stated in the recipe's docstring). A recipe may add
more named scales (``"mid"``: the offline runs whose results are committed under
``results/<recipe>/mid/`` because neither CI nor a laptop could afford them live). Notebooks call
:func:`run` at their ``scale``; the CLI (``python -m icl_core run <recipe>``) calls the same
function and saves the :class:`~icl_core.results.Result` with provenance.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..devices import device_name, pick_device
from ..results import Result, git_sha, provenance
from ..validation import check_choice

SCALES = ("ci", "paper")


@dataclass
class Recipe:
    name: str
    fn: callable
    configs: dict
    description: str


RECIPES: dict[str, Recipe] = {}


def register(name: str, ci: dict, paper: dict, description: str, **more_scales: dict):
    """Decorator: register ``fn(config, device) -> Result`` under ``name``, with the configs
    of its scales (``ci``, ``paper`` and any extra ones such as ``mid``)."""
    def wrap(fn):
        RECIPES[name] = Recipe(name, fn, {"ci": ci, "paper": paper, **more_scales}, description)
        return fn
    return wrap


PAGES: dict[str, dict] = {}


def register_page(notebook: str, **scales: dict):
    """The settings a notebook computes with directly (Monte Carlo sizes, prompt counts), per
    scale, declared beside the chapter's recipes so that every scale lives in ``icl_core``."""
    PAGES[notebook] = scales


def page_config(notebook: str, scale: str) -> dict:
    """The settings of ``notebook`` (``"zhang/theory"``) at ``scale``."""
    _load_all()
    if notebook not in PAGES:
        raise ValueError(f"notebook must be one of {sorted(PAGES)}, got {notebook!r}")
    check_choice("scale", scale, set(PAGES[notebook]))
    return dict(PAGES[notebook][scale])


def all_scales() -> list[str]:
    """Every scale a recipe or page declares ("ci", "paper", "mid", ...)."""
    _load_all()
    found = {s for r in RECIPES.values() for s in r.configs} | {s for p in PAGES.values() for s in p}
    return sorted(found, key=lambda s: (s not in SCALES, SCALES.index(s) if s in SCALES else 0, s))


def get_recipe(name: str) -> Recipe:
    _load_all()
    if name not in RECIPES:
        raise ValueError(f"recipe must be one of {sorted(RECIPES)}, got {name!r}")
    return RECIPES[name]


def list_recipes() -> list[Recipe]:
    _load_all()
    return [RECIPES[k] for k in sorted(RECIPES)]


def config(name: str, scale: str, **overrides) -> dict:
    """The recipe's config at ``scale`` with ``overrides`` applied (unknown keys rejected)."""
    recipe = get_recipe(name)
    check_choice("scale", scale, set(recipe.configs))
    return apply_overrides(f"recipe {name!r}", recipe.configs[scale], overrides)


def apply_overrides(owner: str, base: dict, overrides: dict) -> dict:
    """A copy of the config ``base`` with ``overrides`` applied: unknown keys are refused, and
    each value must have its default's kind (:func:`check_override`). ``owner`` names whose
    config it is in the error ("recipe 'zhang.figure1'")."""
    cfg = dict(base)
    unknown = set(overrides) - set(cfg)
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)} for {owner}; allowed: {sorted(cfg)}")
    for key, value in overrides.items():
        check_override(key, value, cfg[key])
    cfg.update(overrides)
    return cfg


def check_override(key: str, value, default):
    """An override must have the kind of value its default has (an integer for an integer,
    a number for a number, a non-empty list for a non-empty list, a non-negative number where
    the default is positive); ``ValueError`` naming the key otherwise."""
    import numbers
    kind = None
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), "true or false"
    elif isinstance(default, numbers.Integral):
        ok, kind = isinstance(value, numbers.Integral) and not isinstance(value, bool), "an integer"
    elif isinstance(default, numbers.Real):
        ok, kind = isinstance(value, numbers.Real) and not isinstance(value, bool), "a number"
    elif isinstance(default, (list, tuple)):
        ok, kind = isinstance(value, (list, tuple)) and (len(value) > 0 or not default), "a non-empty list"
    else:
        ok = True
    if not ok:
        raise ValueError(f"{key} must be {kind} (like its default {default!r}), got {value!r}")
    if kind in ("an integer", "a number") and default > 0 and value < 0:
        raise ValueError(f"{key} must be >= 0 (its default is {default!r}), got {value!r}")


def check_out(out: str | Path, overwrite: bool = False, overrides: dict | None = None) -> Path:
    """Validate a result folder *before* a run: not a file, writable, and not an existing
    result unless ``overwrite`` (a run with ``overrides`` never silently replaces a result)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a folder, but {out} is a file")
    if (out / "result.json").exists() and not overwrite:
        what = f" with overrides {overrides}" if overrides else ""
        raise ValueError(f"{out} already holds a result; a run{what} would replace it: choose another "
                         "--out, or pass --overwrite (overwrite=True) to replace it")
    probe = out.parent if not out.exists() else out
    while not probe.exists():
        probe = probe.parent
    if not os.access(probe, os.W_OK):
        raise ValueError(f"out {out} is not writable ({probe} does not allow writing)")
    return out


def run(name: str, scale: str = "ci", device=None, out: str | Path | None = None,
        command: str | None = None, overwrite: bool = False, **overrides) -> Result:
    """Run recipe ``name`` at ``scale`` ("ci", "paper" or one of the recipe's extra scales),
    optionally saving to ``out`` (checked before the run; an existing result there is only
    replaced with ``overwrite=True``)."""
    recipe = get_recipe(name)
    cfg = config(name, scale, **overrides)
    if out is not None:
        check_out(out, overwrite, overrides)
    dev = pick_device(device)
    sha = git_sha()   # the code this run starts from
    t0 = time.perf_counter()
    result = recipe.fn(cfg, dev)
    result.scale = scale
    result.provenance = provenance(device_name(dev), time.perf_counter() - t0,
                                   {"seed": cfg.get("seed")}, command, sha=sha)
    if out is not None:
        result.save(out)
    return result


def _load_all():
    from . import chen, cheng, collins, foundations, synthesis, zhang  # noqa: F401  (registers their recipes)
