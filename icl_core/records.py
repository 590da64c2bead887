"""Recorded numbers: how a notebook hands its key numbers to the tests and the book.

A notebook makes ``rec = Records(records_path)`` (``records_path`` is a papermill
parameter; ``None`` keeps the numbers in memory only, e.g. in Colab) and sets
``rec["ols_mc_max_rel_err"] = 0.031``. Each assignment rewrites the JSON file atomically,
so the tests read exactly what the executed notebook computed.

``rec.claim(...)`` records one of the paper's checkable claims with the value measured for
it and a verdict; the book's reproduction report is generated from these entries (and a test
fails if a recorded claim is missing from it).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .results import _jsonable


VERDICTS = ("reproduced", "reproduced at reduced scale", "differs", "not run")


class Records(dict):
    """A dict of named numbers mirrored to a JSON file (when ``path`` is given)."""

    def __init__(self, path: str | os.PathLike | None = None, **meta):
        super().__init__()
        self.path = Path(path) if path else None
        self.meta = meta
        self.claims = {}
        self._write()

    def claim(self, key: str, paper: str, where: str, statement: str, measured: str,
              verdict: str, scale: str, reason: str = "") -> str:
        """Record a checkable claim of a paper.

        Args:
            key: a stable id, unique in the notebook (e.g. ``"fig2c"``).
            paper: short citation ("Chen et al. 2024"); where: figure / theorem ("Fig. 2c").
            statement: what the paper says, in one sentence.
            measured: what this notebook measured (numbers, in words).
            verdict: one of ``VERDICTS``; scale: where it was measured ("ci, CPU", "mid, CPU").
            reason: why it differs or is reduced (required unless "reproduced").

        Returns the verdict (so a notebook can print it)."""
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
        if verdict != "reproduced" and not reason:
            raise ValueError(f"claim {key!r}: a verdict of {verdict!r} needs a reason")
        self.claims[key] = _jsonable(dict(paper=paper, where=where, statement=statement,
                                          measured=measured, verdict=verdict, scale=scale,
                                          reason=reason))
        self._write()
        return verdict

    def __setitem__(self, name, value):
        super().__setitem__(name, _jsonable(value))
        self._write()

    def _write(self):
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"meta": self.meta, "values": dict(self), "claims": self.claims},
                                  indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.path)

    @staticmethod
    def read(path: str | os.PathLike) -> dict:
        """The recorded values of an executed notebook."""
        return json.loads(Path(path).read_text())["values"]

    @staticmethod
    def read_claims(path: str | os.PathLike) -> dict:
        """The claims an executed notebook recorded: ``key -> dict``."""
        return json.loads(Path(path).read_text()).get("claims", {})
