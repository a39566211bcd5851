"""The models the real-vLLM tests serve and what they compare the servers' answers with: small RoFormers (hidden size
64, 2 heads of 32, the smallest head size vLLM's CPU attention takes) with random weights moved off their initial
values, so a missing bias or a swapped segment embedding shows; each text run alone in transformers; and the servers
these tests start (tests/vllm_servers.py), with the model run inside vLLM's engine process."""

from pathlib import Path

import torch
from vllm_servers import running

import hf_roformer


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
LONG_TEXT = ("房间干净，位置方便，下次还来。物流很快，包装完好，推荐！" * 7)[: 3 * TRAINED_LENGTH - 2]
FLOAT32_TOLERANCE = 1e-5
# The bound on the difference to the float32 model (normalized vectors) the tests hold in half precision: measured
# 3.8e-4 in float16 and 3.9e-3 in bfloat16 on these models and texts (docs/serving.md states both).
HALF_PRECISION_BOUNDS = {"float16": 1e-3, "bfloat16": 1e-2}


# The tests' servers run the model inside vLLM's engine process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`: no worker process
# of its own): the same model code, loaded from the same remote code, and the same outputs, with one interpreter fewer
# to start (ready in 41 s against 63 s on 2 cores: each process spends most of its start importing torch, transformers
# and vLLM). docs/serving.md's page (tests/test_docs_serving.py) and the benchmark run vLLM's default layout.
ENGINE_RUNS_THE_MODEL = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def serving(model_directory, *options: str, directory, environment: dict | None = None, native: bool = False):
    """`running(...)` (tests/vllm_servers.py) with the model run inside vLLM's engine process."""
    environment = {**ENGINE_RUNS_THE_MODEL, **(environment or {})}
    return running(model_directory, *options, directory=directory, environment=environment, native=native)


def tokenizer():
    """The character tokenizer of the test vocabulary (7,158 entries), as saved next to every model here."""
    return hf_roformer.HfRoFormerTokenizer(CHAR_VOCAB)


def config(**overrides) -> hf_roformer.HfRoFormerConfig:
    """The test models' config; seeds torch's generator, so the model built from it next is the same every run."""
    torch.manual_seed(0)
    return hf_roformer.HfRoFormerConfig(vocab_size=len(tokenizer()), **{**SIZES, **overrides})


def saved_off_initial_values(model: torch.nn.Module, directory) -> torch.nn.Module:
    """Move every weight off its initial value (norms and biases included) and save the model."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    model.eval().save_pretrained(directory)
    return model


def save(model: torch.nn.Module, directory) -> torch.nn.Module:
    """`saved_off_initial_values`, with the tokenizer saved beside the model."""
    saved_off_initial_values(model, directory)
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


def trained_on_pairs(model: hf_roformer.HfRoFormerForSequenceClassification) -> None:
    """Give the model what fine-tuning on sentence pairs gives it: a second segment embedding of its own, and logits
    that spread (not all near one value), so a lost segment id shows in the output."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        model.roformer.embeddings.token_type_embeddings.weight[1].normal_(generator=generator)
        model.classifier.out_proj.weight.mul_(20)


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
