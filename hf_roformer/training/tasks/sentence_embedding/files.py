"""Sentence pairs for sentence-vector training, in the layouts they are published in: LCQMC's TSV (`text_a<TAB>text_b
<TAB>label`, no header), STS-B's (GLUE's TSV with a header naming `sentence1`, `sentence2` and `score`, or the
Chinese copies' three columns with a 0-5 score), AFQMC's JSON lines (`sentence1`, `sentence2`, `label`), and pairs
without a label (two columns, or JSON lines without `label`: positives for in-batch negatives). Every file is read
and checked whole before any work; a mistake is a `DataError` naming the file, the line and the value."""

from pathlib import Path

import datasets

from ....utils.errors import DataError
from ...run.file_formats import csv_rows, json_lines, parse_score, read_table


SCORE_COLUMNS = ("score", "label", "similarity")


def tsv_pairs(path: Path) -> list[tuple[str, str, str | None, str]]:
    """(sentence 1, sentence 2, label or None, where) of a TSV file: named columns when the first line names
    `sentence1` and `sentence2`, else two or three columns without a header."""
    rows = csv_rows(path, "\t")
    if not rows:
        return []
    first_line, first = rows[0]
    if "sentence1" in first and "sentence2" in first:
        score = next((name for name in SCORE_COLUMNS if name in first), None)
        return [
            (record["sentence1"], record["sentence2"], record[score] if score else None, f"{path}:{line}")
            for line, record in read_table(path, "\t", rows=rows).records()
        ]
    if len(first) not in (2, 3):
        raise DataError(f"{path}:{first_line}: expected text_a<TAB>text_b[<TAB>label], got {len(first)} fields")
    table = read_table(path, "\t", header=["text_a", "text_b", "label"][: len(first)], rows=rows)
    return [
        (fields[0], fields[1], fields[2] if len(fields) == 3 else None, f"{path}:{line}")
        for line, fields in zip(table.lines, table.rows, strict=True)
    ]


def json_pairs(path: Path) -> list[tuple[str, str, object, str]]:
    """(sentence 1, sentence 2, label or None, where) of JSON lines (`sentence1`/`sentence2` or `text_a`/`text_b`,
    optional `label` or `score`)."""
    pairs = []
    for line, record in json_lines(path):
        where = f"{path}:{line}"
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
        columns["score"] = [parse_score(label, where, what="label") for _, _, label, where in pairs]
    return datasets.Dataset.from_dict(columns)


__all__ = ["read_sentence_pairs"]
