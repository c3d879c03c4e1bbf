# convkit: `make figures` and `make test` set everything up on a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test test-full figures bench lint docs readme clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

test-full: $(STAMP)
	CONVKIT_FULL=1 $(PY) -m pytest -q

figures: $(STAMP)
	$(PY) -m convkit.cli figures

bench: $(STAMP)
	$(PY) -m benchmarks.run

docs: $(STAMP)
	$(PY) -m sphinx -b html -W --keep-going docs docs/_build/html

readme: $(STAMP)
	$(PY) tools/render_readme.py

lint: $(STAMP)
	$(VENV)/bin/ruff check convkit tests analyses benchmarks

clean:
	rm -rf $(VENV) .pytest_cache docs/_build
