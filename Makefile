# `make demo` and `make test` work on a fresh machine: each creates its own virtual environment first.
# The demo's (.venv-demo) holds only what the demo needs (the `demo` extra); the tests' (.venv) holds the `tests`
# extra (torchao, onnx, peft, ...), whose import-time messages the demo never shows.
PYTHON ?= python3
VENV ?= .venv
DEMO_VENV ?= .venv-demo
# The CPU build of torch is installed before the package, so no multi-GB CUDA build is pulled in.
TORCH_SPEC ?= torch==2.13.0
# The tests run on the newest transformers release the registry serves when the environment is made (the range of
# setup.cfg, resolved then: a new release is tested before users meet it) and on the oldest supported release.
TRANSFORMERS_SPEC ?= transformers>=5.17,<6
OLDEST_TRANSFORMERS_SPEC ?= transformers==5.17.0
EXTRAS ?= tests

.PHONY: demo test test-oldest test-slow lint bench clean

# $(call make-venv,DIRECTORY,EXTRAS): a virtual environment with torch, transformers and hf_roformer[EXTRAS]
# (pip at its quietest: errors only).
define make-venv
	$(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet --quiet "$(TORCH_SPEC)"
	$(1)/bin/python -m pip install --quiet --quiet "$(TRANSFORMERS_SPEC)" -e ".[$(2)]"
	touch $(1)/.installed
endef

$(VENV)/.installed: setup.cfg pyproject.toml
	$(call make-venv,$(VENV),$(EXTRAS))

$(DEMO_VENV)/.installed: setup.cfg pyproject.toml
	$(call make-venv,$(DEMO_VENV),demo)

demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/hf-roformer demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

test: $(VENV)/.installed
	@$(VENV)/bin/python -c "import torch, transformers; print(f'testing on transformers {transformers.__version__}, torch {torch.__version__}')"
	$(VENV)/bin/python -m pytest -q $(if $(MARKERS),-m "$(MARKERS)")

# The same suite on the oldest supported transformers release, less the `user_path` tests (the README's install and
# the documented commands as written, which resolve to the newest release; the code they run is tested here too).
test-oldest:
	$(MAKE) test VENV=.venv-oldest TRANSFORMERS_SPEC="$(OLDEST_TRANSFORMERS_SPEC)" MARKERS="not slow and not user_path"

test-slow: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -m slow

bench: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_models.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) .venv-oldest build *.egg-info .pytest_cache
