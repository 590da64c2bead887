"""The papers' checkable claims: declared once, their verdicts computed, never typed.

A :class:`Claim` is declared beside the recipe (or closed form) that measures it, in the
chapter's module under ``icl_core.recipes``. It holds the paper's own words, a **test** (a
function of the measured values: does the claim hold, and what was measured, in words), an
**adequacy gate** (a function of the same values: can this run decide the claim at all, e.g.
has training converged, does the model beat the baseline the claim presupposes, is the effect
larger than the seed spread), the setting the claim assumes, and per scale the recipe's
known changes of setting and of budget.

The verdict is computed from one vocabulary (:data:`VERDICTS`):

* ``not run``: a value the test needs was not measured (e.g. no committed result);
* ``inconclusive``: the gate failed; its computed reason is shown;
* ``differs``: the gate passed and the test fails (a finding, defended by the numbers);
* ``reproduced in a modified setting``: holds, with a named change of setting at this scale
  (noise, covariates, grid, architecture);
* ``reproduced at reduced scale``: holds, in the paper's setting with a smaller budget;
* ``reproduced``: holds in the paper's setting (or a declared equivalent) at its budget.

A notebook computes its numbers into a :class:`~icl_core.records.Records` and ends with
``assess(rec, "<chapter>/<notebook>", scale)``, which evaluates every claim declared for that
notebook, stores the rows in the records (for the tests and the generated report) and shows
them as a table. Tests and report read the same declarations: one threshold per claim.

Orderings ("||M|| increases with L") are judged against the seed spread with :func:`trend`:
neighbours closer than two standard errors are a tie, and :func:`trends_decided` is the gate
that makes a run whose groups cannot be ordered inconclusive rather than a finding.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .validation import check_choice

VERDICTS = ("reproduced", "reproduced at reduced scale", "reproduced in a modified setting",
            "inconclusive", "differs", "not run")
HOLDS = VERDICTS[:3]      # the verdicts in which the claim holds


@dataclass(frozen=True)
class Check:
    """A test's outcome: whether the claim holds and what was measured, in words."""
    holds: bool
    measured: str


@dataclass(frozen=True)
class Gate:
    """An adequacy gate's outcome: whether this run can decide the claim, and why (numbers)."""
    ok: bool
    reason: str


@dataclass
class Claim:
    """One checkable claim of a paper (see the module docstring).

    Args:
        id: ``"<chapter>.<key>"``, unique in the book (e.g. ``"zhang.fig1_spike"``).
        notebook: the notebook that measures it (``"zhang/experiments"``).
        paper: short citation; where: figure, theorem or section.
        quote: the paper's own words (short).
        test: ``values -> Check``.
        gate: ``values -> Gate`` (see the gate builders below).
        setting: the setting the claim assumes (the paper's).
        deviations: ``scale -> change of setting`` at that scale ("" or absent: none).
        reduced: ``scale -> budget`` where smaller than the paper's ("" or absent: the paper's).
        source: None (the notebook's own run, at its scale) or the name of a committed
            result (``"collins.figure1/paper"``) whose scale and device label the verdict.
        ci_holds: the ci run must reach a verdict in which the claim holds (tests fail
            otherwise); False: the ci run may be inconclusive or differ (its short budget).
    """
    id: str
    notebook: str
    paper: str
    where: str
    quote: str
    test: Callable[[dict], Check]
    gate: Callable[[dict], Gate]
    setting: str = ""
    deviations: dict = field(default_factory=dict)
    reduced: dict = field(default_factory=dict)
    source: str | None = None
    ci_holds: bool = False


CLAIMS: dict[str, Claim] = {}


def declare(claim: Claim) -> Claim:
    """Register ``claim`` (ids are unique)."""
    if claim.id in CLAIMS and CLAIMS[claim.id] is not claim:
        raise ValueError(f"claim id {claim.id!r} is declared twice")
    CLAIMS[claim.id] = claim
    return claim


def chapter(name: str, paper: str) -> Callable:
    """The declarer of one chapter's claims: ``claim(key, notebook, where, quote, test, gate,
    view=None, **kw)`` declares ``Claim("<name>.<key>", "<name>/<notebook>", paper, where, ...)``.
    ``view``: ``values -> values``, the records as the test and the gate read them (e.g. one
    run's records with some entries taken from another run); None: as recorded."""
    def claim(key, notebook, where, quote, test, gate, view=None, **kw):
        if view is not None:
            test, gate = (lambda v, f=test: f(view(v))), (lambda v, f=gate: f(view(v)))
        return declare(Claim(f"{name}.{key}", f"{name}/{notebook}", paper, where, quote, test, gate, **kw))
    return claim


def below(key: str, limit: float, what: str = "max error", extra: str = "") -> Callable[[dict], Check]:
    """The test of an exact identity: ``values[key] < limit``, measured as
    ``"<what> <value>.1e<extra>"`` (e.g. "max error 3.6e-15 over 5 layers")."""
    def test(values):
        value = values[key]
        return Check(value < limit, f"{what} {value:.1e}{extra}")
    return test


def all_claims() -> dict[str, Claim]:
    """Every declared claim (importing the chapters' modules)."""
    from .recipes import _load_all
    _load_all()
    return CLAIMS


def claims_of(notebook: str) -> list[Claim]:
    return [c for c in all_claims().values() if c.notebook == notebook]


def evaluate(claim: Claim, values: dict, scale: str, device: str = "") -> dict:
    """The verdict row of ``claim`` on the measured ``values`` at ``scale``."""
    row = dict(id=claim.id, paper=claim.paper, where=claim.where, quote=claim.quote,
               setting=claim.setting, scale=scale, device=device,
               deviation=claim.deviations.get(scale, ""), budget=claim.reduced.get(scale, ""))
    try:
        check = claim.test(values)
    except KeyError as missing:
        row.update(verdict="not run", measured="-", gate=f"not measured: {missing.args[0]}")
        return row
    try:
        gate = claim.gate(values)
    except KeyError as missing:         # measured, but what the gate reads was not recorded
        gate = Gate(False, f"the gate's input {missing.args[0]} was not recorded")
    row.update(measured=check.measured, gate=("passed: " if gate.ok else "failed: ") + gate.reason)
    if not gate.ok:
        row["verdict"] = "inconclusive"
    elif not check.holds:
        row["verdict"] = "differs"
    elif row["deviation"]:
        row["verdict"] = "reproduced in a modified setting"
    elif row["budget"]:
        row["verdict"] = "reproduced at reduced scale"
    else:
        row["verdict"] = "reproduced"
    return row


def assess(rec, notebook: str, scale: str, device: str = "", results: dict | None = None) -> "ClaimTable":
    """Evaluate every claim declared for ``notebook`` on the values of ``rec`` (a
    :class:`~icl_core.records.Records`) and store the rows in ``rec``. Returns them as a
    :class:`ClaimTable`, which a notebook shows as a table (the last line of a cell).

    ``results``: committed results by name (``"collins.figure1/paper" -> Result`` or None);
    a claim with that ``source`` takes its scale and device from the result's provenance and is
    *not run* when the result is None."""
    rows = ClaimTable()
    for claim in claims_of(notebook):
        if claim.source is not None:
            res = (results or {}).get(claim.source)
            if res is None:
                row = evaluate(claim, {}, claim.source.rpartition("/")[2])
                row["gate"] = f"no committed result {claim.source}"
                rows.append(row)
                continue
            row = evaluate(claim, rec, res.scale, res.provenance.get("device", ""))
            behind = trained_short_of_registration(res)
            if behind and row["verdict"] != "not run":
                row.update(verdict="inconclusive", gate=f"failed: {behind}")
        else:
            row = evaluate(claim, rec, scale, device)
        rows.append(row)
    rec.set_claims(rows)
    return rows


def trained_short_of_registration(res) -> str:
    """"" when the committed result ``res`` was trained as its recipe now registers its scale;
    otherwise the training settings that differ, in words: every setting named ``steps*``
    (``steps``, ``steps_n``, ``steps_by_pair``, ``steps_by_depth``, ``steps_by_kernel``). A scale is
    registered for more training before that training runs, so until its result is made again
    the committed one is a shorter run than the budget a claim prints for that scale, and cannot
    stand for it: :func:`assess` makes such a row *inconclusive* with this reason. A committed
    record that is not a recipe's :class:`~icl_core.results.Result` (a long run's progress: no
    ``name`` or ``config``) is not checked."""
    from .recipes import get_recipe     # here: the recipes import this module
    if getattr(res, "name", None) is None or getattr(res, "config", None) is None:
        return ""
    try:
        now = get_recipe(res.name).configs.get(res.scale)
    except ValueError:                  # a recipe this checkout no longer has
        return ""
    if now is None:
        return ""
    keys = sorted(k for k in set(res.config) | set(now) if k.startswith("steps"))
    diff = [f"{k} {res.config.get(k)!r}, now registered {now.get(k)!r}" for k in keys
            if res.config.get(k) != now.get(k)]
    return (f"the committed result {res.name}/{res.scale} was trained with {'; '.join(diff)}: it is to be made "
            f"again at the registered budget" if diff else "")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def scale_label(r: dict) -> str:
    """Where a row was measured: its scale, and its device when known ("ci, cpu")."""
    return r["scale"] + (f", {r['device']}" if r.get("device") else "")


def _scale(r) -> str:
    return scale_label(r) + "".join(f"; {k}: {r[k]}" for k in ("deviation", "budget") if r.get(k))


def table(rows: list[dict]) -> str:
    """A Markdown table: claim, what the paper says, what we measured, gate, verdict."""
    lines = ["| claim | the paper says | we measured | can this run decide it? | verdict |",
             "|---|---|---|---|---|"]
    for r in rows:
        label = f"{r['where']} (`{r['id']}`)"
        lines.append(f"| {_cell(label)} | {_cell(r['quote'])} | {_cell(r['measured'])} | "
                     f"{_cell(r['gate'])} | **{_cell(r['verdict'])}** ({_cell(_scale(r))}) |")
    return "\n".join(lines)


def html_table(rows: list[dict]) -> str:
    """The same table as HTML (what notebooks, Colab and the HTML book show)."""
    from html import escape
    head = "".join(f"<th>{h}</th>" for h in ("claim", "the paper says", "we measured",
                                              "can this run decide it?", "verdict"))
    body = "".join(
        "<tr>" + "".join(f"<td>{c}</td>" for c in (
            f"{escape(r['where'])} (<code>{escape(r['id'])}</code>)", f"&ldquo;{escape(r['quote'])}&rdquo;",
            escape(r["measured"]), escape(r["gate"]),
            f"<b>{escape(r['verdict'])}</b> ({escape(_scale(r))})")) + "</tr>" for r in rows)
    return f'<table class="icl-claims"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class ClaimTable(list):
    """The verdict rows of a notebook's claims; shown as a table by Jupyter (HTML) and as a
    Markdown table in plain text."""

    def _repr_html_(self):
        return html_table(self)

    def __repr__(self):
        return table(self)


# --- gates ------------------------------------------------------------------------------
def _num(values, key):
    v = values[key]
    return float(np.max(np.abs(np.asarray(v, dtype=float)))) if np.ndim(v) else float(v)


def _numbers(value) -> list[float]:
    """Every number in a value (nested dicts and lists walked; strings and booleans skipped)."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _numbers(v)]
    if isinstance(value, (bool, str)) or value is None:
        return []
    return [float(value)]


def computed(*keys: str, what: str = "closed-form computation") -> Callable[[dict], Gate]:
    """For checks with nothing to converge (closed forms, exact identities; or, with ``what``
    saying so, a measured value whose run records no training curve): the values exist and
    are finite."""
    def gate(values):
        bad = [k for k in keys if not all(math.isfinite(x) for x in _numbers(values[k]))]
        return Gate(not bad, f"{what}; values finite" if not bad else f"non-finite values: {bad}")
    return gate


def sampling_error(key: str, limit: float, what: str = "Monte Carlo standard error") -> Callable[[dict], Gate]:
    """The sampling error recorded under ``key`` is below ``limit`` (the test's margin)."""
    def gate(values):
        err = _num(values, key)
        return Gate(err < limit, f"{what} {err:.3g} {'<' if err < limit else '>='} {limit:g}")
    return gate


def tenths(losses, center: str = "mean") -> list[float]:
    """``[mean of the 9th tenth, mean of the last tenth]`` of a training-loss curve (one run
    ``(steps,)`` or runs ``(K, steps)``, averaged over runs): what :func:`converged` reads.
    ``center="median"``: each run's median over the steps of a tenth, then the mean over runs
    (for curves with rare loss spikes, one of which would dominate a tenth's mean)."""
    check_choice("center", center, {"mean", "median"})
    a = np.asarray(losses, dtype=float)
    a = a.reshape(-1, a.shape[-1])
    n = max(a.shape[-1] // 10, 1)
    if center == "median":
        prev = float(np.median(a[:, -2 * n:-n], axis=1).mean()) if a.shape[-1] >= 2 * n else float("nan")
        return [prev, float(np.median(a[:, -n:], axis=1).mean())]
    a = a.mean(0)
    return [float(a[-2 * n:-n].mean()) if len(a) >= 2 * n else float("nan"), float(a[-n:].mean())]


def converged(key: str, frac: float = 0.05, what: str = "training loss") -> Callable[[dict], Gate]:
    """Training has converged: ``what`` (the training loss, or a traced quantity such as
    ||M||) changed by less than ``frac`` (relative, either direction) over the last tenth of
    training. ``values[key]``: :func:`tenths` of the curve (or a dict of them, one per run or
    group: all must pass)."""
    def gate(values):
        v = values[key]
        items = v.items() if isinstance(v, dict) else [("", v)]
        worst = []
        for name, (prev, last) in items:
            change = abs(prev - last) / abs(last) if last and math.isfinite(prev) else float("inf")
            worst.append((change, name))
        change, name = max(worst)
        where = f" ({name})" if name else ""
        ok = change < frac
        return Gate(ok, f"{what} changed {100 * change:.1f}%{where} over the last tenth of training "
                        f"({'<' if ok else '>='} {100 * frac:g}%{'' if ok else ': not converged'})")
    return gate


def budget(steps_key: str, paper_steps: int, fraction: float = 0.2) -> Callable[[dict], Gate]:
    """The run trained for at least ``fraction`` of the paper's steps: below that, a flat loss
    cannot be told from a plateau that longer training leaves (transformers' in-context
    learning is known to sit on long plateaus), so an end-state claim cannot be decided."""
    def gate(values):
        steps = int(values[steps_key])
        ok = steps >= fraction * paper_steps
        return Gate(ok, f"{steps:,} of the paper's {paper_steps:,} steps ({100 * steps / paper_steps:.1f}%; "
                        f"{'>=' if ok else '<'} {100 * fraction:g}%{'' if ok else ': a plateau cannot be ruled out'})")
    return gate


def beats(model_key: str, baseline_key: str, what: str, margin: float = 0.0) -> Callable[[dict], Gate]:
    """The trained model's error is below the baseline the claim presupposes."""
    def gate(values):
        m, b = _num(values, model_key), _num(values, baseline_key)
        ok = m < b * (1 - margin)
        return Gate(ok, f"model {m:.3g} {'<' if ok else '>='} {what} {b:.3g}")
    return gate


def exceeds_spread(effect_key: str, spread_key: str, factor: float = 1.0) -> Callable[[dict], Gate]:
    """The effect the claim is about is larger than ``factor`` times the seed spread."""
    def gate(values):
        e, s = abs(_num(values, effect_key)), _num(values, spread_key)
        ok = e > factor * s
        return Gate(ok, f"effect {e:.3g} {'>' if ok else '<='} {factor:g} x seed spread {s:.3g}")
    return gate


def all_of(*gates: Callable[[dict], Gate]) -> Callable[[dict], Gate]:
    """Every gate passes; the reason lists each one's."""
    def gate(values):
        outs = [g(values) for g in gates]
        return Gate(all(o.ok for o in outs), "; ".join(o.reason for o in outs))
    return gate


@dataclass
class Trend:
    """What :func:`trend` found: ``state`` is ``"holds"`` (the trend, beyond the seed spread),
    ``"reversed"`` (some step goes against it beyond the seed spread) or ``"tied"`` (neither:
    the seeds cannot order the groups); ``words`` gives the means and the order found."""
    state: str
    words: str

    def __bool__(self):
        return self.state == "holds"


def trend(groups, direction: str = "up", z: float = 2.0) -> Trend:
    """Does a quantity rise (``direction="up"``) or fall (``"down"``) across ordered groups,
    judged against the seed spread?

    ``groups``: one sequence of per-seed values per group, in the order of the setting (L,
    sigma, n). Neighbours whose means differ by less than ``z`` standard errors of the
    difference are a **tie** (the seeds cannot order them). The trend holds when no neighbour
    moves against it by more than ``z`` standard errors and the last group differs from the
    first by more than ``z`` standard errors in its direction; it is reversed when a neighbour,
    or the last group against the first, moves against it by more than that; otherwise tied.
    The words give the seed means and each neighbour as ``<``, ``>`` or ``~`` (tie)."""
    check_choice("direction", direction, {"up", "down"})
    sign = 1.0 if direction == "up" else -1.0
    g = [np.asarray(v, dtype=float).ravel() for v in groups]
    if len(g) < 2 or any(len(v) == 0 for v in g):
        raise ValueError(f"groups must hold at least 2 non-empty groups, got sizes {[len(v) for v in g]}")
    mean = [float(v.mean()) for v in g]
    se = [float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0 for v in g]

    def step(i, j):
        diff, s = sign * (mean[j] - mean[i]), float(np.hypot(se[i], se[j]))
        return 1 if diff > z * s else (-1 if diff < -z * s else 0)
    steps, overall = [step(i, i + 1) for i in range(len(g) - 1)], step(0, len(g) - 1)
    if all(s >= 0 for s in steps) and overall == 1:
        state = "holds"
    elif min(steps) < 0 or overall < 0:
        state = "reversed"
    else:
        state = "tied"
    marks = {1: "<" if direction == "up" else ">", -1: ">" if direction == "up" else "<", 0: "~"}
    return Trend(state, f"{mean[0]:.3g}" + "".join(f" {marks[s]} {m:.3g}" for s, m in zip(steps, mean[1:])))


def trends_decided(key: str, direction) -> Callable[[dict], Gate]:
    """Gate: every group set in ``values[key]`` (``{name: groups}``) is ordered beyond the seed
    spread, one way or the other (:func:`trend` not ``"tied"``); ``direction`` is ``"up"``,
    ``"down"`` or a function of the name giving one."""
    def gate(values):
        tied = [k for k, v in values[key].items()
                if trend(v, direction(k) if callable(direction) else direction).state == "tied"]
        return Gate(not tied, "every ordering beyond the seed spread (2 standard errors)" if not tied else
                    f"{', '.join(tied)}: the groups differ by less than the seed spread allows to order "
                    "(2 standard errors); more trials could decide")
    return gate
