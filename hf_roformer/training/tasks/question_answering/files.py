"""Extractive question-answering data from files: SQuAD's JSON (`data` -> `paragraphs` -> `qas`, the format of
CMRC2018 and DRCD), the flat records `run_qa.py` reads (`{"data": [...]}`), and JSON lines of the same records
(`id`, `context`, `question`, `answers: {text, answer_start}`). Every file is read and checked whole before any work:
a question without an id, a repeated id, an answer whose `answer_start` does not hold its text, or a question without
an answer where unanswerable ones are not allowed is refused with a `DataError` naming the file and the question id."""

from pathlib import Path

import datasets

from ....utils.errors import DataError
from ...run.file_formats import json_lines, json_values


FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "title": datasets.Value("string"),
        "context": datasets.Value("string"),
        "question": datasets.Value("string"),
        "answers": {
            "text": datasets.List(datasets.Value("string")),
            "answer_start": datasets.List(datasets.Value("int32")),
        },
    }
)


def squad_records(document: dict, path: Path) -> list[tuple[str, dict]]:
    """(where, record) of every question of a SQuAD-layout document."""
    records = []
    for article_number, article in enumerate(document["data"]):
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise DataError(f"{path}: data[{article_number}] has no `paragraphs` list")
        for paragraph_number, paragraph in enumerate(article["paragraphs"]):
            where = f"data[{article_number}].paragraphs[{paragraph_number}]"
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("context"), str):
                raise DataError(f"{path}: {where} has no `context` string")
            if not isinstance(paragraph.get("qas"), list):
                keys = ", ".join(sorted(map(repr, paragraph)))
                raise DataError(f"{path}: {where} has no `qas` list of questions (its keys: {keys})")
            for question_number, question in enumerate(paragraph["qas"]):
                if not isinstance(question, dict):
                    raise DataError(f"{path}: {where}.qas[{question_number}] is not an object")
                answers = question.get("answers")
                if isinstance(answers, list):  # SQuAD's list of {text, answer_start} as run_qa's columns
                    if not all(isinstance(answer, dict) for answer in answers):
                        raise DataError(f"{path}: question {question.get('id')!r}: `answers` must hold objects")
                    answers = {
                        "text": [answer.get("text") for answer in answers],
                        "answer_start": [answer.get("answer_start") for answer in answers],
                    }
                record = {
                    "id": question.get("id"),
                    "title": article.get("title") or "",
                    "context": paragraph["context"],
                    "question": question.get("question"),
                    "answers": answers,
                    "is_impossible": question.get("is_impossible", False),
                }
                records.append((f"{where}.qas[{question_number}]", record))
    return records


def read_records(path: Path) -> list[tuple[str, dict]]:
    """(where, record) of every question in `path`, whichever of the three layouts it has: one JSON object with a
    `data` list (SQuAD's articles, or run_qa's flat records), else JSON lines of records (one record included)."""
    values = json_values(path)
    if len(values) == 1 and isinstance(values[0][1], dict) and "data" in values[0][1]:
        document = values[0][1]
        if not isinstance(document["data"], list):
            raise DataError(f"{path}: `data` must be a list (SQuAD's articles or one record per question)")
        if document["data"] and isinstance(document["data"][0], dict) and "paragraphs" in document["data"][0]:
            return squad_records(document, path)
        return [(f"data[{number}]", record) for number, record in enumerate(document["data"])]
    return [(f"line {line}", record) for line, record in json_lines(path, values)]


def checked_answers(record: dict, path: Path, where: str) -> dict:
    """The record's answers ({text, answer_start} lists), every start holding its text in the context."""
    question_id = record["id"]
    answers = record.get("answers")
    if not isinstance(answers, dict) or not isinstance(answers.get("text"), list):
        raise DataError(
            f"{path}: question {question_id!r} ({where}): `answers` must be {{text: [...], answer_start: [...]}}"
        )
    texts, starts = answers["text"], answers.get("answer_start")
    if not isinstance(starts, list) or len(starts) != len(texts):
        raise DataError(f"{path}: question {question_id!r} ({where}): `answers` needs one answer_start per text")
    context = record["context"]
    for answer, start in zip(texts, starts, strict=True):
        if not isinstance(answer, str) or not answer or isinstance(start, bool) or not isinstance(start, int):
            raise DataError(
                f"{path}: question {question_id!r} ({where}): an answer needs a non-empty text and an integer "
                f"answer_start, not {answer!r} at {start!r}"
            )
        found = context[start : start + len(answer)] if 0 <= start else ""
        if found != answer:
            raise DataError(
                f"{path}: question {question_id!r} ({where}): answer_start {start} does not hold its answer "
                f"{answer!r} (the context has {found!r} there)"
            )
    return {"text": texts, "answer_start": starts}


def read_question_answering_file(path: str | Path, with_negative: bool, need_answers: bool) -> datasets.Dataset:
    """The questions of one file as a `datasets.Dataset` (`id`, `title`, `context`, `question`, `answers`), checked
    as the module says. `need_answers`: every question carries `answers` (training and evaluation files; a test file
    may leave them out); `with_negative`: an empty answer list marks an unanswerable question (else it is refused)."""
    path = Path(path)
    rows = {name: [] for name in FEATURES}
    seen: set[str] = set()
    for where, record in read_records(path):
        if not isinstance(record, dict):
            raise DataError(f"{path}: {where} is not an object")
        question_id = record.get("id")
        if not isinstance(question_id, (str, int)) or isinstance(question_id, bool) or str(question_id) == "":
            raise DataError(f"{path}: {where} has no question `id`")
        question_id = str(question_id)
        if question_id in seen:
            raise DataError(f"{path}: question id {question_id!r} appears twice")
        seen.add(question_id)
        for key in ("context", "question"):
            if not isinstance(record.get(key), str) or not record[key].strip():
                raise DataError(f"{path}: question {question_id!r} ({where}): `{key}` must be a non-empty string")
        record = {**record, "id": question_id}
        if record.get("answers") is None and not need_answers:
            answers = {"text": [], "answer_start": []}
        else:
            answers = checked_answers(record, path, where)
        impossible = record.get("is_impossible", False)
        if not isinstance(impossible, bool):
            raise DataError(f"{path}: question {question_id!r} ({where}): is_impossible must be true or false")
        unanswerable = impossible or (record.get("answers") is not None and not answers["text"])
        if unanswerable and answers["text"]:
            raise DataError(f"{path}: question {question_id!r} ({where}): marked is_impossible but has answers")
        if unanswerable and not with_negative:
            raise DataError(
                f"{path}: question {question_id!r} ({where}) has no answer; unanswerable questions need "
                "--version_2_with_negative"
            )
        rows["id"].append(question_id)
        rows["title"].append(str(record.get("title") or ""))
        rows["context"].append(record["context"])
        rows["question"].append(record["question"])
        rows["answers"].append(answers)
    if not rows["id"]:
        raise DataError(f"{path}: no questions")
    return datasets.Dataset.from_dict(rows, features=FEATURES)


__all__ = ["read_question_answering_file"]
