"""Multiple-choice questions from files: C3's JSON (a list of `[context lines, questions, id]`, each question with
`question`, `choice` and `answer`, the answer's text) and `run_swag.py`'s columns (`sent1`, `sent2`, `ending0`,
`ending1`, ..., `label`) in CSV or JSON lines. Questions may have different numbers of choices (C3 has 2 to 4; a SWAG
row may leave its last endings empty). Every file is read and checked whole before any work; a mistake is a
`DataError` naming the file, the question and the value."""

import re
from pathlib import Path

import datasets

from ....utils.errors import DataError
from ...run.file_formats import json_lines, json_values, parse_integer, read_table


def choice_record(question_id: str, context: str, question: str, choices: list, label, where: str) -> dict:
    """One question, checked: at least two non-empty choices, all different, and a label (the correct choice's index,
    None when unknown) among them."""
    if len(choices) < 2 or not all(isinstance(choice, str) and choice.strip() for choice in choices):
        raise DataError(f"{where}: question {question_id!r} needs at least two non-empty choices, not {choices!r}")
    if len(set(choices)) != len(choices):
        raise DataError(f"{where}: question {question_id!r} lists a choice twice: {choices!r}")
    if label is not None and not 0 <= label < len(choices):
        raise DataError(f"{where}: question {question_id!r}: label {label} is not one of its {len(choices)} choices")
    return {"id": question_id, "context": context, "question": question, "choices": choices, "label": label}


def read_c3(path: Path, document) -> list[dict]:
    """C3's layout: `[[context lines], [{question, choice, answer}, ...], id]` per document."""
    records = []
    for number, item in enumerate(document):
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], list) and isinstance(item[1], list)):
            raise DataError(f"{path}: item {number} is not [context lines, questions, id] (C3's layout)")
        lines, questions, document_id = item
        if not all(isinstance(line, str) for line in lines):
            raise DataError(f"{path}: item {number} ({document_id!r}): context lines must be strings")
        for index, question in enumerate(questions):
            question_id = str(question.get("id", f"{document_id}-{index}")) if isinstance(question, dict) else None
            if question_id is None or not isinstance(question.get("question"), str):
                raise DataError(f"{path}: item {number} ({document_id!r}) question {index} has no `question` text")
            choices = question.get("choice")
            if not isinstance(choices, list):
                raise DataError(f"{path}: question {question_id!r} has no `choice` list")
            answer = question.get("answer")
            if answer is not None and answer not in choices:
                raise DataError(f"{path}: question {question_id!r}: answer {answer!r} is not one of {choices!r}")
            label = None if answer is None else choices.index(answer)
            records.append(
                choice_record(question_id, "\n".join(lines), question["question"], choices, label, str(path))
            )
    return records


ENDING = re.compile(r"ending(\d+)")


def swag_rows(path: Path, values=None) -> list[tuple[str, dict]]:
    """(where, row) of a CSV file (a header, then one row a line) or JSON lines in run_swag.py's columns."""
    if path.suffix == ".csv":
        return [(f"{path}:{line}", record) for line, record in read_table(path, ",").records()]
    return [(f"{path}:{line}", record) for line, record in json_lines(path, values)]


def swag_endings(row: dict, where: str) -> list[str]:
    """The endings `ending0`, `ending1`, ... in the order of their numbers, which must run without a gap; empty or
    missing last ones are dropped (fewer choices)."""
    numbers = sorted(int(match[1]) for match in map(ENDING.fullmatch, row) if match)
    if numbers != list(range(len(numbers))):
        missing = sorted(set(range(max(numbers, default=-1) + 1)) - set(numbers))
        raise DataError(f"{where}: the endings skip ending{missing[0]} (they are numbered from ending0 without a gap)")
    endings = [row[f"ending{number}"] for number in numbers]
    while endings and endings[-1] in ("", None):
        endings.pop()
    return endings


def read_swag(path: Path, values=None) -> list[dict]:
    """run_swag.py's layout: context `sent1`, the start of every ending `sent2`, endings `ending0`, `ending1`, ...
    (empty or missing last ones: fewer choices), `label` (optional: a test file)."""
    records = []
    for where, row in swag_rows(path, values):
        missing = [key for key in ("sent1", "sent2", "ending0", "ending1") if not isinstance(row.get(key), str)]
        if missing:
            raise DataError(f"{where}: missing column(s) {missing}")
        endings = swag_endings(row, where)
        label = row.get("label")
        label = None if label in ("", None) else parse_integer(label, where, "label")
        question_id = str(row.get("id") or row.get("video-id") or where.rsplit(":", 1)[1])
        records.append(choice_record(question_id, row["sent1"], row["sent2"], endings, label, where))
    return records


def read_multiple_choice_file(path: str | Path, need_labels: bool) -> datasets.Dataset:
    """The questions of one file (C3's JSON list, or run_swag.py's columns in .csv or JSON lines) as a dataset:
    `id`, `context`, `question`, `choices` and, when every question has its answer, `label`. `need_labels`: every
    question must have one (training and evaluation files); a test file may have none, but not some."""
    path = Path(path)
    values = None
    if path.suffix != ".csv":
        values = json_values(path)
    if values is not None and len(values) == 1 and isinstance(values[0][1], list):
        records = read_c3(path, values[0][1])  # one JSON document: C3's list
    else:
        records = read_swag(path, values)
    if not records:
        raise DataError(f"{path}: no questions")
    seen = set()
    for record in records:
        if record["id"] in seen:
            raise DataError(f"{path}: question id {record['id']!r} appears twice")
        seen.add(record["id"])
    unlabelled = [record["id"] for record in records if record["label"] is None]
    if unlabelled and (need_labels or len(unlabelled) < len(records)):
        raise DataError(f"{path}: question {unlabelled[0]!r} has no answer ({len(unlabelled)} without one)")
    columns = ["id", "context", "question", "choices"] + ([] if unlabelled else ["label"])
    return datasets.Dataset.from_dict({column: [record[column] for record in records] for column in columns})


__all__ = ["read_multiple_choice_file"]
