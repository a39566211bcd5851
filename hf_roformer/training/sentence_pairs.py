"""Sentence pairs for sentence-vector training, in the layouts they are published in: LCQMC's TSV (`text_a<TAB>text_b
<TAB>label`, no header), STS-B's (GLUE's TSV with a header naming `sentence1`, `sentence2` and `score`, or the
Chinese copies' three columns with a 0-5 score), AFQMC's JSON lines (`sentence1`, `sentence2`, `label`), and pairs
without a label (two columns, or JSON lines without `label`: positives for in-batch negatives). Every file is read
and checked whole before any work; a mistake is a `DataError` naming the file, the line and the value."""

import json
import math
from pathlib import Path

import datasets

from ..utils.errors import DataError
from .data import non_blank_lines


SCORE_COLUMNS = ("score", "label", "similarity")


def number(value, where: str) -> float:
    """A label or score as a float."""
    try:
        result = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: label {value!r} is not a number") from None
    if not math.isfinite(result):
        raise DataError(f"{where}: label {value!r} is not a finite number")
    return result


def tsv_pairs(path: Path) -> list[tuple[str, str, str | None, str]]:
    """(sentence 1, sentence 2, label or None, where) of a TSV file: named columns when the first line names
    `sentence1` and `sentence2`, else two or three columns."""
    lines = non_blank_lines(path)
    header = lines[0][1].split("\t") if lines else []
    pairs = []
    if "sentence1" in header and "sentence2" in header:
        first, second = header.index("sentence1"), header.index("sentence2")
        score = next((header.index(name) for name in SCORE_COLUMNS if name in header), None)
        for number_, line in lines[1:]:
            fields = line.split("\t")
            if len(fields) != len(header):
                raise DataError(f"{path}:{number_}: expected {len(header)} tab-separated fields, got {len(fields)}")
            label = fields[score] if score is not None else None
            pairs.append((fields[first], fields[second], label, f"{path}:{number_}"))
        return pairs
    width = len(header)
    if width not in (2, 3):
        raise DataError(f"{path}:{lines[0][0]}: expected text_a<TAB>text_b[<TAB>label], got {width} fields")
    for number_, line in lines:
        fields = line.split("\t")
        if len(fields) != width:
            raise DataError(f"{path}:{number_}: expected {width} tab-separated fields like line 1, got {len(fields)}")
        pairs.append((fields[0], fields[1], fields[2] if width == 3 else None, f"{path}:{number_}"))
    return pairs


def json_pairs(path: Path) -> list[tuple[str, str, str | None, str]]:
    """(sentence 1, sentence 2, label or None, where) of JSON lines (`sentence1`/`sentence2` or `text_a`/`text_b`,
    optional `label` or `score`)."""
    pairs = []
    for number_, line in non_blank_lines(path):
        where = f"{path}:{number_}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{where}: not valid JSON ({error.msg})") from None
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected a JSON object")
        names = ("sentence1", "sentence2") if "sentence1" in record else ("text_a", "text_b")
        missing = [name for name in names if not isinstance(record.get(name), str)]
        if missing:
            raise DataError(f"{where}: missing text(s) {missing}")
        label = next((record[name] for name in SCORE_COLUMNS if name in record), None)
        pairs.append((record[names[0]], record[names[1]], label, where))
    return pairs


def read_sentence_pairs(path: str | Path) -> datasets.Dataset:
    """The pairs of one file as a dataset with `sentence1`, `sentence2` and, when the file has labels or scores,
    `score` (floats; every pair must have one then). Empty sentences are refused."""
    path = Path(path)
    pairs = json_pairs(path) if path.suffix in (".json", ".jsonl") else tsv_pairs(path)
    if not pairs:
        raise DataError(f"{path}: no sentence pairs")
    labelled = [label is not None for _, _, label, _ in pairs]
    if any(labelled) and not all(labelled):
        where = pairs[labelled.index(False)][3]
        raise DataError(f"{where}: this pair has no label, but others have")
    for first, second, _, where in pairs:
        if not first.strip() or not second.strip():
            raise DataError(f"{where}: empty sentence")
    columns = {"sentence1": [pair[0] for pair in pairs], "sentence2": [pair[1] for pair in pairs]}
    if all(labelled):
        columns["score"] = [number(label, where) for _, _, label, where in pairs]
    return datasets.Dataset.from_dict(columns)


__all__ = ["read_sentence_pairs"]
