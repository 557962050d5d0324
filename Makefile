# The two set-up commands of the README: `make run` and `make test`.
# Each installs what it needs (virtualenv, PyPI packages, Debian packages) before it runs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ARGS   ?=

.PHONY: run test lint demo clean-venv

run: $(VENV)/.stamp-run
	$(BIN)/roost up $(ARGS)

# --require-referees: this target installs every referee (ZooKeeper, PySpark, strace, ...), so a
# test that would skip for a missing one fails instead (tests/support/referees.py).
test: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests bench examples
	$(BIN)/python -m pytest --require-referees $(ARGS)

# Starts a Roost node and runs the messenger and trending-hashtags (Spark) scenarios on it.
demo: $(VENV)/.stamp-test
	$(BIN)/roost demo $(ARGS)

lint: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests bench examples

$(VENV)/.stamp-run: pyproject.toml setup.py $(wildcard src/roost/_speedups/*.pyx)
	scripts/setup.sh run
	touch $@

# setup.py and the .pyx files: the install compiles the optional accelerator (roost._speedups).
$(VENV)/.stamp-test: pyproject.toml setup.py scripts/setup.sh $(wildcard src/roost/_speedups/*.pyx)
	scripts/setup.sh test
	touch $@

clean-venv:
	rm -rf $(VENV)
