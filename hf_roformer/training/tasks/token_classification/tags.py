"""Entity spans and the tag sequences that carry them: IOB2 (`B-PER I-PER O`) and BIOES (`B-PER I-PER E-PER`,
`S-LOC`). A span is `(start, end, type)` over tokens, `end` exclusive. Conversions are exact both ways for valid
sequences; an invalid sequence (an `I-` that continues nothing, a `B-` never closed in BIOES, an unknown prefix) is
reported with the position and the tag, so the reader can name the file and line.

Written here rather than taken from seqeval: seqeval reads tags into entities for scoring, but neither validates a
sequence with the position of its first error nor writes spans back as tags.
"""

from typing import NamedTuple


IOB2, BIOES = "IOB2", "BIOES"
OUTSIDE = "O"


class Span(NamedTuple):
    """An entity: tokens `start` to `end` (exclusive) of type `type`."""

    start: int
    end: int
    type: str


class TagError(ValueError):
    """A tag sequence that is not valid in its scheme: `position` is the index of the offending tag."""

    def __init__(self, message: str, position: int, tag: str):
        super().__init__(message)
        self.position, self.tag = position, tag


def split_tag(tag: str, position: int) -> tuple[str, str | None]:
    """(prefix, type) of a tag: ("O", None), ("B", "PER"), ..."""
    if tag == OUTSIDE:
        return OUTSIDE, None
    prefix, dash, entity_type = tag.partition("-")
    if not dash or prefix not in ("B", "I", "E", "S") or not entity_type:
        raise TagError(f"the tag {tag!r} is neither O nor B-/I-/E-/S- followed by a type", position, tag)
    return prefix, entity_type


def scheme_of(tag_sequences) -> str:
    """BIOES when any tag starts with E- or S-, else IOB2."""
    for tags in tag_sequences:
        if any(tag.startswith(("E-", "S-")) for tag in tags):
            return BIOES
    return IOB2


def tags_to_spans(tags: list[str], scheme: str) -> list[Span]:
    """The entities of a valid tag sequence; `TagError` at the first tag the scheme does not allow there."""
    spans: list[Span] = []
    open_start, open_type = None, None
    for position, tag in enumerate(tags):
        prefix, entity_type = split_tag(tag, position)
        if scheme == IOB2 and prefix in ("E", "S"):
            raise TagError(f"the tag {tag!r} is BIOES, in an IOB2 sequence", position, tag)
        continues = open_type is not None and entity_type == open_type
        if prefix in ("I", "E") and not continues:
            raise TagError(f"the tag {tag!r} continues no {entity_type} entity", position, tag)
        if scheme == BIOES and open_type is not None and prefix not in ("I", "E"):
            raise TagError(f"the tag {tag!r} comes before the open {open_type} entity ends (E-)", position, tag)
        if prefix in ("B", "S", OUTSIDE) and open_type is not None:  # IOB2: a new entity or O closes the open one
            spans.append(Span(open_start, position, open_type))
            open_start, open_type = None, None
        if prefix == "B":
            open_start, open_type = position, entity_type
        elif prefix == "S":
            spans.append(Span(position, position + 1, entity_type))
        elif prefix == "E":
            spans.append(Span(open_start, position + 1, open_type))
            open_start, open_type = None, None
    if open_type is not None:
        if scheme == BIOES:
            opening = tags[open_start]
            raise TagError(f"the tag {opening!r} opens a {open_type} entity that never ends (E-)", open_start, opening)
        spans.append(Span(open_start, len(tags), open_type))
    return spans


def spans_to_tags(spans: list[Span], length: int, scheme: str = IOB2) -> list[str]:
    """The tag sequence of non-overlapping `spans` over `length` tokens."""
    tags = [OUTSIDE] * length
    for start, end, entity_type in spans:
        if scheme == BIOES and end - start == 1:
            tags[start] = f"S-{entity_type}"
            continue
        tags[start] = f"B-{entity_type}"
        for position in range(start + 1, end):
            tags[position] = f"I-{entity_type}"
        if scheme == BIOES:
            tags[end - 1] = f"E-{entity_type}"
    return tags


def first_overlap(spans: list[Span]) -> tuple[Span, Span] | None:
    """Two spans that share a token (nested or crossing), or None."""
    ordered = sorted(spans)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.start < before.end:
            return before, after
    return None


def iob2_labels(entity_types) -> tuple[str, ...]:
    """The classes of a softmax tagger: O, then B- and I- of each type in order."""
    return (OUTSIDE, *(f"{prefix}-{name}" for name in entity_types for prefix in ("B", "I")))


__all__ = [
    "BIOES",
    "IOB2",
    "OUTSIDE",
    "Span",
    "TagError",
    "first_overlap",
    "iob2_labels",
    "scheme_of",
    "spans_to_tags",
    "tags_to_spans",
]
