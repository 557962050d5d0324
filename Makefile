# The two set-up commands of the README: `make run` and `make test`.
# Each installs what it needs (virtualenv, PyPI packages, Debian packages) before it runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?=
# Test workers (pytest-xdist), each given whole test files so that a module's shared cluster is
# started once: the suite waits on processes much of the time, so two workers on two cores take
# about 17 minutes where one takes 48.
WORKERS ?= 2

.PHONY: run test lint docs demo clean-venv

run: $(VENV)/.stamp-run
	$(BIN)/roost up $(ARGS)

# --require-referees: this target installs every referee (ZooKeeper, PySpark, strace, ...), so a
# test that would skip for a missing one fails instead (tests/support/referees.py).
test: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests bench examples
	$(BIN)/python scripts/type_check.py  # mypy: strict cores, the rest held to mypy-baseline.txt
	$(BIN)/lint-imports  # the dependency rules of docs/architecture.md ([tool.importlinter])
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # not --quiet: it hides the warnings strict counts
	$(BIN)/python -m pytest --require-referees -n $(WORKERS) --dist loadfile $(ARGS)

# The documentation site (mkdocs.yml; the reference pages are generated from the code as it
# builds), served on http://127.0.0.1:8000/ and rebuilt on every change.
docs: $(VENV)/.stamp-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

# Starts a Roost node and runs the messenger and trending-hashtags (Spark) scenarios on it.
demo: $(VENV)/.stamp-test
	$(BIN)/roost demo $(ARGS)

lint: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests bench examples
	$(BIN)/python scripts/type_check.py
	$(BIN)/lint-imports

$(VENV)/.stamp-run: pyproject.toml setup.py $(wildcard src/roost/_speedups/*.pyx)
	scripts/setup.sh run
	touch $@

# setup.py and the .pyx files: the install compiles the optional accelerator (roost._speedups).
$(VENV)/.stamp-test: pyproject.toml setup.py scripts/setup.sh $(wildcard src/roost/_speedups/*.pyx)
	scripts/setup.sh test
	touch $@

clean-venv:
	rm -rf $(VENV)
