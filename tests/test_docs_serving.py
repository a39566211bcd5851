"""docs/serving.md run as written (`docs_pages.py`), in both environments: in the main one its blocks without vLLM
(the Dense-layer pooler as served, tensor-parallel logits against one process); in the serving environment
(`make test-serving`) its vLLM blocks too: two servers started, queried with curl and the Python clients, and stopped,
as the page says."""

import re

import pytest
from docs_pages import run_page_as_written
from vllm_servers import free_port, vllm_installed


pytestmark = pytest.mark.user_path  # see setup.cfg


@pytest.fixture(scope="module")
def serving_page():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PORT", str(free_port()))  # the page's `${PORT:-8000}`: a port nobody else uses here
        return run_page_as_written("serving.md")


def test_the_serving_page_prints_what_it_says(serving_page):
    assert serving_page.output_of("as_served = ").strip().splitlines()[-1] == "0.0"
    printed = re.search(r"largest difference to one process: (\S+)", serving_page.output_of("tp_logits.py"))
    assert printed and float(printed[1]) <= 1e-5


@pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed here: run `make test-serving`")
def test_the_served_blocks_print_what_the_page_says(serving_page):
    run = serving_page
    native = run.output_of("-o embeddings.json")
    assert '"object":"list"' in native  # curl's answer
    assert "Resolved architecture: HfRoFormerModel" in native  # hf_roformer's own vLLM model, through its plugin
    assert "Resolved architecture: Transformers" in run.output_of("-o backend.json")  # vLLM's Transformers backend
    output = run.output_of("embeddings.create")
    printed = re.search(r"(\d+) tokens; largest difference to the model alone: (\S+)", output)
    assert printed and int(printed[1]) > 1400 and float(printed[2]) <= 1e-5, output
    assert '"relevance_score"' in run.output_of("/rerank -H") and '"probs"' in run.output_of("/rerank -H")
    printed = re.search(r"largest difference of the scores to the model alone: (\S+)", run.output_of("text_1"))
    assert printed and float(printed[1]) <= 1e-5, run.output_of("text_1")
