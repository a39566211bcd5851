"""The reader of CAIL2019-SCM's data: triplets of legal documents in JSON lines, each becoming two labelled pairs.

The reader validates what it reads and raises `DataError` naming the file and line, so a run fails before it writes
anything (JSON lines as `file_formats.py` parses them)."""

from pathlib import Path

import datasets

from ....utils.errors import DataError
from ...run.file_formats import json_lines


def read_cail_split(path: str | Path) -> list[dict]:
    """CAIL2019-SCM triplets from a JSON-lines file: keys `A`, `B`, `C` (texts) and `label` ("B" or "C": which of
    B and C is more similar to A)."""
    path = Path(path)
    triplets = []
    for number, record in json_lines(path):
        missing = [key for key in ("A", "B", "C", "label") if key not in record]
        if missing:
            raise DataError(f"{path}:{number}: missing key(s) {missing}")
        for key in ("A", "B", "C"):
            if not isinstance(record[key], str) or not record[key].strip():
                raise DataError(f"{path}:{number}: `{key}` must be a non-empty string")
        if record["label"] not in ("B", "C"):
            raise DataError(f"{path}:{number}: unknown label {record['label']!r}; expected 'B' or 'C'")
        triplets.append({key: record[key] for key in ("A", "B", "C", "label")})
    if not triplets:
        raise DataError(f"{path}: no triplets")
    return triplets


def cail_pairs(triplets: list[dict]) -> datasets.Dataset:
    """Each triplet becomes two pairs, (A, B) then (A, C), labelled 1 for the more similar one and 0 for the other."""
    records = {"text_a": [], "text_b": [], "label": []}
    for triplet in triplets:
        for candidate in ("B", "C"):
            records["text_a"].append(triplet["A"])
            records["text_b"].append(triplet[candidate])
            records["label"].append([1.0 if triplet["label"] == candidate else 0.0])
    return datasets.Dataset.from_dict(records)
