import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("ICL_CORE_PROGRESS", "0")


@pytest.fixture(autouse=True)
def _one_thread():
    import torch
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def executed_notebooks():
    """Execute the book's notebooks once (papermill, scale="ci") unless a fresh execution
    exists, and return ``{rel path: recorded values}``. Under pytest-xdist the workers share
    one execution through a file lock."""
    import book
    from filelock import FileLock
    from icl_core.records import Records
    book.BUILD.mkdir(parents=True, exist_ok=True)
    with FileLock(str(book.BUILD / "execute.lock")):
        book.execute()
    return {book.rel(src): Records.read(book.records_path(src)) for src in book.notebooks()}
