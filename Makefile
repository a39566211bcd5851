# `make demo` and `make test` work on a fresh machine: each creates its own virtual environment first.
PYTHON ?= python3
VENV ?= .venv
# The CPU build of torch is installed before the package, so no multi-GB CUDA build is pulled in.
TORCH_SPEC ?= torch==2.13.0
TRANSFORMERS_SPEC ?= transformers==5.23.0
OLDEST_TRANSFORMERS_SPEC ?= transformers==5.17.0
EXTRAS ?= tests

.PHONY: demo test test-oldest test-slow lint bench clean

$(VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet "$(TORCH_SPEC)"
	$(VENV)/bin/python -m pip install --quiet "$(TRANSFORMERS_SPEC)" -e ".[$(EXTRAS)]"
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/hf-roformer demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q

# The same suite on the oldest supported transformers release.
test-oldest:
	$(MAKE) test VENV=.venv-oldest TRANSFORMERS_SPEC="$(OLDEST_TRANSFORMERS_SPEC)"

test-slow: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -m slow

bench: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_models.py

clean:
	rm -rf $(VENV) .venv-oldest build *.egg-info .pytest_cache
