"""Named-entity files in the three formats users have, read completely and checked before any work, and written back
in their own format (predictions):

- CoNLL columns (`.txt`, `.conll`, `.bio`, ...): one token (a character or a word) a line, its tag in the last
  column, a blank line between sentences; `-DOCSTART-` lines are kept but hold no sentence;
- JSON lines as transformers' `run_ner.py` reads them: a token list and a tag list per record (`tokens`/`ner_tags`
  unless the columns are named);
- CLUENER2020's span JSON lines: `{"text": ..., "label": {type: {entity: [[start, end], ...]}}}`, `end` inclusive
  (test files have no `label`).

The format is known from the file's structure (its first record: a JSON object with `text` or with the token column,
else columns), never from its name alone. Tags are IOB2 or BIOES (`entity_tags.py`); a file is written back in its
own scheme. Every error is one line naming the file, the line and the value: a bad tag sequence, token and tag counts
that differ, a span outside its text or not matching it, spans that overlap where the head cannot hold them.

A sentence's tokens are joined into one text (no space between tokens where either side is CJK, one space
elsewhere), so a tokenizer sees running text and entities become character spans of it (`Sentence.text`).
"""

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ....utils.errors import DataError
from ...run.file_formats import json_lines, json_values, read_text
from .tags import BIOES, IOB2, Span, TagError, first_overlap, scheme_of, spans_to_tags, tags_to_spans


CONLL, JSON_LINES, CLUENER = "CoNLL columns", "JSON lines", "CLUENER JSON"
DOCUMENT_START = "-DOCSTART-"
COLUMN_SEPARATOR = re.compile(r"[ \t]+")


@dataclass
class Sentence:
    """One sentence or paragraph: its tokens, its entities over them (None: unlabelled) and the line it starts on."""

    tokens: list[str]
    spans: list[Span] | None
    line: int

    @property
    def offsets(self) -> list[tuple[int, int]]:
        """Where each token is in `text`."""
        offsets, position = [], 0
        for index, token in enumerate(self.tokens):
            if index and not (is_cjk(self.tokens[index - 1][-1:]) or is_cjk(token[:1])):
                position += 1
            offsets.append((position, position + len(token)))
            position += len(token)
        return offsets

    @property
    def text(self) -> str:
        """The tokens as running text: joined without a space where either side is CJK, with one elsewhere."""
        offsets = self.offsets
        characters = [" "] * (offsets[-1][1] if offsets else 0)
        for token, (start, end) in zip(self.tokens, offsets, strict=True):
            characters[start:end] = token
        return "".join(characters)

    def character_spans(self) -> list[Span]:
        """The entities as character spans of `text`."""
        offsets = self.offsets
        return [Span(offsets[start][0], offsets[end - 1][1], kind) for start, end, kind in self.spans or []]


def token_spans(character_spans: list[Span], offsets: list[tuple[int, int]]) -> list[Span]:
    """Character spans of a sentence's text as spans of its tokens: every token a span touches belongs to it."""
    spans = []
    for start, end, kind in character_spans:
        inside = [index for index, (first, last) in enumerate(offsets) if first < end and last > start]
        if inside:
            spans.append(Span(inside[0], inside[-1] + 1, kind))
    return spans


def is_cjk(character: str) -> bool:
    """Whether a character is CJK (an ideograph, a CJK symbol or full-width form): such text has no spaces."""
    return bool(character) and (
        "\u2e80" <= character <= "\u9fff" or "\uf900" <= character <= "\ufaff" or "\uff00" <= character <= "\uffef"
    )


@dataclass
class EntityFile:
    """A named-entity file read and checked: its format, tag scheme (None for CLUENER) and sentences, with what
    writing it back needs (the lines or records as read)."""

    path: Path
    format: str
    scheme: str | None
    sentences: list[Sentence]
    labelled: bool
    records: list = field(default_factory=list)  # CoNLL: every line; JSON: one dict per sentence
    token_lines: list[list[int]] = field(default_factory=list)  # CoNLL: the line index of each token of a sentence
    tag_column: str | None = None  # JSON lines: the tag list's key

    def entity_types(self) -> list[str]:
        """The entity types, in order of first appearance."""
        return list(dict.fromkeys(span.type for sentence in self.sentences for span in sentence.spans or []))

    def write(self, path: str | Path, spans: list[list[Span]]) -> None:
        """This file with the entities of its first `len(spans)` sentences replaced by `spans` (token spans), in its
        own format and scheme; the other contents of each line or record are kept as read."""
        if self.format == CONLL:
            text = self._conll_text(spans)
        else:
            lines = [self._json_record(index, sentence_spans) for index, sentence_spans in enumerate(spans)]
            text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in lines)
        Path(path).write_text(text, encoding="utf-8")

    def _conll_text(self, spans: list[list[Span]]) -> str:
        lines = list(self.records)
        scheme = self.scheme or IOB2
        last = -1
        for sentence, lines_of, sentence_spans in zip(self.sentences, self.token_lines, spans, strict=False):
            for number, tag in zip(lines_of, spans_to_tags(sentence_spans, len(sentence.tokens), scheme), strict=True):
                lines[number] = with_tag(lines[number], tag, self.labelled)
            last = lines_of[-1]
        if len(spans) < len(self.sentences):
            lines = lines[: last + 1] + [""]
        return "\n".join(lines)

    def _json_record(self, index: int, spans: list[Span]) -> dict:
        sentence = self.sentences[index]
        record = dict(self.records[index])
        if self.format == JSON_LINES:
            record[self.tag_column] = spans_to_tags(spans, len(sentence.tokens), self.scheme or IOB2)
            return record
        label: dict[str, dict[str, list[list[int]]]] = {}
        for start, end, kind in spans:
            label.setdefault(kind, {}).setdefault(record["text"][start:end], []).append([start, end - 1])
        record["label"] = label
        return record


def with_tag(line: str, tag: str, replace: bool) -> str:
    """A CoNLL line with its last column replaced by `tag` (`replace`), or `tag` added after a space."""
    if not replace:
        content = line.rstrip("\r")
        return f"{content} {tag}{line[len(content) :]}"
    old = conll_fields(line)[-1]
    start = line.rindex(old)
    return f"{line[:start]}{tag}{line[start + len(old) :]}"


def read_entity_file(
    path: str | Path, token_column: str | None = None, tag_column: str | None = None, overlaps: bool = False
) -> EntityFile:
    """Read and check a named-entity file (see the module); `token_column`/`tag_column` name the JSON-lines columns
    (default: `tokens`/`ner_tags`), `overlaps` allows entities that share characters (CLUENER, for a head that holds
    them). `DataError` names the file, line and value of the first problem."""
    path = Path(path)
    lines = read_text(path).split("\n")
    first = next(filter(None, map(conll_fields, lines)), None)
    if first is None:
        raise DataError(f"{path}: empty file (no sentences)")
    records = json_records_or_none(path, first)
    if records is not None:
        result = read_json_lines(path, records, token_column or "tokens", tag_column or "ner_tags")
    else:
        if token_column or tag_column:
            raise DataError(f"{path}: --text_column_name/--label_column_name name JSON keys; this file is {CONLL}")
        result = read_conll(path, lines)
    if not result.sentences:
        raise DataError(f"{path}: no sentences")
    if not overlaps:
        for sentence in result.sentences:
            overlap = first_overlap(sentence.character_spans())
            if overlap is not None:
                before, after = (repr(sentence.text[span.start : span.end]) for span in overlap)
                raise DataError(
                    f"{path}:{sentence.line}: the entities {before} and {after} overlap, which tags cannot hold "
                    "(--head global_pointer reads nested entities)"
                )
    return result


def json_records_or_none(path: Path, first: list[str]) -> list[tuple[int, dict]] | None:
    """The file's JSON records when it is JSON lines (every top-level value an object), None when it is CoNLL
    columns. A file that starts like JSON (`{` or `[` with more after it on its first line) but does not parse as
    records is refused with the place JSON breaks; a first token `{` or `[` alone on its line is CoNLL's."""
    starts_like_json = first[0][:1] in ("{", "[") and first[0] not in ("{", "[")
    try:
        values = json_values(path)
    except DataError:
        if starts_like_json:
            raise
        return None
    if values and all(isinstance(value, dict) for _, value in values):
        return values
    return json_lines(path, values) if starts_like_json else None  # json_lines names the first non-object


def conll_fields(line: str) -> list[str]:
    """The columns of a CoNLL line, split at spaces and tabs only: a token may be any other character, U+3000 (the
    ideographic space) included."""
    stripped = line.strip(" \t")
    return COLUMN_SEPARATOR.split(stripped) if stripped else []


def read_conll(path: Path, lines: list[str]) -> EntityFile:
    """CoNLL columns: a token and its tag (last column) a line, blank lines between sentences."""
    sentences, token_lines, all_tags = [], [], []
    tokens, tags, numbers, columns_seen = [], [], [], set()

    def close():
        if tokens:
            sentences.append(Sentence(list(tokens), None, numbers[0] + 1))
            token_lines.append(list(numbers))
            all_tags.append(list(tags))
            tokens.clear(), tags.clear(), numbers.clear()

    for number, line in enumerate(lines):
        fields = conll_fields(line)
        if not fields or fields[0] == DOCUMENT_START:
            close()
            continue
        columns_seen.add(len(fields))
        if len(columns_seen) > 1:
            raise DataError(
                f"{path}:{number + 1}: {line.strip(' ')!r} has {len(fields)} column(s) where lines above differ"
            )
        tokens.append(fields[0])
        tags.append(fields[-1] if len(fields) > 1 else None)
        numbers.append(number)
    close()
    labelled = bool(columns_seen) and min(columns_seen) >= 2
    scheme = scheme_of(all_tags) if labelled else None
    if labelled:
        for sentence, tags_of, lines_of in zip(sentences, all_tags, token_lines, strict=True):
            sentence.spans = checked_spans(tags_of, scheme, lambda position, at=lines_of: (path, at[position] + 1))
    return EntityFile(path, CONLL, scheme, sentences, labelled, lines, token_lines)


def read_json_lines(path: Path, records: list[tuple[int, dict]], token_column: str, tag_column: str) -> EntityFile:
    """run_ner JSON lines (a token list and a tag list) or CLUENER JSON (`text` and `label` spans)."""
    if "text" in records[0][1] and token_column not in records[0][1]:
        sentences = [cluener_sentence(path, number, record) for number, record in records]
        labelled = all(sentence.spans is not None for sentence in sentences)
        if not labelled and any(sentence.spans is not None for sentence in sentences):
            number = next(n for (n, _), s in zip(records, sentences, strict=True) if s.spans is None)
            raise DataError(f"{path}:{number}: no 'label' where records above have one")
        return EntityFile(path, CLUENER, None, sentences, labelled, [record for _, record in records])
    sentences, all_tags = [], []
    labelled = tag_column in records[0][1]
    for number, record in records:
        tokens = string_list(path, number, record, token_column)
        tags = string_list(path, number, record, tag_column) if labelled else None
        if tags is not None and len(tags) != len(tokens):
            raise DataError(f"{path}:{number}: {len(tokens)} tokens but {len(tags)} tags")
        sentences.append(Sentence(tokens, None, number))
        all_tags.append(tags)
    scheme = scheme_of(all_tags) if labelled else None
    if labelled:
        for sentence, tags in zip(sentences, all_tags, strict=True):
            sentence.spans = checked_spans(tags, scheme, lambda position, line=sentence.line: (path, line))
    return EntityFile(path, JSON_LINES, scheme, sentences, labelled, [record for _, record in records], [], tag_column)


def string_list(path: Path, number: int, record: dict, key: str) -> list[str]:
    """`record[key]`, a non-empty list of strings."""
    if key not in record:
        raise DataError(f"{path}:{number}: no key {key!r} (keys: {', '.join(map(repr, record))})")
    value = record[key]
    if not isinstance(value, list) or not value or not all(isinstance(item, str) for item in value):
        raise DataError(f"{path}:{number}: {key!r} must be a non-empty list of strings, found {str(value)[:60]}")
    return value


def checked_spans(tags: list[str], scheme: str, where) -> list[Span]:
    """The spans of a sentence's tags; `where(position)` gives (file, line) for an error."""
    try:
        return tags_to_spans(tags, scheme)
    except TagError as error:
        path, line = where(error.position)
        raise DataError(f"{path}:{line}: {error} ({scheme})") from None


def cluener_sentence(path: Path, number: int, record: dict) -> Sentence:
    """A CLUENER record: its characters as tokens and its `label` spans (end inclusive) as entities."""
    text = record.get("text")
    if not isinstance(text, str) or not text:
        raise DataError(f"{path}:{number}: 'text' must be a non-empty string, found {str(text)[:60]!r}")
    if "label" not in record:
        return Sentence(list(text), None, number)
    label = record["label"]
    if not isinstance(label, dict):
        raise DataError(f"{path}:{number}: 'label' must map types to entities, found {str(label)[:60]}")
    spans = []
    for kind, entities in label.items():
        if not isinstance(entities, dict):
            raise DataError(f"{path}:{number}: label {kind!r} must map entities to [[start, end]], found {entities}")
        for entity, positions in entities.items():
            if not isinstance(positions, list) or not positions:
                raise DataError(f"{path}:{number}: {kind} {entity!r} has no [[start, end]] list: {positions}")
            for position in positions:
                valid = isinstance(position, list) and len(position) == 2
                if not valid or not all(isinstance(value, int) and not isinstance(value, bool) for value in position):
                    raise DataError(f"{path}:{number}: {kind} {entity!r}: {position} is not [start, end]")
                start, end = position
                if not 0 <= start <= end < len(text):
                    raise DataError(
                        f"{path}:{number}: {kind} {entity!r}: [{start}, {end}] is outside the text ({len(text)} "
                        "characters, end inclusive)"
                    )
                if text[start : end + 1] != entity:
                    raise DataError(
                        f"{path}:{number}: {kind} {entity!r}: [{start}, {end}] holds {text[start : end + 1]!r}"
                    )
                spans.append(Span(start, end + 1, kind))
    return Sentence(list(text), spans, number)


__all__ = [
    "BIOES",
    "CLUENER",
    "CONLL",
    "IOB2",
    "JSON_LINES",
    "EntityFile",
    "Sentence",
    "is_cjk",
    "read_entity_file",
    "token_spans",
]
