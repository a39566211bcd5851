"""From paragraphs with character spans to model tokens and back, through the tokenizer's offsets.

- **Alignment.** A paragraph is tokenized whole; each token's offsets say which characters it covers. A token that
  starts a unit of the input (a character, or a word of a word-level file) carries a label; a token continuing a unit
  (a word piece) carries none (-100), or its unit's label as `I-` with `label_all_tokens`, as transformers'
  `run_ner.py` does. Word-level (jieba) checkpoints give tokens of several characters: training paragraphs are
  tokenized apart at their entity edges, so no token holds two entities or half of one (none is lost or split); at
  evaluation and prediction the text is tokenized as it comes, an entity is carried by every token it touches (`B-` on
  the first, `I-` after), and a predicted entity covers the characters of its tokens.
- **Windows.** A paragraph longer than the model's input is read in overlapping windows of at most `max_length`
  tokens, specials included: never cut. Each token's prediction is taken from the window where it stands farthest
  from an edge (the middle of each overlap divides two windows), so every character of every paragraph gets one.
  A paragraph that fits is one window, the same input as a single pass.

Written here rather than with the tokenizer's own `stride`/overflow: the prediction of every token must come from
exactly one window, which overflow encodings do not say.
"""

from dataclasses import dataclass

import numpy as np

from .tags import OUTSIDE, Span


IGNORED = -100


@dataclass(frozen=True)
class Window:
    """Tokens `start` to `stop` of paragraph `paragraph` in one model input; the predictions of tokens `keep_start`
    to `keep_stop` are taken from it."""

    paragraph: int
    start: int
    stop: int
    keep_start: int
    keep_stop: int


@dataclass
class Paragraph:
    """A paragraph tokenized: token ids, each token's characters, and the index of the unit each token starts (None
    for a token continuing a unit)."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    starts_unit: list[bool]


def tokenized(tokenizer, text: str, unit_offsets: list[tuple[int, int]], breaks: set[int] = frozenset()) -> Paragraph:
    """`text` tokenized without special tokens, apart at the character positions `breaks` (a training paragraph's
    entity edges, so that no word-level token holds the edge of an entity: none is lost); a token starts a unit when
    it is the first to reach into it."""
    edges = sorted({0, len(text), *(edge for edge in breaks if 0 < edge < len(text))})
    pieces = [(start, text[start:end]) for start, end in zip(edges, edges[1:], strict=False)]
    encoded = tokenizer([piece for _, piece in pieces], add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = [], []
    for (shift, _), piece_ids, piece_offsets in zip(
        pieces, encoded["input_ids"], encoded["offset_mapping"], strict=True
    ):
        ids += piece_ids
        offsets += [(start + shift, end + shift) for start, end in piece_offsets]
    unit_of = np.full(len(text) + 1, -1)
    for index, (start, end) in enumerate(unit_offsets):
        unit_of[start:end] = index
    seen, starts = set(), []
    for start, end in offsets:
        units = {int(unit) for unit in unit_of[start:end] if unit >= 0}
        starts.append(bool(units - seen))
        seen |= units
    return Paragraph(ids, offsets, starts)


def plan_windows(paragraph: int, length: int, room: int) -> list[Window]:
    """The windows of a paragraph of `length` tokens, `room` tokens each (max_length less the special tokens): one
    when it fits, else windows advancing by three quarters of `room`, the last one ending with the paragraph."""
    if length <= room:
        return [Window(paragraph, 0, length, 0, length)]
    step = max(room * 3 // 4, 1)
    starts = list(range(0, length - room, step)) + [length - room]
    windows = []
    for index, start in enumerate(starts):
        keep_start = 0 if index == 0 else (start + starts[index - 1] + room) // 2
        keep_stop = length if index == len(starts) - 1 else (starts[index + 1] + start + room) // 2
        windows.append(Window(paragraph, start, start + room, keep_start, keep_stop))
    return windows


def token_labels(paragraph: Paragraph, spans: list[Span], label_ids: dict[str, int], label_all_tokens: bool):
    """One label id per token (IOB2 over the tokens each entity's characters touch); -100 for tokens continuing a
    unit, or their entity's `I-` label with `label_all_tokens`."""
    tags = [OUTSIDE] * len(paragraph.ids)
    for start, end, kind in spans:
        touched = [index for index, (first, last) in enumerate(paragraph.offsets) if first < end and last > start]
        touched = [index for index in touched if tags[index] == OUTSIDE]  # a token already carries an entity
        for position, index in enumerate(touched):
            tags[index] = f"{'B' if position == 0 else 'I'}-{kind}"
    labels = []
    for tag, starts in zip(tags, paragraph.starts_unit, strict=True):
        if starts:
            labels.append(label_ids[tag])
        elif label_all_tokens:
            labels.append(label_ids[tag if tag == OUTSIDE else "I-" + tag[2:]])
        else:
            labels.append(IGNORED)
    return labels


def predicted_spans(paragraph: Paragraph, tags: list[str]) -> list[Span]:
    """Character spans of the entities in the predicted `tags` of the tokens that start a unit (the others are not
    read), decoded as seqeval reads IOB2: an `I-` that continues nothing starts an entity."""
    spans, open_start, open_end, open_type = [], None, None, None
    for index, tag in enumerate(tags):
        if not paragraph.starts_unit[index]:
            if open_type is not None:
                open_end = paragraph.offsets[index][1]
            continue
        prefix, _, kind = tag.partition("-")
        if open_type is not None and (prefix != "I" or kind != open_type):
            spans.append(Span(open_start, open_end, open_type))
            open_type = None
        if prefix in ("B", "I") and open_type is None:
            open_start, open_type = paragraph.offsets[index][0], kind
        if open_type is not None:
            open_end = paragraph.offsets[index][1]
    if open_type is not None:
        spans.append(Span(open_start, open_end, open_type))
    return spans


def gather(windows: list[Window], window_values: list[np.ndarray], paragraphs: int) -> list[np.ndarray]:
    """Per paragraph, the values of its tokens (the window predictions past the leading special token), each taken
    from the window that keeps it."""
    parts: list[list[np.ndarray]] = [[] for _ in range(paragraphs)]
    for window, values in zip(windows, window_values, strict=True):
        kept = values[1 + window.keep_start - window.start : 1 + window.keep_stop - window.start]
        parts[window.paragraph].append(kept)
    return [np.concatenate(part) if part else np.zeros((0,)) for part in parts]


__all__ = ["IGNORED", "Paragraph", "Window", "gather", "plan_windows", "predicted_spans", "token_labels", "tokenized"]
