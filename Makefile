# make demo   run the examples (each checked against numpy)
# make test   run the test suite with the CI hypothesis profile
# Both create .venv and install the package into it when needed; the install
# is redone when pyproject.toml changes (stamp file .venv/.installed).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# the suite runs on every core (pytest-xdist; each worker has its own compile cache
# directory); PYTEST_ARGS="-n 0" runs it in one process
PYTEST_ARGS ?= -n auto

.PHONY: demo test surface install

demo: $(STAMP)
	$(PY) -m examples

# the whole suite on the default (CPU) backend but tests/gpu (marker gpu: it needs a
# CUDA device, `python -m pytest -m gpu tests/gpu` runs it there), then the capture, mutation,
# guard, graph-break, example and random-program suites again on the numpy
# reference backend
REF_SUITES := tests/capture tests/test_mutation.py tests/runtime/test_guards.py \
	tests/test_graph_breaks.py tests/test_conversions.py tests/test_examples.py \
	tests/test_random_programs.py

test: $(STAMP)
	@HYPOTHESIS_PROFILE=ci $(PY) -m pytest -m "not gpu" $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; \
	echo "make test: the numpy reference backend on $(REF_SUITES)"; \
	HYPOTHESIS_PROFILE=ci LOWERING_BACKEND=numpy $(PY) -m pytest $(REF_SUITES) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; \
	exit $$rc

# regenerate the supported-surface table from the capture rule tables
surface: $(STAMP)
	$(PY) -m lowering.surface > docs/SURFACE.md

install: $(STAMP)

$(PY):
	$(PYTHON) -m venv $(VENV)

# byte-compile the sources once (as pip does for installed packages): the
# editable install imports them from here, and with PYTHONDONTWRITEBYTECODE
# set every fresh process would compile them again
PKGS := lowering passes dialects runtime

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -e '.[test]'
	$(PY) -m compileall -q $(PKGS) >/dev/null
	touch $@

# make bench  the CPU benchmark of shared/BENCH.md (bench/README.md): W1-W7 on
# lowering and every peer, results in bench/results/<host>-cpu.{json,md,png}.
# Installs bench/requirements.txt when a peer is missing. Options through
# BENCH_ARGS, e.g. make bench BENCH_ARGS="--quick --sizes small"
BENCH_ARGS ?=

.PHONY: bench
bench: $(STAMP)
	@$(PY) -c "import numexpr, numba, jax, torch, matplotlib, threadpoolctl" 2>/dev/null || \
		$(PY) -m pip install -r bench/requirements.txt
	$(PY) -m compileall -q $(PKGS) bench >/dev/null
	$(PY) -m bench $(BENCH_ARGS)
