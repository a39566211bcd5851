"""transformers pipelines and sentence-transformers on saved RoFormer models, loaded by path through the Auto classes:
each pipeline's answer equals the same computation done by hand with the model and the tokenizer."""

from pathlib import Path

import pytest
import torch
import transformers
from conftest import tiny_config

import hf_roformer
from hf_roformer.apps.question_answering import answer_question, best_span
from hf_roformer.remote_code.tokenization_hf_roformer import HfRoFormerTokenizer


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


VOCAB = Path(__file__).resolve().parent / "fixtures" / "word_vocab.txt"
TEXT = "今天天气很好，我们去北京的公园散步。"
LABELS = {0: "O", 1: "B-LOC", 2: "I-LOC"}


@pytest.fixture(scope="module")
def tokenizer():
    return HfRoFormerTokenizer(str(VOCAB))


@pytest.fixture(scope="module")
def save(tokenizer, tmp_path_factory):
    """Save a seeded tiny model of `head` (with the word-level tokenizer) and return its directory."""

    def saved(head, **config):
        torch.manual_seed(0)
        model = head(tiny_config(vocab_size=len(tokenizer), **config)).eval()
        directory = tmp_path_factory.mktemp(head.__name__)
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        return directory, model

    return saved


def test_fill_mask_ranks_the_models_predictions(save, tokenizer):
    directory, model = save(hf_roformer.HfRoFormerForMaskedLM)
    fill_mask = transformers.pipeline("fill-mask", model=str(directory))
    assert isinstance(fill_mask.model, hf_roformer.HfRoFormerForMaskedLM)
    answers = fill_mask("今天[MASK]很好", top_k=5)
    encoded = tokenizer("今天[MASK]很好", return_tensors="pt")
    position = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
    with torch.no_grad():
        probabilities = model(**encoded).logits[0, position].softmax(-1)
    expected = probabilities.topk(5)
    assert [answer["token"] for answer in answers] == expected.indices.tolist()
    torch.testing.assert_close(torch.tensor([answer["score"] for answer in answers]), expected.values)


def test_feature_extraction_returns_the_hidden_states(save, tokenizer):
    directory, model = save(hf_roformer.HfRoFormerModel)
    features = transformers.pipeline("feature-extraction", model=str(directory), return_tensors=True)(TEXT)
    with torch.no_grad():
        expected = model(**tokenizer(TEXT, return_tensors="pt")).last_hidden_state
    torch.testing.assert_close(features, expected)


def test_text_classification_scores_the_logits(save, tokenizer):
    directory, model = save(hf_roformer.HfRoFormerForSequenceClassification, num_labels=2, id2label={0: "负", 1: "正"})
    classify = transformers.pipeline("text-classification", model=str(directory), top_k=None)
    texts = [TEXT, "这家店的服务太差了"]
    results = classify(texts)
    with torch.no_grad():
        probabilities = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits.softmax(-1)
    for result, expected in zip(results, probabilities, strict=True):
        scores = {entry["label"]: entry["score"] for entry in result}
        assert scores == pytest.approx({"负": expected[0].item(), "正": expected[1].item()}, abs=1e-6)


def test_token_classification_aggregates_over_correct_character_spans(save, tokenizer):
    directory, model = save(
        hf_roformer.HfRoFormerForTokenClassification,
        num_labels=3,
        id2label=LABELS,
        label2id={label: index for index, label in LABELS.items()},
    )
    tagger = transformers.pipeline("token-classification", model=str(directory), aggregation_strategy="none")
    tokens = tagger(TEXT)
    encoded = tokenizer(TEXT, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0].tolist()
    with torch.no_grad():
        predicted = model(**encoded).logits[0].argmax(-1).tolist()
    expected = [(index, LABELS[label]) for index, label in enumerate(predicted) if LABELS[label] != "O"]
    expected = [(index, label) for index, label in expected if offsets[index] != [0, 0]]  # not [CLS]/[SEP]
    assert [(token["index"], token["entity"]) for token in tokens] == expected
    for token in tokens:
        assert (token["start"], token["end"]) == tuple(offsets[token["index"]])
        assert TEXT[token["start"] : token["end"]] == token["word"].removeprefix("##")
    grouped = transformers.pipeline("token-classification", model=str(directory), aggregation_strategy="simple")
    entities = grouped(TEXT)
    assert entities, "the seeded model tags some tokens"
    for entity in entities:
        assert TEXT[entity["start"] : entity["end"]].replace(" ", "") == entity["word"].replace(" ", "")
        assert entity["entity_group"] == "LOC"


def test_text_generation_continues_greedily_like_generate(save, tokenizer):
    directory, model = save(hf_roformer.HfRoFormerForCausalLM, is_decoder=True)
    generator = transformers.pipeline("text-generation", model=str(directory))
    result = generator("今天天气", max_new_tokens=6, do_sample=False, return_tensors=True)
    prompt = tokenizer("今天天气", return_tensors="pt")
    expected = model.generate(**prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert result[0]["generated_token_ids"] == expected[0].tolist()


def test_question_answering_pipeline_was_removed_upstream():
    """transformers 5 has no `question-answering` pipeline; `hf_roformer.apps.question_answering` does its decoding (if
    this fails, the pipeline is back and deserves a test like the others)."""
    with pytest.raises(KeyError, match="question-answering"):
        transformers.pipeline("question-answering")


def test_best_span_is_the_most_probable_allowed_span():
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        start_logits, end_logits = torch.randn(2, 12, generator=generator)
        allowed = torch.rand(12, generator=generator) > 0.3
        allowed[5] = True
        first, last, score = best_span(start_logits, end_logits, allowed, max_answer_tokens=4)
        start_p = start_logits.masked_fill(~allowed, float("-inf")).softmax(-1)
        end_p = end_logits.masked_fill(~allowed, float("-inf")).softmax(-1)
        spans = {(i, j): (start_p[i] * end_p[j]).item() for i in range(12) for j in range(i, min(i + 4, 12))}
        assert max(spans, key=spans.get) == (first, last)
        assert score == pytest.approx(spans[(first, last)], rel=1e-5)
    with pytest.raises(ValueError, match="no context token"):
        best_span(start_logits, end_logits, torch.zeros(12, dtype=torch.bool), 4)


def test_answer_question_returns_a_character_span_of_the_context(save, tokenizer):
    directory, _ = save(hf_roformer.HfRoFormerForQuestionAnswering)
    model = transformers.AutoModelForQuestionAnswering.from_pretrained(directory)
    context = TEXT * 3
    result = answer_question(model, tokenizer, "我们去哪里散步？", context, max_answer_tokens=5)
    assert context[result["start"] : result["end"]] == result["answer"] != ""
    encoded = tokenizer("我们去哪里散步？", context, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0]
    with torch.no_grad():
        outputs = model(**encoded)
    allowed = (encoded["token_type_ids"][0] == 1) & (offsets[:, 1] > offsets[:, 0])
    first, last, score = best_span(outputs.start_logits[0], outputs.end_logits[0], allowed, 5)
    assert (result["start"], result["end"], result["score"]) == (int(offsets[first, 0]), int(offsets[last, 1]), score)


def test_sentence_transformers_mean_pools_the_hidden_states(save, tokenizer):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    directory, model = save(hf_roformer.HfRoFormerModel)
    encoder = sentence_transformers.SentenceTransformer(str(directory), device="cpu")
    texts = [TEXT, "这家店的服务太差了", "好"]
    embeddings = encoder.encode(texts, convert_to_tensor=True)
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    torch.testing.assert_close(embeddings, (hidden * mask).sum(1) / mask.sum(1), atol=1e-5, rtol=1e-5)
