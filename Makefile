# Two entry points, each doing its own set-up from nothing:
#   make report  -> .venv, install, verify every claim (default sizes, CPU), write reports/
#   make test    -> .venv, install, run the whole test suite
# torch is pinned to the CPU wheel available on these machines *before* the project is installed,
# so that pyproject's range (torch>=2.2) is already satisfied and pip pulls no CUDA packages.

PYTHON   ?= $(shell command -v python3.11 || command -v python3)
VENV     ?= .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
TORCH_PIN ?= torch==2.13.0
PYTEST_WORKERS ?= 2
# `make report` runs its work on a local Dask cluster of two worker processes (docs/clusters.md:
# 6 min 45 s instead of 8 min 19 s on 2 cores; the same verdicts and numbers, up to the last bits of
# multi-threaded BLAS sums); REPORT_CLUSTER= runs it in-process
REPORT_CLUSTER ?= local:2
# Bytecode of the project's own modules cached in __pycache__/ (ignored by git) for the processes the tests
# and the report start: an environment that sets PYTHONDONTWRITEBYTECODE (some sandboxes do) otherwise has
# every process compile the ~57,000 lines of theory/, numerics/ and proofs_checks/ again (0.8 CPU s each).
NOBYTECODE_OFF := PYTHONDONTWRITEBYTECODE=

.PHONY: all install test test-integration test-all report catalogue mutation bench profile-tests clean docs

all: test

# The packages (.ci/install_env.py): uv where it can be installed (from the sources pip is configured with, pip's
# resolution rule), pip otherwise; the same packages either way, ≈ 12 instead of ≈ 50 s of wall time on the 2-core
# machine (benchmarks/RESULTS.md, "Set-up"); TVERIFY_INSTALLER=pip uses pip only.
# pip compiles every installed file to bytecode one at a time (26 of torch's 34 CPU s of installing); installed
# with --no-compile, the whole environment is compiled afterwards by compileall on every core (-j 0): the same
# .pyc files, in about a third of the CPU time, split over both cores (benchmarks/RESULTS.md, "Set-up").
# The project itself is built without build isolation: pip otherwise makes a fresh build environment and installs
# setuptools into it on every install (14 of the 30 s wall of a no-op `pip install -e .`); the build backend
# pyproject names (setuptools>=64) is installed into the venv beside torch instead.
# compileall's exit status is 1 when a package ships a file that is not Python 3 (test data): that file is
# imported by nobody, so the status is not an error here.
# What nothing here imports is not compiled (COMPILE_SKIP: the distributions' own test suites, pip, setuptools, the
# browser driver's libraries, fontTools, torch's ONNX exporter and inductor): 35 instead of 66 CPU s, and a
# whole `pytest --collect-only` afterwards costs the same 12 CPU s as after compiling everything (measured on the
# 2-core machine, benchmarks/RESULTS.md "Set-up"); a module of those folders that is imported after all is
# compiled on its first import (the tests and the report run with bytecode writing on).
COMPILE_SKIP := /(tests?)/|/site-packages/(pip|setuptools|selenium|trio|fontTools)/|/torch/(onnx|_inductor)/
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) .ci/install_env.py '$(TORCH_PIN)'
	@$(PY) -m compileall -q -j 0 -x '$(COMPILE_SKIP)' $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') >/dev/null 2>&1 || true
	@touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(NOBYTECODE_OFF) OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -p no:cacheprovider --durations=10 -m "not integration"

# the integration tier (marker `integration`: clusters, the survey, the pytest plugin, the CLI over a whole group,
# the claims at further seeds): .ci/run runs it after `make test`; `make test-all` runs both tiers at once
test-integration: $(STAMP)
	$(NOBYTECODE_OFF) OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -p no:cacheprovider --durations=10 -m integration

test-all: $(STAMP)
	$(NOBYTECODE_OFF) OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup -p no:cacheprovider --durations=10

report: $(STAMP)
	$(NOBYTECODE_OFF) $(VENV)/bin/tverify report --out reports $(if $(REPORT_CLUSTER),--cluster $(REPORT_CLUSTER))

# docs/CATALOGUE.md and docs/catalogue.json from the registry (tests/test_cli.py checks they are current)
catalogue: $(STAMP)
	$(VENV)/bin/tverify list --markdown

mutation: $(STAMP)
	$(PY) -m pip install -q -e '.[mutation]'
	$(PY) benchmarks/mutation.py $(MUTATE) $(MUTATION_ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks.run

# the test tier of `make test` with each test's CPU seconds (its own and its child processes'), then the
# summary by class, module and test (benchmarks/profile_tests.py; benchmarks/RESULTS.md)
profile-tests: $(STAMP)
	rm -f .tverify-profile.jsonl
	$(NOBYTECODE_OFF) TVERIFY_PROFILE_OUT=$(CURDIR)/.tverify-profile.jsonl OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(PYTEST_WORKERS) \
		--dist loadgroup -p no:cacheprovider -p benchmarks.profile_tests -m "not integration"
	$(PY) -m benchmarks.profile_tests .tverify-profile.jsonl

clean:
	rm -rf $(VENV) reports site .tverify .pytest_cache .hypothesis .tverify-profile.jsonl

# the documentation site (site/), built in strict mode: a broken link or reference fails
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict
