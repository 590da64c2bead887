"""Recorded numbers: how a notebook hands its key numbers to the tests and the book.

A notebook makes ``rec = Records(records_path)`` (``records_path`` is a papermill
parameter; ``None`` keeps the numbers in memory only, e.g. in Colab) and sets
``rec["ols_mc_max_rel_err"] = 0.031``. Each assignment rewrites the JSON file atomically,
so the tests read exactly what the executed notebook computed.

:func:`icl_core.claims.assess` evaluates the claims declared for the notebook on these
values and stores their computed verdict rows here; the book's reproduction report is
generated from them (and a test fails if a declared claim is missing from it).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from .results import _jsonable



class Records(dict):
    """A dict of named numbers mirrored to a JSON file (when ``path`` is given)."""

    def __init__(self, path: str | os.PathLike | None = None, **meta):
        super().__init__()
        self.path = Path(path) if path else None
        self.meta = meta
        self.claims = {}
        self._write()

    def set_claims(self, rows: list[dict]):
        """Store the verdict rows computed by :func:`icl_core.claims.assess` (by claim id)."""
        for row in rows:
            self.claims[row["id"]] = _jsonable(row)
        self._write()

    def __setitem__(self, name, value):
        super().__setitem__(name, _jsonable(value))
        self._write()

    def _write(self):
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        # insertion order kept (no sort_keys): a claim's measured text lists its groups in the
        # order the notebook recorded them, and the tests recompute it from this file
        tmp.write_text(json.dumps({"meta": self.meta, "values": dict(self), "claims": self.claims},
                                  indent=1) + "\n")
        os.replace(tmp, self.path)

    @staticmethod
    def read(path: str | os.PathLike) -> dict:
        """The recorded values of an executed notebook."""
        return json.loads(Path(path).read_text())["values"]

    @staticmethod
    def read_claims(path: str | os.PathLike) -> dict:
        """The claims an executed notebook recorded: ``key -> dict``."""
        return json.loads(Path(path).read_text()).get("claims", {})
