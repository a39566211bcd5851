"""The reader of GLUE's data in its published format: TSV files (or a `datasets` copy).

Every reader validates what it reads and raises `DataError` naming the file and line, so a run fails before it writes
anything; the formats are parsed by `file_formats.py` (UTF-8 with or without a byte-order mark, LF, CRLF or CR line
ends, blank lines, every character JSON allows inside strings). A TSV file holds one record a line, so blank lines
between its records are skipped but not silently: `file_formats.blank_lines_inside` finds them for the run
summary. Records become `datasets.Dataset`s with the columns `text_a`, `text_b` (pairs), `label` (absent for test
splits) and `index`.
"""

from dataclasses import dataclass, field
from pathlib import Path

import datasets

from ....utils.errors import DataError
from ...run.file_formats import non_blank_lines, parse_score


@dataclass(frozen=True)
class GlueTask:
    """Where a GLUE task's files are and which columns hold what (the layout of GLUE's own download script)."""

    name: str
    directory: str
    text_columns: tuple[str, ...]
    label_column: str | None
    labels: tuple[str, ...] | None  # None: regression
    metrics: tuple[str, ...]
    splits: dict[str, str] = field(default_factory=dict)  # split name -> file name
    submission: dict[str, str] = field(default_factory=dict)  # test split -> leaderboard file name
    positional_columns: tuple[str, ...] | None = None  # header-less train/dev files (CoLA)
    hub_columns: tuple[str, ...] = ()  # text columns in the `datasets` version ("nyu-mll/glue")
    score_range: tuple[float, float] | None = None  # regression: the scores the task defines

    @property
    def is_regression(self) -> bool:
        """Whether the task predicts a score instead of a class."""
        return self.labels is None


def _splits(*extra: str) -> dict[str, str]:
    return {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv", **dict(e.split("=") for e in extra)}


GLUE_TASKS: dict[str, GlueTask] = {
    "cola": GlueTask(
        "cola",
        "CoLA",
        ("sentence",),
        "label",
        ("0", "1"),
        ("matthews_correlation",),
        _splits(),
        {"test": "CoLA.tsv"},
        positional_columns=("source", "label", "original_label", "sentence"),
        hub_columns=("sentence",),
    ),
    "sst2": GlueTask(
        "sst2",
        "SST-2",
        ("sentence",),
        "label",
        ("0", "1"),
        ("accuracy",),
        _splits(),
        {"test": "SST-2.tsv"},
        hub_columns=("sentence",),
    ),
    "mrpc": GlueTask(
        "mrpc",
        "MRPC",
        ("#1 String", "#2 String"),
        "Quality",
        ("0", "1"),
        ("f1", "accuracy"),
        _splits(),
        {"test": "MRPC.tsv"},
        hub_columns=("sentence1", "sentence2"),
    ),
    "stsb": GlueTask(
        "stsb",
        "STS-B",
        ("sentence1", "sentence2"),
        "score",
        None,
        ("pearson", "spearmanr"),
        _splits(),
        {"test": "STS-B.tsv"},
        score_range=(0.0, 5.0),
        hub_columns=("sentence1", "sentence2"),
    ),
    "qqp": GlueTask(
        "qqp",
        "QQP",
        ("question1", "question2"),
        "is_duplicate",
        ("0", "1"),
        ("f1", "accuracy"),
        _splits(),
        {"test": "QQP.tsv"},
        hub_columns=("question1", "question2"),
    ),
    "mnli": GlueTask(
        "mnli",
        "MNLI",
        ("sentence1", "sentence2"),
        "gold_label",
        ("contradiction", "entailment", "neutral"),
        ("accuracy",),
        {
            "train": "train.tsv",
            "validation_matched": "dev_matched.tsv",
            "validation_mismatched": "dev_mismatched.tsv",
            "test_matched": "test_matched.tsv",
            "test_mismatched": "test_mismatched.tsv",
        },
        {"test_matched": "MNLI-m.tsv", "test_mismatched": "MNLI-mm.tsv"},
        hub_columns=("premise", "hypothesis"),
    ),
    "qnli": GlueTask(
        "qnli",
        "QNLI",
        ("question", "sentence"),
        "label",
        ("entailment", "not_entailment"),
        ("accuracy",),
        _splits(),
        {"test": "QNLI.tsv"},
        hub_columns=("question", "sentence"),
    ),
    "rte": GlueTask(
        "rte",
        "RTE",
        ("sentence1", "sentence2"),
        "label",
        ("entailment", "not_entailment"),
        ("accuracy",),
        _splits(),
        {"test": "RTE.tsv"},
        hub_columns=("sentence1", "sentence2"),
    ),
    "wnli": GlueTask(
        "wnli",
        "WNLI",
        ("sentence1", "sentence2"),
        "label",
        ("0", "1"),
        ("accuracy",),
        _splits(),
        {"test": "WNLI.tsv"},
        hub_columns=("sentence1", "sentence2"),
    ),
}


def evaluation_splits(task: GlueTask) -> list[str]:
    """The labelled splits a task is evaluated on (MNLI: matched and mismatched)."""
    return [split for split in task.splits if split.startswith("validation")]


def test_splits(task: GlueTask) -> list[str]:
    """The unlabelled splits predictions are written for."""
    return [split for split in task.splits if split.startswith("test")]


def _read_tsv_rows(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every non-blank line of a tab-separated file without quoting (GLUE's format); lines
    end at "\n" (CRLF too), as in JSON lines."""
    return [(number, line.split("\t")) for number, line in non_blank_lines(path)]


def glue_split_path(task: GlueTask, data_dir: str | Path, split: str) -> Path:
    """Where a split of a task is in the published layout: `data_dir/<Task>/<file>.tsv`."""
    return Path(data_dir) / task.directory / task.splits[split]


def read_glue_split(task: GlueTask, data_dir: str | Path | None, split: str, path: str | Path | None = None):
    """Read one split of a GLUE task from `data_dir/<Task>/<file>.tsv` (or from `path`), validating every row."""
    path = Path(path) if path is not None else glue_split_path(task, data_dir, split)
    rows = _read_tsv_rows(path)
    labelled = not split.startswith("test")
    if task.positional_columns is not None and labelled:
        header = list(task.positional_columns)
    else:
        if not rows:
            raise DataError(f"{path}: empty file (no header)")
        header, rows = rows[0][1], rows[1:]
    needed = list(task.text_columns) + ([task.label_column] if labelled else [])
    index_column = "id" if task.name == "qqp" else "index"
    if not labelled:
        needed.append(index_column)
    missing = [column for column in needed if column not in header]
    if missing:
        raise DataError(f"{path}:1: missing column(s) {missing}; the header has {header}")
    positions = {column: header.index(column) for column in needed}
    records: dict[str, list] = {"text_a": [], "index": []}
    if len(task.text_columns) == 2:
        records["text_b"] = []
    if labelled:
        records["label"] = []
    for number, row in rows:
        if len(row) != len(header):
            raise DataError(f"{path}:{number}: expected {len(header)} tab-separated fields, found {len(row)}")
        records["text_a"].append(row[positions[task.text_columns[0]]])
        if len(task.text_columns) == 2:
            records["text_b"].append(row[positions[task.text_columns[1]]])
        records["index"].append(row[positions[index_column]] if not labelled else str(len(records["index"])))
        if labelled:
            records["label"].append(_parse_label(task, row[positions[task.label_column]], f"{path}:{number}"))
    if not records["text_a"]:
        raise DataError(f"{path}: the split {split!r} has no examples")
    return datasets.Dataset.from_dict(records)


def _parse_label(task: GlueTask, raw: str, where: str) -> int | float:
    if task.is_regression:
        return parse_score(raw, where, task.score_range)
    if raw not in task.labels:
        raise DataError(f"{where}: unknown label {raw!r}; expected one of {list(task.labels)}")
    return task.labels.index(raw)


def read_glue(
    task: GlueTask, data_dir: str | Path | None = None, files: dict[str, str | Path] | None = None
) -> datasets.DatasetDict:
    """The splits of a task from the published TSV layout under `data_dir`, or from explicit `files` (split -> path).
    Training and validation splits are required; test splits are read when their file exists (the public GLUE download
    has them, a hand-made directory may not)."""
    splits = {}
    for split in task.splits:
        if files is not None:
            if files.get(split) is None:
                if split.startswith("test"):
                    continue
                raise DataError(f"no file for the {split!r} split of {task.directory}")
            path = Path(files[split])
        else:
            path = glue_split_path(task, data_dir, split)
        if split.startswith("test") and not path.exists():
            continue
        splits[split] = read_glue_split(task, None, split, path=path)
    return datasets.DatasetDict(splits)


def from_hub_glue(task: GlueTask, loaded: datasets.DatasetDict) -> datasets.DatasetDict:
    """Map the `datasets` GLUE schema (`nyu-mll/glue` or a `save_to_disk` copy) onto ours, labels by name."""
    converted = {}
    for split in task.splits:
        if split not in loaded:
            if split.startswith("test"):
                continue
            raise DataError(f"the dataset has no split {split!r}; it has {list(loaded)}")
        dataset = loaded[split]
        missing = [column for column in (*task.hub_columns, "idx") if column not in dataset.column_names]
        if missing:
            raise DataError(f"split {split!r}: missing column(s) {missing}; it has {dataset.column_names}")
        records = {"text_a": dataset[task.hub_columns[0]], "index": [str(i) for i in dataset["idx"]]}
        if len(task.hub_columns) == 2:
            records["text_b"] = dataset[task.hub_columns[1]]
        if not split.startswith("test"):
            labels = dataset["label"]
            if task.is_regression:
                labels = [
                    parse_score(repr(label), f"split {split!r}, row {row}", task.score_range)
                    for row, label in enumerate(labels)
                ]
            else:
                names = dataset.features["label"].names if hasattr(dataset.features["label"], "names") else None
                if names is not None:
                    labels = [task.labels.index(names[label]) for label in labels]
            records["label"] = labels
        converted[split] = datasets.Dataset.from_dict(records)
    return datasets.DatasetDict(converted)


