# convkit: `make figures` and `make test` set everything up on a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

MATHJAX := docs/_static/mathjax4/tex-svg.js

.PHONY: setup test test-portable test-full figures bench lint docs mathjax readme clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# the 15 slowest tests are printed; the quick run of every analysis (a whole
# `convkit figures --quick`, marker figures_full) is left to test-full, while a fast smoke test
# of every analysis (its committed data replotted and checked) stays here
test: $(STAMP) $(MATHJAX)
	$(PY) -m pytest -q -m "not figures_full" --durations=15

# the suite as on another machine of the same kind (tools/portable_env.py): CONVKIT_THREADS=3,
# NUMBA_NUM_THREADS=1, and no AVX512 in numba's kernels, NumPy's loops or OpenBLAS where the CPU
# has it, so that a result that depends on the machine fails here first (.ci/run runs both);
# then every analysis in quick mode here and under that environment, their CSVs and verdicts
# compared (tools/portable_compare.py: bit for bit, or within the stated tolerance of a float
# column; about 3 min on 2 cores); either failing fails the target
test-portable: $(STAMP) $(MATHJAX)
	status=0; $(PY) tools/portable_env.py $(PY) -m pytest -q || status=1; \
	$(PY) tools/portable_compare.py --jobs $(JOBS) || status=1; exit $$status

# everything at full size, the quick run of every analysis included
test-full: $(STAMP)
	CONVKIT_FULL=1 $(PY) -m pytest -q --durations=15

# analyses in parallel processes, one per core (AFTER in an analysis orders those that share cells)
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

figures: $(STAMP)
	$(PY) -m convkit.cli figures --jobs $(JOBS)

bench: $(STAMP)
	$(PY) -m benchmarks.run

# a local MathJax (npm package mathjax@4, one self-contained file) renders the maths offline;
# without npm the pages load MathJax from its CDN
mathjax: $(MATHJAX)

$(MATHJAX):
	mkdir -p $(@D)
	cd $(@D) && npm pack --silent mathjax@4 > /dev/null && tar xzf mathjax-4*.tgz \
		package/tex-svg.js package/LICENSE && mv package/tex-svg.js package/LICENSE . \
		&& rm -rf package mathjax-4*.tgz

docs: $(STAMP)
	-$(MAKE) --no-print-directory mathjax
	$(PY) -m sphinx -b html -W --keep-going docs docs/_build/html

readme: $(STAMP)
	$(PY) tools/render_readme.py

lint: $(STAMP)
	$(VENV)/bin/ruff check convkit tests analyses benchmarks tools docs

clean:
	rm -rf $(VENV) .pytest_cache docs/_build
