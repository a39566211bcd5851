"""A real vLLM server (`make test-serving`) serving sentence encoders: RoFormer-Sim's pooler as a Dense layer, and
encoders trained by `hf-roformer finetune sentence-embedding`, compared with sentence-transformers.

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
    embeddings,
    largest_difference,
    save,
    serving,
)
from vllm_servers import vllm_installed


pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed here: run `make test-serving`")

import hf_roformer  # noqa: E402
from hf_roformer.integrations.serving import save_with_dense_pooler  # noqa: E402


# --- RoFormer-Sim: its pooler as a Dense layer --------------------------------------------------------------------


@pytest.fixture(scope="module", params=["remote code", "native"])
def sim(request, tmp_path_factory):
    """A RoFormer-Sim-like model (UniLM causal LM with a linear pooler, as converted), copied by
    `save_with_dense_pooler` and served in float32: from its remote code (an install without hf_roformer), and by
    hf_roformer's native vLLM model (the package installed), which applies the Dense layer vLLM reads, not the pooler
    a second time."""
    directory = tmp_path_factory.mktemp("sim")
    sim_config = config(is_decoder=True, unilm=True, pooler_activation="linear")
    save(hf_roformer.HfRoFormerForCausalLM(sim_config), directory / "sim")
    served = save_with_dense_pooler(directory / "sim", directory / "sim-vllm")
    native = request.param == "native"
    with serving(served, "--dtype", "float32", directory=directory, native=native) as server:
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
