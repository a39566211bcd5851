"""A real vLLM server (`make test-serving`) serving saved hf_roformer classifiers (`/classify`, `/score`, `/rerank`) by
both routes, from their remote code (vLLM's Transformers backend, hf_roformer blocked) and by hf_roformer's native vLLM
model (its plugin), compared with the same models run alone in transformers.

One server per model, started once per module (about 40 s each on 2 cores) and shared by the tests that query it;
each listens on 127.0.0.1, is waited for with a bounded loop and stopped by its process id (tests/vllm_servers.py).
The models are tests/vllm_models.py's. Without vLLM (the main test environment) the module is skipped.
"""

import pytest
import torch
from vllm_models import (
    FLOAT32_TOLERANCE,
    LONG_TEXT,
    TEXTS,
    config,
    largest_difference,
    pair_scores,
    save,
    serving,
    tokenizer,
    trained_on_pairs,
)
from vllm_servers import vllm_installed


pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed here: run `make test-serving`")

import hf_roformer  # noqa: E402


# --- classifiers: /classify, /score, /rerank ----------------------------------------------------------------------


ROUTES = ["remote code", "native"]


@pytest.fixture(scope="module", params=ROUTES)
def classifier(request, tmp_path_factory):
    """A 3-label sequence classifier (of single texts, and of pairs: as one fine-tuned for NLI), served in float32 by
    each route."""
    directory = tmp_path_factory.mktemp("classifier")
    labels = {0: "负面", 1: "中性", 2: "正面"}
    model_config = config(num_labels=3, id2label=labels, label2id={label: i for i, label in labels.items()})
    model = hf_roformer.HfRoFormerForSequenceClassification(model_config)
    trained_on_pairs(model)
    save(model, directory / "model")
    native = request.param == "native"
    with serving(directory / "model", "--dtype", "float32", directory=directory, native=native) as server:
        yield directory / "model", server


def test_classify_gives_the_pipelines_probabilities(classifier):
    from transformers import pipeline

    directory, server = classifier
    texts = [*TEXTS, LONG_TEXT[:60]]
    served = sorted(server.answer("/classify", {"input": texts})["data"], key=lambda item: item["index"])
    scores = pipeline("text-classification", model=str(directory), top_k=None)(texts)
    labels = ["负面", "中性", "正面"]
    for answer, expected in zip(served, scores, strict=True):
        by_label = {item["label"]: item["score"] for item in expected}
        assert answer["label"] == max(by_label, key=by_label.get)
        probabilities = torch.tensor(answer["probs"], dtype=torch.float64)
        wanted = torch.tensor([by_label[label] for label in labels], dtype=torch.float64)
        assert largest_difference(probabilities, wanted) <= FLOAT32_TOLERANCE


def test_a_classifier_of_several_labels_has_no_pair_route(classifier):
    """vLLM scores pairs (with their segment ids) only for one-label models; for several labels `/score` does not
    exist, and a pair joined into one text for `/classify` reaches the model with every segment id 0."""
    from transformers import pipeline

    directory, server = classifier
    assert server.post("/score", {"text_1": TEXTS[0], "text_2": TEXTS[1]}) == (404, {"detail": "Not Found"})
    pairs = [(TEXTS[0], TEXTS[1]), (TEXTS[2], TEXTS[3])]
    joined = [f"{first}[SEP]{second}" for first, second in pairs]
    for text, (first, second) in zip(joined, pairs, strict=True):  # the same tokens as the pair
        assert tokenizer()(text)["input_ids"] == tokenizer()(first, second)["input_ids"]
    served = sorted(server.answer("/classify", {"input": joined})["data"], key=lambda item: item["index"])
    classify = pipeline("text-classification", model=str(directory), top_k=None)
    labels = ["负面", "中性", "正面"]
    for answer, text, (first, second) in zip(served, joined, pairs, strict=True):
        probabilities = torch.tensor(answer["probs"], dtype=torch.float64)
        expected = {}
        for name, inputs in (("joined", text), ("pair", {"text": first, "text_pair": second})):
            by_label = {item["label"]: item["score"] for item in classify([inputs])[0]}
            expected[name] = torch.tensor([by_label[label] for label in labels], dtype=torch.float64)
        assert largest_difference(probabilities, expected["joined"]) <= FLOAT32_TOLERANCE  # segment ids all 0
        difference = largest_difference(probabilities, expected["pair"])
        print(f"pair joined for /classify: probabilities differ from the pair's by {difference:.3f}")
        assert difference > 100 * FLOAT32_TOLERANCE


@pytest.fixture(scope="module")
def token_labelling_classifier(tmp_path_factory):
    """A 3-label [CLS] sequence classifier served natively for the per-token task (`--pooler-config.task
    token_classify`), in float32."""
    directory = tmp_path_factory.mktemp("token-labelling-classifier")
    model = hf_roformer.HfRoFormerForSequenceClassification(config(num_labels=3))
    trained_on_pairs(model)
    model = save(model, directory / "model")
    options = ("--dtype", "float32", "--pooler-config.task", "token_classify")
    with serving(directory / "model", *options, directory=directory, native=True) as server:
        yield model, server


def test_the_native_classifier_labels_every_token_as_its_head_does(token_labelling_classifier):
    """The native [CLS] classifier leaves its last layer to the pooler, which computes only the [CLS] row for
    `/classify` and must compute every row for `token_classify`: each token's probabilities are the softmax of the
    classification head (dense, activation, projection) on that token's last hidden state, for texts of different
    lengths sharing a step."""
    model, server = token_labelling_classifier
    texts = [*TEXTS, LONG_TEXT[:60]]
    answer = server.answer("/pooling", {"input": texts, "task": "token_classify"})
    served = [torch.tensor(item["data"]) for item in sorted(answer["data"], key=lambda item: item["index"])]
    head = model.classifier

    def probabilities_of(states: torch.Tensor) -> torch.Tensor:
        return head.out_proj(head.activation(head.dense(states))).softmax(dim=-1)

    for text, probabilities in zip(texts, served, strict=True):
        with torch.no_grad():
            outputs = model.roformer(**tokenizer()(text, return_tensors="pt"), output_hidden_states=True)
            expected = probabilities_of(outputs.last_hidden_state[0])
            before_last_layer = probabilities_of(outputs.hidden_states[-2][0])
        assert probabilities.shape == expected.shape
        assert largest_difference(probabilities, expected) <= FLOAT32_TOLERANCE
        # What rows left at the layer before the last would give: far from the answer.
        assert largest_difference(before_last_layer[1:], expected[1:]) > 1e-2


@pytest.fixture(scope="module", params=[("remote code", "cls"), ("native", "mean")], ids=" ".join)
def cross_encoder(request, tmp_path_factory):
    """A one-label classifier of sentence pairs whose two segment embeddings differ clearly (as after fine-tuning on
    pairs with segment ids), served in float32: the [CLS] head from its remote code, and the mean-pooling head
    (`classifier_pooling="mean"`, the CAIL2019-SCM recipe) by the native model."""
    route, pooling = request.param
    directory = tmp_path_factory.mktemp("cross-encoder")
    model = hf_roformer.HfRoFormerForSequenceClassification(config(num_labels=1, classifier_pooling=pooling))
    trained_on_pairs(model)
    model = save(model, directory / "model")
    native = route == "native"
    with serving(directory / "model", "--dtype", "float32", directory=directory, native=native) as server:
        yield model, server


def test_score_passes_the_segment_ids_of_each_pair(cross_encoder):
    model, server = cross_encoder
    query, documents = TEXTS[0], TEXTS[1:]
    answer = server.answer("/score", {"text_1": query, "text_2": documents})
    served = torch.tensor([item["score"] for item in sorted(answer["data"], key=lambda item: item["index"])])
    expected = pair_scores(model, query, documents)
    assert largest_difference(served, expected) <= FLOAT32_TOLERANCE
    assert largest_difference(expected, pair_scores(model, query, documents, segment_ids=False)) > 1e-3


def test_rerank_orders_the_documents_by_the_models_score(cross_encoder):
    model, server = cross_encoder
    query, documents = TEXTS[1], [TEXTS[0], *TEXTS[2:], LONG_TEXT[:40]]
    results = server.answer("/rerank", {"query": query, "documents": documents})["results"]
    expected = pair_scores(model, query, documents)
    assert [item["index"] for item in results] == expected.argsort(descending=True).tolist()
    served = torch.tensor([item["relevance_score"] for item in sorted(results, key=lambda item: item["index"])])
    assert largest_difference(served, expected) <= FLOAT32_TOLERANCE
