# One-command entry points. Every target sets itself up (venv + install) first.
#   make demo   - set up, then run the quick asynchronous-clients demo (pictures under results/demo/)
#   make test   - set up, then run the unit tests and the notebooks (nbval, quick mode)
# Data: AFL_DATA=/path/to/mirror (offline copies) or nothing (downloads into data/ with checksum checks).
# A relative AFL_DATA is taken from here (the repository root), not from each tool's own working directory
# (nbval runs notebooks inside notebooks/).
ifneq ($(AFL_DATA),)
export AFL_DATA := $(abspath $(AFL_DATA))
endif
# Windows (Git Bash or MSYS with GNU make): the venv's programs are in Scripts, and Python is `python`.
ifeq ($(OS),Windows_NT)
PYTHON ?= python
BIN     = $(VENV)/Scripts
else
PYTHON ?= python3
BIN     = $(VENV)/bin
endif
VENV   ?= .venv
# Two installs in one venv: afl with the notebooks' packages (demo, notebooks, hand-outs), and on top the
# developers' (tests, the book, nbgrader, Ray). CPU=1 takes PyTorch's CPU-only wheels first (no CUDA libraries:
# for laptops and hubs), e.g. `make demo CPU=1`.
STAMP      = $(VENV)/.afl-installed
DEV_STAMP  = $(VENV)/.afl-dev-installed
DEV_EXTRAS = dev,notebooks,book
TORCH_CPU_INDEX = https://download.pytorch.org/whl/cpu

define install
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(if $(CPU),$(BIN)/python -m pip install --quiet torch torchvision --index-url $(TORCH_CPU_INDEX))
	$(BIN)/python -m pip install --quiet -e '.[$(1)]'
endef

# Walkthroughs and solution notebooks are committed with their outputs and run under nbval; exercise notebooks are
# committed blank (each written from its solution by tools/make_exercises.py) and run by tests/test_exercises.py.
NOTEBOOKS = notebooks/*.ipynb notebooks/exercises/*_sol.ipynb

.PHONY: setup setup-dev demo test test-unit test-notebooks test-book book sync-notebooks notebook-outputs notebooks bench clean \
        handout wheel nbgrader

setup: $(STAMP)

setup-dev: $(DEV_STAMP)

$(STAMP): pyproject.toml
	$(call install,notebooks)
	touch $(STAMP)

$(DEV_STAMP): pyproject.toml
	$(call install,$(DEV_EXTRAS))
	touch $(STAMP) $(DEV_STAMP)

demo: setup
	$(BIN)/afl demo --out results/demo

test: test-unit test-notebooks test-book

# The book: executed notebooks, result pages and the scoreboard as a static site in site/ (offline, from the
# committed outputs: nothing is executed); every internal link and figure of every page is checked.
book: setup-dev
	$(BIN)/python tools/build_book.py --site site
	@echo "open site/index.html"

test-book: book

# A class's hand-out: the exercise notebooks (outputs cleared) and a README, never the solutions.
handout: setup
	@test -n "$(HANDOUT)" || { echo "make handout HANDOUT=DIR: say where the hand-out goes"; exit 2; }
	$(BIN)/python tools/handout.py "$(HANDOUT)" $(if $(WHEELS),--wheels "$(WHEELS)") $(if $(DATA),--data $(DATA))

# The exercises as an nbgrader course (solutions, checks as autograder tests, answers graded by hand) in COURSE.
nbgrader: setup-dev
	@test -n "$(COURSE)" || { echo "make nbgrader COURSE=DIR: say where the course goes"; exit 2; }
	$(BIN)/python tools/nbgrader_source.py "$(COURSE)"

# An installable wheel of afl (dist/afl-*.whl) for a JupyterHub or Colab: pip install dist/afl-*.whl
wheel: setup
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation -w dist .
	@ls dist/afl-*.whl

# Tests and notebooks run in one process per core the machine lets this one use (cgroup quotas counted), each test
# file or notebook whole in one of them, one PyTorch thread each (TEST_WORKERS=1: one process, PyTorch's threads).
# Counted once, at its first use in a recipe (after setup-dev has made the environment that counts it).
TEST_WORKERS ?= $(eval TEST_WORKERS := $(shell $(BIN)/python -c \
  "from afl.runtime import available_cores; print(available_cores())"))$(TEST_WORKERS)
PARALLEL = $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
TEST_THREADS = $(if $(filter 1,$(TEST_WORKERS)),,AFL_THREADS=1)

test-unit: setup-dev
	AFL_QUICK=1 AFL_DOWNLOAD=0 $(TEST_THREADS) $(BIN)/python -m pytest -q $(PARALLEL) tests

# Notebooks: the paired percent scripts must match the .ipynb files (all but the header's jupytext version, which
# each jupytext release writes anew), the committed .ipynb files must hold the outputs of a top-to-bottom run
# (make notebook-outputs), and every notebook runs headless in its quick mode.
test-notebooks: setup-dev
	@for nb in notebooks/*.ipynb notebooks/exercises/*.ipynb; do \
	  $(BIN)/jupytext --quiet --to py:percent -o - "$$nb" | diff -q -I '^#       jupytext_version: ' - "$${nb%.ipynb}.py" >/dev/null \
	  || { echo "$$nb differs from its paired .py: run make sync-notebooks"; exit 1; }; done
	$(BIN)/python tools/make_exercises.py --check
	$(BIN)/python tools/execute_notebooks.py --check $(NOTEBOOKS)
	AFL_QUICK=1 AFL_DOWNLOAD=0 MPLBACKEND=Agg $(TEST_THREADS) $(BIN)/python -m pytest -q $(PARALLEL) --nbval-lax $(NOTEBOOKS)

# Edit notebooks as percent scripts (.py); this updates the paired .ipynb files.
sync-notebooks: setup
	$(BIN)/python tools/make_exercises.py
	$(BIN)/jupytext --sync notebooks/*.py notebooks/exercises/*.py

# Run every notebook top to bottom and keep its outputs in the .ipynb (what a reader browsing the repository sees).
notebook-outputs: sync-notebooks
	MPLBACKEND=module://matplotlib_inline.backend_inline $(BIN)/python tools/execute_notebooks.py $(NOTEBOOKS)

# Open the notebooks in Jupyter, in the project's environment (as root, in a container, Jupyter needs --allow-root;
# JUPYTER_ARGS adds options, e.g. JUPYTER_ARGS="--no-browser --port 8890" on a remote machine).
notebooks: setup
	$(BIN)/jupyter lab notebooks/ $$([ "$$(id -u)" = 0 ] && echo --allow-root) $(JUPYTER_ARGS)

bench: setup
	$(BIN)/afl bench local-sgd --json

clean:
	rm -rf $(VENV) .pytest_cache
