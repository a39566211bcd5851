"""Readers for one's own text-classification data: CSV, TSV, JSON and JSON-lines files.

`file_formats.py` parses the files (TSV without quoting; every record with the header's number of fields); this
module checks what was parsed and turns it into the columns the fine-tuning code reads: `text_a`, `text_b` (pairs),
`label` and `index`. Labels come from the user (`--do_regression true|false`) or from an unambiguous type: integers,
strings and booleans are classes (the sorted set of training labels becomes `id2label`); numbers with a fractional
part (`3.5`) make a regression, as `run_glue.py` reads a float column, and the run summary says so; floats that are
all whole numbers (`0.0`, `1.0`) are refused until the user says which. Every rejection names the file and the line (and
the column), before anything is written.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

import datasets

from ....utils.errors import DataError
from ...run.file_formats import DECIMAL, json_array_lines, json_values, parse_score, read_table, read_text


FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "json"}
# Text columns tried, in order, when --text_column_names is not given (as transformers' run_glue.py and
# run_classification.py name them).
DEFAULT_TEXT_COLUMNS = (("sentence1", "sentence2"), ("sentence",), ("text",))
INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class Labels:
    """The label set of a task read from data: class names in id order, or `None` for regression."""

    names: tuple[str, ...] | None

    @property
    def is_regression(self) -> bool:
        """Whether the task predicts a score instead of a class."""
        return self.names is None


def file_format(path: Path) -> str:
    """`csv`, `tsv` or `json` (JSON lines or one JSON array of objects), from the file name."""
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        raise DataError(f"{path}: unknown file type {path.suffix!r}; use one of {sorted(FORMATS)}") from None


@dataclass(frozen=True)
class Records:
    """A file's records as columns (`table[column]`: every record's value, None where a JSON record lacks the key),
    with the line each record starts on."""

    path: Path
    column_names: list[str]
    values: dict[str, list]
    lines: list[int]

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, column: str) -> list:
        return self.values[column]


def load_table(path: Path) -> Records:
    """The file's records: every CSV/TSV cell a string (an empty cell an empty string), JSON values with their JSON
    types (one JSON array of objects, or one object a record). A file that cannot be read as its type raises
    `DataError` naming the line where it breaks."""
    kind = file_format(path)
    if kind == "json":
        text = read_text(path)
        values = json_values(path, text)
        if len(values) == 1 and isinstance(values[0][1], list):
            elements = values[0][1]
            lines = json_array_lines(text)
            for line, element in zip(lines, elements, strict=True):
                if not isinstance(element, dict):
                    raise DataError(f"{path}:{line}: expected a JSON object in the array, found {_shown(element)}")
            records = list(zip(lines, elements, strict=True))
        else:
            for line, value in values:
                if not isinstance(value, dict):
                    raise DataError(
                        f"{path}:{line}: expected a JSON array of objects or one object a line, found {_shown(value)}"
                    )
            records = values
        names = list(dict.fromkeys(key for _, record in records for key in record))
        table = Records(path, names, {name: [record.get(name) for _, record in records] for name in names}, [])
        table.lines.extend(line for line, _ in records)
    else:
        read = read_table(path, "\t" if kind == "tsv" else ",")
        table = Records(path, read.header, {name: read.column(name) for name in read.header}, read.lines)
    if len(table) == 0:
        raise DataError(f"{path}: no examples")
    return table


def _shown(value) -> str:
    return json.dumps(value, ensure_ascii=False)[:60]


class Locator:
    """Names records as "file:line"."""

    def __init__(self, table: Records):
        self.path, self.lines = table.path, table.lines

    def __call__(self, row: int) -> str:
        line = self.lines[row] if row < len(self.lines) else None
        return f"{self.path}:{line}" if line is not None else f"{self.path}: record {row + 1}"


def choose_text_columns(columns: list[str], requested: list[str] | None, path: Path) -> tuple[list[str], str | None]:
    """The one or two text columns: those requested, or the first of `DEFAULT_TEXT_COLUMNS` the file has; and what is
    wrong with the file's columns for them (None when nothing is)."""
    if requested:
        missing = [name for name in requested if name not in columns]
        return list(requested), f"no column(s) {missing} (--text_column_names)" if missing else None
    for candidate in DEFAULT_TEXT_COLUMNS:
        if all(name in columns for name in candidate):
            return list(candidate), None
    return (
        [],
        "no text column found (looked for sentence1 + sentence2, sentence, text; name them with --text_column_names)",
    )


def label_kind(values: list, csv_like: bool) -> str:
    """'float' (regression), 'int' or 'str' for the labels of a split, from JSON types or CSV cell syntax."""
    if all(_is_integer(value, csv_like) for value in values):
        return "int"
    if all(_is_number(value, csv_like) for value in values):
        return "float"
    return "str"


def _is_integer(value, csv_like: bool) -> bool:
    if csv_like:
        return bool(INTEGER.fullmatch(value.strip()))
    return isinstance(value, int) and not isinstance(value, bool)


def label_name(value) -> str:
    """The class name of a label value: JSON strings as they are, numbers and booleans as JSON writes them."""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value)


@dataclass
class TextFileSplit:
    """One file read and checked: its examples (text_a, text_b, raw labels) and how to name its records."""

    path: Path
    table: Records
    text_columns: list[str]
    label_column: str | None
    locate: Locator

    @property
    def is_csv_like(self) -> bool:
        return file_format(self.path) != "json"


def column_problems(path: Path, table: Records, text_columns, label_column: str, needs_label: bool):
    """(the text columns chosen, what is wrong with the file's columns: every problem, so one message names them
    all)."""
    columns = list(table.column_names)
    chosen, problem = choose_text_columns(columns, text_columns, path)
    problems = [problem] if problem else []
    if needs_label and label_column not in columns:
        problems.append(f"no label column {label_column!r} (--label_column_name)")
    if problems:
        return chosen, f"{path}: {'; '.join(problems)}; the columns are {columns}"
    return chosen, None


def read_split(path: Path, table: Records, chosen: list[str], label_column: str) -> TextFileSplit:
    """Check one file's values: its text columns (non-empty strings on every record) and its labels (present on
    every record that has the label column, numbers or texts, of one JSON type)."""
    has_label = label_column in table.column_names
    split = TextFileSplit(path, table, chosen, label_column if has_label else None, Locator(table))
    for column in chosen:
        for row, value in enumerate(table[column]):
            if not isinstance(value, str):
                raise DataError(f"{split.locate(row)}: column {column!r} holds {value!r}, not a text")
            if not value.strip():
                raise DataError(f"{split.locate(row)}: column {column!r} is empty (every example needs its text)")
    if has_label:
        for row, value in enumerate(table[label_column]):
            if value is None or (isinstance(value, str) and not value.strip()):
                raise DataError(f"{split.locate(row)}: column {label_column!r} is empty (every example needs a label)")
            if not isinstance(value, (str, int, float, bool)):
                raise DataError(f"{split.locate(row)}: label {value!r} is neither a number nor a text")
        if not split.is_csv_like:
            check_one_json_label_type(split)
    return split


JSON_LABEL_TYPES = {bool: "a boolean", str: "a string", int: "a number", float: "a number"}


def check_one_json_label_type(split: TextFileSplit, shown: int = 3) -> None:
    """Refuse a JSON file whose labels mix JSON types (`1`, `"1"` and `true`): `datasets` reads `"1"` as `1` in a
    mixed column, so these became two classes out of three spellings, without a word. The `DataError` names the file,
    the first label of each type and its lines."""
    path, lines_of = split.path, {}
    for line, value in zip(split.table.lines, split.table[split.label_column], strict=True):
        kind = JSON_LABEL_TYPES.get(type(value))
        if kind is not None:
            lines_of.setdefault(kind, []).append((line, value))
    if len(lines_of) < 2:
        return

    def described(kind: str) -> str:
        found = [line for line, _ in lines_of[kind]]
        listed = ", ".join(map(str, found[:shown]))
        if len(found) > shown:
            listed += f" and {len(found) - shown} more"
        elif len(found) > 1:
            listed = ", ".join(map(str, found[:-1])) + f" and {found[-1]}"
        first = json.dumps(lines_of[kind][0][1], ensure_ascii=False)
        return f"{first} ({kind}) on line{'s' if len(found) > 1 else ''} {listed}"

    raise DataError(
        f"{path}: labels of different JSON types: " + "; ".join(map(described, lines_of)) + ". Give every label the "
        "same type (all strings, all numbers or all booleans)"
    )


def infer_labels(train: TextFileSplit, regression: bool | None) -> Labels:
    """The task's labels from the training file: a regression when `regression` is true or, as transformers'
    `run_glue.py` reads a float column, when its labels are numbers some of which have a fractional part (`3.5`);
    otherwise the sorted set of its labels (numerically when they are numbers). Numbers written as floats that are all
    whole (`0.0`, `1.0`) could be classes or scores: without `regression` they are refused, naming both choices."""
    values, csv_like = train.table[train.label_column], train.is_csv_like
    kind = label_kind(values, csv_like)
    fractional = [
        row for row, value in enumerate(values) if _is_number(value, csv_like) and not _is_whole(value, csv_like)
    ]
    if regression is None and kind == "float" and not fractional:
        row = next(row for row, value in enumerate(values) if not _is_integer(value, csv_like))
        shown = ", ".join(sorted({label_name(value) for value in values}, key=float)[:4])
        raise DataError(
            f"{train.locate(row)}: the labels ({shown}) are whole numbers written as floats: classes or scores? Pass "
            "--do_regression false for classes or --do_regression true for a score (regression)"
        )
    if regression or (regression is None and fractional):
        if kind == "str":  # scores with a cell that is no number (`4_2`, `nan`, `n/a`): not a set of class names
            row = next(row for row, value in enumerate(values) if not _is_number(value, csv_like))
            reason = f"the label {values[row]!r} is not a number"
            if fractional and regression is None:
                reason += f", but {values[fractional[0]]!r} ({train.locate(fractional[0])}) makes this a regression"
            raise DataError(f"{train.locate(row)}: {reason}")
        return Labels(None)
    if kind in ("int", "float"):
        names = sorted({label_name(value) for value in values}, key=float)
    else:
        names = sorted({label_name(value) for value in values})
    if len(names) < 2:
        raise DataError(f"{train.path}: every example has the label {names[0]!r}; classification needs two or more")
    return Labels(tuple(names))


def regression_note(train_path: str | Path, labels: Labels, regression: bool | None) -> str | None:
    """The run summary's line when the labels' values made the task a regression (no `--do_regression` given)."""
    if not labels.is_regression or regression is not None:
        return None
    return (
        f"{Path(train_path).name}: labels with a fractional part make this a regression (one score, as run_glue.py "
        "reads a float column); --do_regression false reads them as classes"
    )


def _is_whole(value, csv_like: bool) -> bool:
    """Whether a number label is a whole number (`1`, `1.0`, `1e3`)."""
    return float(str(value).strip() if csv_like else value).is_integer()


def _is_number(value, csv_like: bool) -> bool:
    if csv_like:
        return bool(DECIMAL.fullmatch(str(value).strip()))
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def to_examples(split: TextFileSplit, labels: Labels) -> datasets.Dataset:
    """`text_a`, `text_b`, `label` (when the file has labels) and `index` columns; labels checked against `labels`."""
    records = {"text_a": split.table[split.text_columns[0]]}
    if len(split.text_columns) == 2:
        records["text_b"] = split.table[split.text_columns[1]]
    records["index"] = [str(row) for row in range(len(split.table))]
    if split.label_column is not None:
        values = split.table[split.label_column]
        if labels.is_regression:
            converted = []
            for row, value in enumerate(values):
                if not _is_number(value, split.is_csv_like):
                    raise DataError(f"{split.locate(row)}: label {value!r} is not a number")
                raw = value if split.is_csv_like else repr(float(value))
                converted.append(parse_score(raw, split.locate(row)))
        else:
            ids = {name: index for index, name in enumerate(labels.names)}
            converted = []
            for row, value in enumerate(values):
                name = label_name(value)
                if name not in ids:
                    raise DataError(
                        f"{split.locate(row)}: label {name!r} does not occur in the training file; "
                        f"its labels are {list(labels.names)}"
                    )
                converted.append(ids[name])
        records["label"] = converted
    return datasets.Dataset.from_dict(records)


def read_text_classification(
    files: dict[str, str | Path],
    text_columns: list[str] | None = None,
    label_column: str = "label",
    regression: bool | None = None,
) -> tuple[datasets.DatasetDict, Labels, list[str]]:
    """Read `train`, `validation` and (optionally) `test` files; returns the examples, the labels inferred from the
    training file and the text columns used. The test file may lack the label column (then only predictions are
    written); the other files must have it."""
    if text_columns is not None and not 1 <= len(text_columns) <= 2:
        raise DataError(f"--text_column_names takes one or two columns, got {text_columns}")
    tables = {name: load_table(Path(path)) for name, path in files.items() if path is not None}
    checked = {
        name: column_problems(Path(files[name]), table, text_columns, label_column, needs_label=name != "test")
        for name, table in tables.items()
    }
    problems = [problem for _, problem in checked.values() if problem]
    chosen = checked["train"][0]
    problems += [
        f"{files[name]}: text columns {columns} differ from the training file's {chosen}"
        for name, (columns, problem) in checked.items()
        if problem is None and checked["train"][1] is None and columns != chosen
    ]
    if problems:
        raise DataError("; ".join(problems))
    splits = {
        name: read_split(Path(files[name]), table, checked[name][0], label_column) for name, table in tables.items()
    }
    labels = infer_labels(splits["train"], regression)
    examples = datasets.DatasetDict({name: to_examples(split, labels) for name, split in splits.items()})
    return examples, labels, chosen
