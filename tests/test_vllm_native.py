"""hf_roformer's native vLLM model (hf_roformer.integrations.vllm_model, loaded through the package's vLLM plugin) on
a real server (`make test-serving`), without `--trust-remote-code`, compared with the same models run alone in
transformers: what the Transformers backend cannot serve (each request's own length for length-dependent rope types,
`embedding_size` other than `hidden_size`, the model's own pooler, generation through the RoFormer vocabulary head).
The classifiers (`/classify`, `/score`, `/rerank`) are served by both routes in tests/test_vllm_classifiers.py.

One server per model, started once per module and shared by the tests that query it; each listens on 127.0.0.1, is
waited for with a bounded loop and stopped by its process id (tests/vllm_servers.py). Without vLLM (the main test
environment) the module is skipped.
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
    trained_on_pairs,
)
from vllm_servers import refusal, vllm_installed


pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed here: run `make test-serving`")

import hf_roformer  # noqa: E402


# Served up to 3 x the trained length (vLLM's limit is `max_position_embeddings` unless told otherwise).
LONGER_LIMIT = ("--max-model-len", str(3 * TRAINED_LENGTH))
LONGER_LIMIT_ALLOWED = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
# Texts at the trained length each, together 4 times it, and one 3 times it: in one request they share a step, whose
# total length is past the length where length-dependent rope types change their frequencies.
SHARED_STEP_TEXTS = [*[(text * 8)[: TRAINED_LENGTH - 2] for text in TEXTS], LONG_TEXT]


def sharpened(model: torch.nn.Module) -> torch.nn.Module:
    """Sharper attention than random weights give, so that the output depends on the rotation."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(("query.weight", "key.weight")):
                parameter.mul_(4)
    return model


# --- encoders: /v1/embeddings -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dynamic_encoder(tmp_path_factory):
    """Dynamic NTK over the trained length, token embeddings narrower than the hidden states (`embeddings_project`),
    served in float32 with mean pooling."""
    directory = tmp_path_factory.mktemp("native-dynamic")
    rope = {"rope_type": "dynamic", "factor": 3.0, "original_max_position_embeddings": TRAINED_LENGTH}
    model = sharpened(hf_roformer.HfRoFormerModel(config(rope_parameters=rope, embedding_size=32)))
    save(model, directory / "model")
    options = ("--dtype", "float32", "--pooler-config", '{"pooling_type": "MEAN"}', *LONGER_LIMIT)
    served = serving(directory / "model", *options, directory=directory, environment=LONGER_LIMIT_ALLOWED, native=True)
    with served as server:
        yield model, server


def test_each_request_gets_the_frequencies_of_its_own_length(dynamic_encoder):
    """Requests sharing a step, together past the trained length, each as alone (the Transformers backend gives
    them the frequencies of their total length: `make test-serving-slow`)."""
    model, server = dynamic_encoder
    lengths = [len(tokenizer()(text)["input_ids"]) for text in SHARED_STEP_TEXTS]
    assert max(lengths[:-1]) <= TRAINED_LENGTH < sum(lengths)
    served = embeddings(server, SHARED_STEP_TEXTS)
    assert largest_difference(served, alone(model, SHARED_STEP_TEXTS, "mean")) <= FLOAT32_TOLERANCE


def test_the_server_runs_hf_roformers_own_model_without_remote_code(dynamic_encoder):
    _, server = dynamic_encoder
    output = server.output()
    assert "Resolved architecture: HfRoFormerModel" in output
    assert "Using Transformers modeling backend" not in output
    assert "trust_remote_code=False" in output


def test_token_embeddings_narrower_than_the_hidden_states_are_projected(dynamic_encoder):
    model, server = dynamic_encoder
    assert model.config.embedding_size != model.config.hidden_size
    assert largest_difference(embeddings(server, TEXTS), alone(model, TEXTS, "mean")) <= FLOAT32_TOLERANCE


@pytest.fixture(scope="module")
def longrope_sim_encoder(tmp_path_factory):
    """LongRoPE over the trained length and RoFormer-Sim's linear pooler, served in float32 with [CLS] pooling."""
    directory = tmp_path_factory.mktemp("native-longrope")
    rope = {
        "rope_type": "longrope",
        "factor": 3.0,
        "original_max_position_embeddings": TRAINED_LENGTH,
        "short_factor": [1.0] * 16,
        "long_factor": [float(i + 1) for i in range(16)],
    }
    model = sharpened(hf_roformer.HfRoFormerModel(config(rope_parameters=rope, pooler_activation="linear")))
    save(model, directory / "model")
    options = ("--dtype", "float32", *LONGER_LIMIT)
    served = serving(directory / "model", *options, directory=directory, environment=LONGER_LIMIT_ALLOWED, native=True)
    with served as server:
        yield model, server


def pooled_alone(model, texts: list[str]) -> torch.Tensor:
    """Each text run alone: the model's pooler output (RoFormer-Sim's sentence vector), normalized as vLLM does."""
    with torch.no_grad():
        vectors = [model(**tokenizer()(text, return_tensors="pt")).pooler_output[0] for text in texts]
    return torch.nn.functional.normalize(torch.stack(vectors), dim=-1)


def test_the_models_own_pooler_gives_the_sentence_vector_per_request(longrope_sim_encoder):
    model, server = longrope_sim_encoder
    served = embeddings(server, SHARED_STEP_TEXTS)
    expected = pooled_alone(model, SHARED_STEP_TEXTS)
    assert largest_difference(served, expected) <= FLOAT32_TOLERANCE
    assert largest_difference(expected, alone(model, SHARED_STEP_TEXTS)) > 1e-2  # the pooler was applied


# --- a token classifier: /pooling with the token_classify task ---------------------------------------------------


@pytest.fixture(scope="module")
def token_classifier(tmp_path_factory):
    """A 5-label token classifier under dynamic NTK over the trained length, served in float32."""
    directory = tmp_path_factory.mktemp("native-token-classifier")
    rope = {"rope_type": "dynamic", "factor": 3.0, "original_max_position_embeddings": TRAINED_LENGTH}
    model = hf_roformer.HfRoFormerForTokenClassification(config(rope_parameters=rope, num_labels=5))
    save(sharpened(model), directory / "model")
    options = ("--dtype", "float32", *LONGER_LIMIT)
    served = serving(directory / "model", *options, directory=directory, environment=LONGER_LIMIT_ALLOWED, native=True)
    with served as server:
        yield model, server


def test_every_token_gets_its_label_probabilities_as_alone(token_classifier):
    """Requests sharing a step, together past the trained length: each token's label probabilities are the softmax of
    the model's logits for its text run alone ([CLS] and [SEP] included)."""
    model, server = token_classifier
    answer = server.answer("/pooling", {"input": SHARED_STEP_TEXTS, "task": "token_classify"})
    served = [torch.tensor(item["data"]) for item in sorted(answer["data"], key=lambda item: item["index"])]
    assert "Resolved architecture: HfRoFormerForTokenClassification" in server.output()
    for text, probabilities in zip(SHARED_STEP_TEXTS, served, strict=True):
        with torch.no_grad():
            logits = model(**tokenizer()(text, return_tensors="pt")).logits[0]
        assert probabilities.shape == logits.shape
        assert largest_difference(probabilities, logits.softmax(dim=-1)) <= FLOAT32_TOLERANCE


# --- the heads in bfloat16 ---------------------------------------------------------------------------------------


def classifier_in_bfloat16():
    """A 3-label [CLS] classifier and `/classify`."""
    model = hf_roformer.HfRoFormerForSequenceClassification(config(num_labels=3))
    trained_on_pairs(model)
    return model, "/classify", {}


def sim_encoder_in_bfloat16():
    """An encoder with RoFormer-Sim's linear pooler and `/v1/embeddings`."""
    return hf_roformer.HfRoFormerModel(config(pooler_activation="linear")), "/v1/embeddings", {}


def token_classifier_in_bfloat16():
    """A 5-label token classifier and `/pooling` with `token_classify`."""
    model = hf_roformer.HfRoFormerForTokenClassification(config(num_labels=5))
    return model, "/pooling", {"task": "token_classify"}


def served_values(answer: dict, path: str) -> list[torch.Tensor]:
    """Each input's served numbers, in input order: probabilities, the embedding, or every token's probabilities."""
    key = {"/classify": "probs", "/v1/embeddings": "embedding", "/pooling": "data"}[path]
    return [torch.tensor(item[key]) for item in sorted(answer["data"], key=lambda item: item["index"])]


def float32_values(model, text: str) -> torch.Tensor:
    """What the float32 model alone gives for `text`: the pooler's vector normalized (`pooled_alone`), or label or
    token-label probabilities."""
    if isinstance(model, hf_roformer.HfRoFormerModel):
        return pooled_alone(model, [text])[0]
    with torch.no_grad():
        return model(**tokenizer()(text, return_tensors="pt")).logits[0].softmax(dim=-1)


@pytest.fixture(scope="module", params=[classifier_in_bfloat16, sim_encoder_in_bfloat16, token_classifier_in_bfloat16])
def head_in_bfloat16(request, tmp_path_factory):
    """A head whose last layers run in vLLM's head dtype (float32 for pooling models) on bfloat16 states: the [CLS]
    classifier, RoFormer-Sim's pooler and the token classifier, each served natively in bfloat16."""
    directory = tmp_path_factory.mktemp(request.param.__name__)
    model, path, body = request.param()
    save(model, directory / "model")
    with serving(directory / "model", "--dtype", "bfloat16", directory=directory, native=True) as server:
        yield model, server, path, body


def test_each_head_served_in_bfloat16_is_within_the_stated_bound(head_in_bfloat16):
    model, server, path, body = head_in_bfloat16
    texts = [*TEXTS, LONG_TEXT[:60]]
    served = served_values(server.answer(path, {"input": texts, **body}), path)
    differences = []
    for values, text in zip(served, texts, strict=True):
        expected = float32_values(model, text)
        assert values.shape == expected.shape
        differences.append(largest_difference(values, expected))
    print(f"{path} in bfloat16: largest difference to the float32 model {max(differences):.1e}")
    assert max(differences) <= HALF_PRECISION_BOUNDS["bfloat16"]


# --- a causal LM: /v1/completions -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def causal_lm(tmp_path_factory):
    """A RoFormer-GPT-like causal LM (the RoFormer vocabulary head: transform, tied projection, its own bias), served
    in float32 by vLLM's generate runner."""
    directory = tmp_path_factory.mktemp("native-causal-lm")
    model = save(hf_roformer.HfRoFormerForCausalLM(config(is_decoder=True)), directory / "model")
    options = ("--runner", "generate", "--dtype", "float32")
    with serving(directory / "model", *options, directory=directory, native=True) as server:
        yield model, server


def test_greedy_completions_are_what_generate_gives(causal_lm):
    """Each prompt's greedy continuation token by token, the prompts of one request decoded in the same steps."""
    model, server = causal_lm
    prompts = [tokenizer()(text)["input_ids"][:-1] for text in TEXTS]  # [CLS] and the text, no final [SEP]
    body = {"prompt": prompts, "max_tokens": 12, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    choices = sorted(server.answer("/v1/completions", body)["choices"], key=lambda choice: choice["index"])
    for prompt, choice in zip(prompts, choices, strict=True):
        with torch.no_grad():
            generated = model.generate(torch.tensor([prompt]), max_new_tokens=12, min_new_tokens=12, do_sample=False)[
                0, len(prompt) :
            ]
        assert choice["token_ids"] == generated.tolist()


# --- what the native model refuses --------------------------------------------------------------------------------


def test_linear_attention_is_refused_at_start_with_the_reason(tmp_path):
    save(hf_roformer.HfRoFormerModel(config(attention_type="linear")), tmp_path / "model")
    output = refusal(tmp_path / "model", "--dtype", "float32", directory=tmp_path, native=True)
    assert "hf_roformer's native vLLM model serves softmax attention only" in output
