"""The one rule that finds committed results (icl_core.committed), as a reader outside the
checkout has it: the working directory first, then a download cached on disk."""
import numpy as np

from icl_core import committed
from icl_core.results import Result


def _save(root, recipe="demo.recipe", folder="paper", value=1.0):
    Result(recipe, "paper", {"a": 1}, {"m": value}, {"x": np.arange(3.0)}).save(root / recipe / folder)


def test_lookup_order_env_then_working_tree_then_download(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICL_BOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ICL_BOOK_RESULTS", raising=False)
    assert committed.find("demo.recipe", "paper", download=False) is None
    assert "python -m icl_core run demo" in committed.missing("demo.recipe", "paper",
                                                              "python -m icl_core run demo", "1 s")
    # a published copy, reached by URL (file:// here; the repository's raw files in Colab)
    _save(tmp_path / "published", value=3.0)
    monkeypatch.setenv("ICL_BOOK_RESULTS_URL", (tmp_path / "published").as_uri())
    got = committed.load("demo.recipe", "paper", download=True)
    assert got.metrics == {"m": 3.0}
    assert (tmp_path / "cache" / "results" / "demo.recipe" / "paper" / "arrays.npz").exists()
    monkeypatch.setenv("ICL_BOOK_RESULTS_URL", (tmp_path / "nowhere").as_uri())
    assert committed.load("demo.recipe", "paper", download=True).metrics == {"m": 3.0}   # cached
    assert committed.load("demo.recipe", "other", download=True) is None                 # not published
    # the working directory's results/ (where the CLI writes) comes before the cache
    _save(tmp_path / "results", value=2.0)
    assert committed.load("demo.recipe", "paper").metrics == {"m": 2.0}
    assert committed.write_root() == tmp_path / "results"
    # and $ICL_BOOK_RESULTS before both, also as the CLI's target
    monkeypatch.setenv("ICL_BOOK_RESULTS", str(tmp_path / "mine"))
    _save(tmp_path / "mine", value=5.0)
    assert committed.load("demo.recipe", "paper").metrics == {"m": 5.0}
    assert committed.write_root() == tmp_path / "mine"


def test_inside_the_checkout_nothing_is_downloaded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICL_BOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ICL_BOOK_RESULTS_URL", "http://192.0.2.1/unreachable")   # would hang if tried
    assert committed.checkout_root() is not None                                 # tests run in a checkout
    assert committed.find("demo.recipe", "absent") is None
    assert committed.find("collins.figure9", "paper") == committed.checkout_root() / "collins.figure9" / "paper"
    assert committed.root_of("chen.train") == committed.checkout_root()


def test_cli_writes_where_the_lookup_reads(tmp_path, monkeypatch):
    from icl_core.__main__ import main
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ICL_BOOK_RESULTS", raising=False)
    assert main(["run", "foundations.error_vs_context", "--device", "cpu", "--set", "steps=2", "--set", "n_eval=16",
                 "--set", "d=2", "--set", "d_model=8", "--set", "n_layers=1"]) == 0
    found = committed.find("foundations.error_vs_context", "ci", download=False)
    assert found == tmp_path / "results" / "foundations.error_vs_context" / "ci"


def test_published_index_lists_folders_a_reader_can_download(tmp_path, monkeypatch):
    """Outside a checkout a reader lists a recipe's folders from the published index.json and
    downloads a long run's own files (state.pt, progress.json), not a Result's."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ICL_BOOK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ICL_BOOK_RESULTS", raising=False)
    pub = tmp_path / "published"
    _save(pub, recipe="demo.train", folder="mid-a")
    (pub / "demo.train" / "long").mkdir(parents=True)
    (pub / "demo.train" / "long" / "state.pt").write_bytes(b"s" * 10)
    (pub / "demo.train" / "long" / "progress.json").write_text("{}")
    assert committed.local_index(pub) == {"demo.train": ["long", "mid-a"]}
    committed.write_index(pub)
    monkeypatch.setenv("ICL_BOOK_RESULTS_URL", pub.as_uri())
    assert committed.folders("demo.train", download=False) == []                  # nothing fetched
    assert committed.folders("demo.train", download=True) == ["long", "mid-a"]
    got = committed.find("demo.train", "long", download=True, files=("state.pt", "progress.json"))
    assert got == tmp_path / "cache" / "results" / "demo.train" / "long"
    assert (got / "state.pt").read_bytes() == b"s" * 10 and not (got / "result.json").exists()


def test_the_committed_index_is_in_sync_and_the_address_is_the_books(monkeypatch):
    monkeypatch.delenv("ICL_BOOK_RESULTS_URL", raising=False)
    root = committed.checkout_root()
    import json
    assert json.loads((root / committed.INDEX).read_text()) == committed.local_index(root), (
        "results/index.json is stale: python -c \"from icl_core import committed as c; "
        "c.write_index(c.checkout_root())\"")
    config = (root.parent / "_config.yml").read_text()
    assert f"url: {committed.REPOSITORY}\n" in config
    assert committed.installed_from() == (committed.REPOSITORY, None)              # editable install
    assert committed.results_url().startswith("https://raw.githubusercontent.com/icl-book/icl-book/main/")
