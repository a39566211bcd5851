"""hf_roformer's native vLLM model (hf_roformer.integrations.vllm_model, loaded through the package's vLLM plugin) on
a real server (`make test-serving`), without `--trust-remote-code`, compared with the same models run alone in
transformers: what the Transformers backend serves, and what it cannot (each request's own length for
length-dependent rope types, `embedding_size` other than `hidden_size`, the model's own pooler).

One server per model, started once per module and shared by the tests that query it; each listens on 127.0.0.1, is
waited for with a bounded loop and stopped by its process id (tests/vllm_servers.py). Without vLLM (the main test
environment) the module is skipped.
"""

import pytest
import torch
from vllm_models import (
    FLOAT32_TOLERANCE,
    LONG_TEXT,
    TEXTS,
    TRAINED_LENGTH,
    alone,
    config,
    embeddings,
    largest_difference,
    pair_scores,
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


# --- classifiers: /classify, /score, /rerank ----------------------------------------------------------------------


LABELS = ["负面", "中性", "正面"]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A 3-label sequence classifier ([CLS] head) served in float32."""
    directory = tmp_path_factory.mktemp("native-classifier")
    model_config = config(num_labels=3, id2label=dict(enumerate(LABELS)), label2id={x: i for i, x in enumerate(LABELS)})
    model = hf_roformer.HfRoFormerForSequenceClassification(model_config)
    trained_on_pairs(model)
    save(model, directory / "model")
    with serving(directory / "model", "--dtype", "float32", directory=directory, native=True) as server:
        yield directory / "model", server


def test_classify_gives_the_pipelines_probabilities(classifier):
    from transformers import pipeline

    directory, server = classifier
    texts = [*TEXTS, LONG_TEXT[:60]]
    served = sorted(server.answer("/classify", {"input": texts})["data"], key=lambda item: item["index"])
    scores = pipeline("text-classification", model=str(directory), top_k=None)(texts)
    for answer, expected in zip(served, scores, strict=True):
        by_label = {item["label"]: item["score"] for item in expected}
        assert answer["label"] == max(by_label, key=by_label.get)
        probabilities = torch.tensor(answer["probs"], dtype=torch.float64)
        wanted = torch.tensor([by_label[label] for label in LABELS], dtype=torch.float64)
        assert largest_difference(probabilities, wanted) <= FLOAT32_TOLERANCE


@pytest.fixture(scope="module")
def mean_pooling_cross_encoder(tmp_path_factory):
    """A one-label classifier of sentence pairs with the mean-pooling head (`classifier_pooling="mean"`, the
    CAIL2019-SCM recipe) whose two segment embeddings differ clearly, served in float32."""
    directory = tmp_path_factory.mktemp("native-cross-encoder")
    model = hf_roformer.HfRoFormerForSequenceClassification(config(num_labels=1, classifier_pooling="mean"))
    trained_on_pairs(model)
    model = save(model, directory / "model")
    with serving(directory / "model", "--dtype", "float32", directory=directory, native=True) as server:
        yield model, server


def test_score_passes_the_segment_ids_of_each_pair(mean_pooling_cross_encoder):
    model, server = mean_pooling_cross_encoder
    query, documents = TEXTS[0], TEXTS[1:]
    answer = server.answer("/score", {"text_1": query, "text_2": documents})
    served = torch.tensor([item["score"] for item in sorted(answer["data"], key=lambda item: item["index"])])
    expected = pair_scores(model, query, documents)
    assert largest_difference(served, expected) <= FLOAT32_TOLERANCE
    assert largest_difference(expected, pair_scores(model, query, documents, segment_ids=False)) > 1e-3


def test_rerank_orders_the_documents_by_the_models_score(mean_pooling_cross_encoder):
    model, server = mean_pooling_cross_encoder
    query, documents = TEXTS[1], [TEXTS[0], *TEXTS[2:], LONG_TEXT[:40]]
    results = server.answer("/rerank", {"query": query, "documents": documents})["results"]
    expected = pair_scores(model, query, documents)
    assert [item["index"] for item in results] == expected.argsort(descending=True).tolist()
    served = torch.tensor([item["relevance_score"] for item in sorted(results, key=lambda item: item["index"])])
    assert largest_difference(served, expected) <= FLOAT32_TOLERANCE


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
