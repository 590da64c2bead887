# icl-book: two commands do everything on a fresh clone.
#   make book   set up .venv, execute every notebook at scale="ci", build the HTML into _build/html
#   make test   set up .venv, run the unit tests and the notebook regression tests
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# pip on this machine kind prints a warning per package about local wheel folders; hide only those
QUIET_PIP := grep -v "is neither a file nor a directory" || true

.PHONY: setup book test check-html check-colab sync bench clean help
help:
	@sed -n '2,3p' Makefile; echo "  make check-html  check the built pages in headless Chromium (screenshots in _build/screenshots)"; echo "  make check-colab run the .ipynb twins as a Colab reader has them (wheel, fresh venv, empty folder)"; echo "  make sync        regenerate the .ipynb twins the Colab buttons open"; echo "  make bench       speed ratios (benchmarks/run.py), saved to benchmarks/results/"

$(STAMP): requirements.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing requirements.txt and icl_core (editable) into $(VENV) ..."
	@$(BIN)/python -m pip install -q -r requirements.txt 2>&1 | $(QUIET_PIP)
	@$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | $(QUIET_PIP)
	@$(BIN)/python -c "import icl_core, torch, jupyter_book; print('icl_core', icl_core.__version__, '| torch', torch.__version__)"
	@touch $(STAMP)

setup: $(STAMP)

book: setup
	@$(BIN)/python scripts/book.py build

test: setup
	@OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n 2 -q tests

check-html:
	@test -f _build/html/index.html || { echo "no _build/html: run 'make book' first"; exit 1; }
	@$(BIN)/python scripts/check_html.py

check-colab: setup
	@test -d _build/executed || { echo "no _build/executed: run 'make book' first"; exit 1; }
	@$(BIN)/python scripts/colab_check.py

sync: setup
	@$(BIN)/python scripts/book.py sync

bench: setup
	@$(BIN)/python -m pip install -q -r benchmarks/requirements.txt 2>&1 | $(QUIET_PIP)
	@OMP_NUM_THREADS=1 $(BIN)/python benchmarks/run.py $(BENCH_ARGS)

clean:
	rm -rf _build
