# ttfr: `make run` measures the default CPU suite, `make test` runs the tests: the fast tier first
# (`make test-fast`: unit and fake-executor tests, < 1 min), then the overhead gate
# (`make bench-overhead`, ~15 s), then, if both passed, the rest.
# Both create .venv from the pinned lock file on first use.

PYTHON ?= python3
# This machine kind sets PYTHONDONTWRITEBYTECODE=1, so pytest would rewrite every test module's (and ttfr's: its
# pytest plugin makes the package rewritten) assertions from source in every pytest process, 4 s of each worker's
# collection (7.4 s -> 3.2 s). Only the tests' pytest drops it: `make run` measures in the caller's environment.
PYTEST = env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed
PYTEST_ARGS ?=
ARGS ?=
# The fast tier is spread over the machine's cores (a module's tests stay on one worker). The rest
# runs one test at a time: real workers measured beside another test's would be contended, and
# their figures set aside. Every test has a time limit, and the slowest are listed.
XDIST := -n auto --dist loadscope
FAST := not integration and not torch_compile and not slow and not terminal
# Slow but measuring nothing (in-process engines, fits, pyhf's validation, pylint; the pseudo-terminal tests on
# fake executors; real processes whose tests read no figure a busy machine could change): spread over the cores,
# a module at a time (its module-scoped fixtures made once).
SLOW := ((slow or terminal) and not integration and not torch_compile) or contention_safe

.PHONY: install run test test-fast test-rest test-slurm bench bench-overhead gpu-check wheelhouse lint clean chromium schemas docs

$(STAMP): pyproject.toml requirements/cpu-lock.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/cpu-lock.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/ttfr run $(ARGS)

# In order, each only if the one before passed (also under make -j: a timing gate beside the
# fast tier's pytest -n auto would measure a contended machine).
test:
	$(MAKE) test-fast
	$(MAKE) bench-overhead
	$(MAKE) test-rest

# Everything the fast tier leaves out: the in-process HistFactory engines and fits, whole-tree checks and the
# pseudo-terminal tests on fake executors (spread over the cores: they time nothing), then, one test at a time,
# real worker processes of every backend, cold torch.compile, and the terminal on real workers (< 11 min, 2 cores).
test-rest: $(STAMP) chromium
	$(PYTEST) -m "$(SLOW)" -n auto --dist loadscope --timeout 900 --durations 10 $(PYTEST_ARGS)
	$(PYTEST) -m "not ($(FAST)) and not ($(SLOW))" --timeout 900 --durations 25 $(PYTEST_ARGS)

# Headless Chromium for the report.html test (Debian's package); the test skips, saying so,
# where it cannot be installed (no root, no apt).
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		(apt-get install -y -qq chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null 2>&1)) || \
		echo "make: chromium could not be installed: its report.html test will be skipped"

# The Slurm path against a real single-node Slurm on localhost (installs slurm-wlm and munge, starts
# munged, slurmctld and slurmd: needs root), then a 2-shard array merged and checked, and
# --concurrency groups run as job arrays on a named directory (issue 29).
test-slurm: $(STAMP)
	bash scripts/slurm-local.sh
	$(PYTEST) -m slurm -ra $(PYTEST_ARGS)

# Unit and fake-executor tests only (no worker of a real backend, no in-process engines or fits): < 1 min.
test-fast: $(STAMP)
	$(PYTEST) -m "$(FAST)" $(XDIST) --timeout 120 --durations 15 $(PYTEST_ARGS)

# ttfr's own overhead, measured by ttfr in paired rounds: the no-op case against `python -I -c pass`
# (cold process_s and ttfr_s) and against the same call loop in a bare interpreter (warm). Fails
# (exit 3) when a ratio's whole 95% interval lies above 1.5x: a 3x regression cannot hide in this
# machine's noise, a 5% wobble cannot fail it. About 15 s.
bench-overhead: $(STAMP)
	$(BIN)/ttfr selftest --harness --no-hyperfine --harness-rounds 20

# Every GPU row on a machine with a GPU (fails, exit 1, where there is none), on that machine's own
# $(PYTHON) and its CUDA builds of torch and JAX (not .venv's CPU ones); its report and compact summary go
# to docs/gpu/. OFFLINE=1: nothing downloaded, ttfr's missing needs installed from $(WHEELHOUSE) (made by
# `make wheelhouse` where an index is reachable, and brought along). FULL=1: the whole check, not --quick.
WHEELHOUSE ?= wheelhouse
gpu-check:
	$(PYTHON) scripts/gpu_stack.py $(if $(filter 1,$(OFFLINE)),--wheelhouse "$(WHEELHOUSE)") -- \
		$(if $(filter 1,$(FULL)),--full,--quick) --out docs/gpu $(ARGS)

# The wheels an air-gapped GPU image lacks (requirements/gpu-image.toml), for its Python, with their
# listing (LISTING.json) and total size checked against what a GPU lease copies (64 MiB).
# WHEELHOUSE_PYTHON=3.11: for another interpreter than the image's 3.12 (e.g. to try the path with .venv here).
wheelhouse: $(STAMP)
	$(BIN)/python scripts/wheelhouse.py --dest "$(WHEELHOUSE)" $(if $(WHEELHOUSE_PYTHON),--python-version $(WHEELHOUSE_PYTHON))

# Benchmarks of the harness itself (see docs/performance.md); hyperfine comes from Debian.
bench: $(STAMP)
	command -v hyperfine >/dev/null || (apt-get install -y -qq hyperfine >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq hyperfine))
	$(BIN)/python benchmarks/cold_overhead.py
	$(BIN)/python benchmarks/warm_overhead.py
	$(BIN)/python benchmarks/import_agreement.py

# The JSON Schemas of ttfr's artifacts, generated from its model's types (tests/test_schemas.py
# fails when the committed files are not what the types give).
schemas: $(STAMP)
	$(BIN)/python -m ttfr.artifacts.schema_files src/ttfr/artifacts/schemas

# The documentation site (mkdocs.yml, docs/) into site/: open site/index.html. Strict: a warning (a
# broken link or anchor, a page not in the navigation, a missing reference) is an error. MkDocs and
# Material come from their own lock file, installed into .venv beside the CPU stack.
# NO_MKDOCS_2_WARNING: Material's banner about its end of life in 2027, printed at every build.
$(DOCS_STAMP): $(STAMP) requirements/docs-lock.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements/docs-lock.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) build site src/*.egg-info

lint: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check ruff
	$(BIN)/ruff check src tests benchmarks scripts && $(BIN)/ruff format --check src tests benchmarks scripts
