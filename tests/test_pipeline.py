"""The execution pipeline (scripts/book.py) never takes a failed or interrupted run for a
fresh one, and its freshness key covers the pinned package versions."""
import json

import pytest

import book

NOTEBOOK = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

```{{code-cell}} ipython3
:tags: [parameters]
scale = "ci"
records_path = None
```

```{{code-cell}} ipython3
from icl_core import Records
rec = Records(records_path)
{body}
```
"""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    for name in ("icl_core", "results"):
        (tmp_path / name).mkdir()
    (tmp_path / "icl_core" / "x.py").write_text("A = 1\n")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    (tmp_path / "book").mkdir()
    monkeypatch.setattr(book, "ROOT", tmp_path)
    monkeypatch.setattr(book, "EXECUTED", tmp_path / "_build" / "executed")
    monkeypatch.setattr(book, "RECORDS", tmp_path / "_build" / "records")
    return tmp_path


def test_a_failed_run_leaves_nothing_that_looks_fresh(tree):
    src = tree / "book" / "nb.md"
    src.write_text(NOTEBOOK.format(body="x = 1"))
    _, _, error = book.execute_one(src, "ci")
    assert error is None and book.is_fresh(src)
    src.write_text(NOTEBOOK.format(body="raise RuntimeError('boom')"))
    _, _, error = book.execute_one(src, "ci")
    assert error and "boom" in error
    assert not book.is_fresh(src) and not book._stamp(src).exists()
    src.write_text(NOTEBOOK.format(body="x = 1"))          # the source restored: still not fresh
    assert not book.is_fresh(src)


def test_the_key_covers_package_versions_and_is_taken_before_the_run(tree):
    src = tree / "book" / "nb.md"
    src.write_text(NOTEBOOK.format(body="open('../icl_core/x.py', 'w').write('A = 2\\n')"))   # edits during the run
    _, _, error = book.execute_one(src, "ci")
    assert error is None
    assert not book.is_fresh(src)          # the stamp holds the key of what ran, not of what is there now
    key = book.source_key(src, "ci")
    (tree / "requirements.txt").write_text("torch==2.14.0\n")
    assert book.source_key(src, "ci") != key
    assert json.loads(book._stamp(src).read_text())["scale"] == "ci"


def test_runs_start_in_the_notebooks_folder_without_moving_this_process(tree, monkeypatch):
    """Notebooks run in parallel threads: a chdir of the whole process would race (CI once
    ran the tests from book/foundations after the build)."""
    import os
    here, moves = os.getcwd(), []
    monkeypatch.setattr(os, "chdir", lambda path: moves.append(str(path)))
    src = tree / "book" / "nb.md"
    src.write_text(NOTEBOOK.format(body="import pathlib; rec['cwd'] = str(pathlib.Path.cwd())"))   # no file left behind
    _, _, error = book.execute_one(src, "ci")
    assert error is None and set(moves) <= {here}     # papermill re-enters the cwd it has
    assert json.loads(book.records_path(src).read_text())["values"]["cwd"] == str(tree / "book")


def test_the_longest_notebooks_start_first(monkeypatch):
    """The execution order (longest first) comes from this machine's last run, else from the
    committed measurement, which names exactly the book's notebooks."""
    hint = json.loads(book.SECONDS_HINT.read_text())["seconds"]
    assert set(hint) == {book.rel(s) for s in book.notebooks()}
    src = book.notebooks()[0]
    monkeypatch.setattr(book, "last_run_seconds", lambda s: None)
    assert book.expected_seconds(src) == hint[book.rel(src)]
    monkeypatch.setattr(book, "last_run_seconds", lambda s: 1234.5)
    assert book.expected_seconds(src) == 1234.5
