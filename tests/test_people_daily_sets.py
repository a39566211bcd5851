"""The People's Daily sets of the reading tasks, on tagged lines in the corpus's layout: questions with the entity
replaced, its unique span as the answer, and the multiple-choice and pair forms of the same questions; the
same-paragraph sentence pairs of the whole corpus."""

import random

import pytest

from hf_roformer.apps.people_daily_sets import (
    as_choice_questions,
    as_sentence_pairs,
    paragraph_sentences,
    questions_of,
    same_paragraph_pairs,
    tagged_words,
    write_same_paragraph_pairs,
)
from hf_roformer.training.tasks.sentence_embedding.files import read_sentence_pairs


LINES = [
    "１２月/t  ３１日/t  ，/w  国家/n  主席/n  江/nr  泽民/nr  发表/v  新年/t  讲话/n  。/w",
    "新华社/nt  记者/n  兰/nr  红光/nr  在/p  北京/ns  摄影/v  ，/w  上海/ns  和/c  广州/ns  同时/d  转播/v  。/w",
]


def test_tagged_words_join_surname_and_given_name():
    assert tagged_words(LINES[0])[5] == ("江泽民", "nr")
    assert [word for word, tag in tagged_words(LINES[1]) if tag == "nr"] == ["兰红光"]


def test_questions_replace_one_entity_whose_span_is_the_answer():
    document = [tagged_words(line) for line in LINES]
    context = "".join(word for paragraph in document for word, _ in paragraph)
    questions = questions_of(document, "d", random.Random(0), per_document=10)
    assert {question["answers"]["text"][0] for question in questions} == {
        "江泽民",
        "新华社",
        "兰红光",
        "北京",
        "上海",
        "广州",
    }
    for question in questions:
        answer, start = question["answers"]["text"][0], question["answers"]["answer_start"][0]
        assert question["context"] == context and context[start : start + len(answer)] == answer
        word = {"nr": "谁", "ns": "哪里", "nt": "什么机构"}
        sentence = question["sentence"]
        assert question["question"] in {sentence.replace(answer, replacement) for replacement in word.values()}
    places = next(question for question in questions if question["answers"]["text"] == ["北京"])
    assert places["question"] == "新华社记者兰红光在哪里摄影，上海和广州同时转播。" and places["others"] == [
        "上海",
        "广州",
    ]
    person = next(question for question in questions if question["answers"]["text"] == ["江泽民"])
    assert person["others"] == ["兰红光"]
    choices = as_choice_questions([places, person])
    assert [len(item[1][0]["choice"]) for item in choices] == [3, 2]
    assert all(item[1][0]["answer"] in item[1][0]["choice"] for item in choices)
    pairs = as_sentence_pairs([places, person])
    assert pairs == [
        (places["question"], places["sentence"], 1), (places["question"], person["sentence"], 0),
        (person["question"], person["sentence"], 1), (person["question"], places["sentence"], 0),
    ]  # fmt: skip


def paragraph_of(sentence: str, paragraphs: list[list[str]]) -> int:
    """The index of the one paragraph holding `sentence`."""
    (index,) = {index for index, sentences in enumerate(paragraphs) if sentence in sentences}
    return index


def test_same_paragraph_pairs_label_by_paragraph_and_hold_out_whole_paragraphs():
    paragraphs = paragraph_sentences()
    training, held_out = same_paragraph_pairs(train=300, validation=200)
    assert len(training) == 300 and len(held_out) == 200
    assert 80 <= sum(label for *_, label in held_out) <= 120  # about half the held-out pairs are labelled 1
    held_out_paragraphs = set()
    for first, second, label in held_out:
        index = paragraph_of(first, paragraphs)
        held_out_paragraphs.add(index)
        assert index < 200 and paragraph_of(second, paragraphs) < 200 and first != second
        assert (paragraph_of(second, paragraphs) == index) == (label == 1)
    training_paragraphs = [paragraph_of(first, paragraphs) for first, _ in training]
    assert len(set(training_paragraphs)) == 300 and min(training_paragraphs) >= 200  # one pair a paragraph
    pairs_and_paragraphs = zip(training, training_paragraphs, strict=True)
    assert all(paragraph_of(second, paragraphs) == index for (_, second), index in pairs_and_paragraphs)
    assert held_out_paragraphs.isdisjoint(training_paragraphs)
    assert same_paragraph_pairs(train=10, validation=200)[1] == held_out  # the held-out pairs do not follow `train`


def test_same_paragraph_pairs_written_as_the_sentence_command_reads_them(tmp_path):
    paths = write_same_paragraph_pairs(tmp_path, train=20, validation=10)
    assert sorted(paths) == ["paragraph-pairs-dev.tsv", "paragraph-pairs-train.tsv"]
    training = read_sentence_pairs(paths["paragraph-pairs-train.tsv"])
    held_out = read_sentence_pairs(paths["paragraph-pairs-dev.tsv"])
    expected_training, expected_held_out = same_paragraph_pairs(train=20, validation=10)
    assert list(zip(training["sentence1"], training["sentence2"], strict=True)) == expected_training
    assert "score" not in training.column_names  # unlabelled: trained with in-batch negatives
    assert list(zip(held_out["sentence1"], held_out["sentence2"], held_out["score"], strict=True)) == expected_held_out


def test_more_pairs_than_paragraphs_are_refused_with_the_counts():
    available = len(paragraph_sentences())
    with pytest.raises(ValueError, match=f"4000 training and 500 held-out pairs asked for, {available} paragraphs"):
        same_paragraph_pairs(train=4000, validation=500)
