"""The fine-tuning tasks: GLUE, one's own text files and CAIL2019-SCM, each read and validated into a `TaskData` that
says what to train on, how to score it and how to write predictions; `finetune.fine_tune` runs any of them.

Every builder reads its files completely and raises `DataError` naming the file and line before anything is written.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np

from ..utils.errors import UsageError, unknown_name
from .data import (
    GLUE_TASKS,
    GlueTask,
    cail_pairs,
    describe_blank_lines,
    evaluation_splits,
    from_hub_glue,
    glue_split_path,
    read_cail_split,
    read_glue,
    test_splits,
)
from .metrics import glue_metrics, triplet_accuracy
from .text_files import Labels, read_text_classification


@dataclass
class TaskData:
    """A task read and validated: its examples and how to score and write them."""

    description: str  # for messages and cards, e.g. "GLUE MRPC"
    raw: datasets.DatasetDict  # train, evaluation and test splits: text_a, text_b?, label?, index?
    model_kwargs: dict  # num_labels, id2label, problem_type, ...
    evaluation: list[tuple[str, str]]  # (split, metric prefix), the first is the one evaluated during training
    tests: list[str]  # splits to predict
    metrics_for: Callable[[str], Callable]  # split -> compute_metrics
    write_predictions: Callable[[str, np.ndarray, Path], list[str]]  # split, outputs, directory -> files written
    card: dict  # dataset, dataset_tags, dataset_args, hub_dataset, language
    label_names: tuple[str, ...] | None = None  # class names; None for a regression
    sources: dict[str, object] = field(default_factory=dict)  # description -> path the data were read from
    notes: list[str] = field(default_factory=list)  # what the run summary says about the data as read


@dataclass(frozen=True)
class SampleLimits:
    """Use only the first examples of each split (quick runs), as `run_glue.py`'s `--max_*_samples` do."""

    train: int | None = None
    evaluation: int | None = None
    prediction: int | None = None


def first(dataset: datasets.Dataset, count: int | None) -> datasets.Dataset:
    """The first `count` examples (all when `count` is None)."""
    return dataset if count is None else dataset.select(range(min(count, len(dataset))))


def limited(raw: datasets.DatasetDict, tests: list[str], limits: SampleLimits) -> datasets.DatasetDict:
    """`raw` with each split cut to its limit: training, test splits (`tests`) and the evaluation splits (the rest)."""
    counts = {split: limits.prediction if split in tests else limits.evaluation for split in raw}
    counts["train"] = limits.train
    return datasets.DatasetDict({split: first(data, counts[split]) for split, data in raw.items()})


def label_kwargs(names: tuple[str, ...] | None) -> dict:
    """Configuration of the classification head: regression, or the labels by name."""
    if names is None:
        return {"num_labels": 1, "problem_type": "regression"}
    return {
        "num_labels": len(names),
        "id2label": dict(enumerate(names)),
        "label2id": {label: i for i, label in enumerate(names)},
    }


def predicted(logits: np.ndarray, regression: bool) -> np.ndarray:
    """Scores (regression) or class ids from the model's outputs."""
    return logits.squeeze(-1) if regression else logits.argmax(-1)


def glue_task(name: str) -> GlueTask:
    """The GLUE task called `name`; an unknown name is refused with the list (and a close match)."""
    if name not in GLUE_TASKS:
        raise UsageError(unknown_name("--task_name", name, list(GLUE_TASKS)))
    return GLUE_TASKS[name]


@dataclass(frozen=True)
class GlueSource:
    """Where a GLUE task's data are: exactly one of a directory in the published layout, the task's TSV files, a
    `datasets` name (with its configuration) or a `save_to_disk` directory."""

    data_dir: str | None = None
    train_file: str | None = None
    validation_file: str | None = None
    test_file: str | None = None
    dataset_name: str | None = None
    dataset_config_name: str | None = None
    dataset_dir: str | None = None

    def check(self, task: GlueTask) -> None:
        """Refuse no source or several, and explicit files for a task with several evaluation files."""
        files = (self.train_file, self.validation_file, self.test_file)
        given_files = any(path is not None for path in files)
        sources = [self.data_dir, self.dataset_name, self.dataset_dir, given_files or None]
        if sum(source is not None for source in sources) != 1:
            raise UsageError(
                "give exactly one data source: --data_dir, --train_file/--validation_file, --dataset_name or "
                "--dataset_dir"
            )
        if given_files and len(evaluation_splits(task)) != 1:
            raise UsageError(f"{task.directory} has several dev/test files: use --data_dir")
        if given_files and (self.train_file is None or self.validation_file is None):
            raise UsageError("--train_file and --validation_file go together (--test_file is optional)")

    def paths(self) -> dict[str, object]:
        """The local paths this source reads (for the output directory's checks)."""
        return {
            "data directory": self.data_dir,
            "training file": self.train_file,
            "validation file": self.validation_file,
            "test file": self.test_file,
            "dataset directory": self.dataset_dir,
        }

    def tsv_files(self, task: GlueTask) -> list[Path]:
        """The TSV files this source reads for `task` (none for a `datasets` copy)."""
        if self.data_dir is not None:
            return [glue_split_path(task, self.data_dir, split) for split in task.splits]
        return [Path(path) for path in (self.train_file, self.validation_file, self.test_file) if path is not None]

    def load(self, task: GlueTask) -> datasets.DatasetDict:
        """The task's splits, read and validated."""
        if self.train_file is not None:
            files = {"train": self.train_file, "validation": self.validation_file, "test": self.test_file}
            return read_glue(task, files=files)
        if self.data_dir is not None:
            return read_glue(task, self.data_dir)
        if self.dataset_dir is not None:
            return from_hub_glue(task, datasets.load_from_disk(self.dataset_dir))
        return from_hub_glue(task, datasets.load_dataset(self.dataset_name, self.dataset_config_name or task.name))


def write_glue_submission(task: GlueTask, indices: list[str], predictions: np.ndarray, path: Path) -> None:
    """Test predictions in the GLUE leaderboard format: `index<TAB>prediction`, label names for classification."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("index\tprediction\n")
        for index, prediction in zip(indices, predictions, strict=True):
            if task.is_regression:
                value = f"{float(np.clip(prediction, 0.0, 5.0)):.3f}"
            else:
                value = task.labels[int(prediction)]
            handle.write(f"{index}\t{value}\n")


def glue_task_data(task: GlueTask, source: GlueSource, limits: SampleLimits) -> TaskData:
    """GLUE task `task` from `source` (splits cut to `limits`): leaderboard files for the test splits, GLUE's
    metrics."""
    tests = test_splits(task)
    raw = limited(source.load(task), tests, limits)

    def metrics_for(split):
        def compute(prediction):
            scores = predicted(prediction.predictions, task.is_regression)
            return glue_metrics(task.metrics, scores, prediction.label_ids)

        return compute

    def write_predictions(split, logits, output_dir):
        indices = raw[split]["index"]
        name = task.submission[split]
        write_glue_submission(task, indices, predicted(logits, task.is_regression), output_dir / name)
        return [name]

    validation = evaluation_splits(task)
    return TaskData(
        description=f"GLUE {task.directory}",
        raw=raw,
        model_kwargs=label_kwargs(task.labels),
        evaluation=[(split, "eval" + split.removeprefix("validation") * (i > 0)) for i, split in enumerate(validation)],
        tests=[split for split in tests if split in raw],
        metrics_for=metrics_for,
        write_predictions=write_predictions,
        card=dict(
            dataset=f"GLUE {task.directory}",
            dataset_tags="nyu-mll/glue",
            dataset_args=task.name,
            hub_dataset=True,
            language="en",
        ),
        label_names=task.labels,
        sources=source.paths(),
        notes=describe_blank_lines(source.tsv_files(task)),
    )


def classification_metric_names(labels: Labels) -> tuple[str, ...]:
    """Accuracy and F1 (of label id 1 for two classes, macro-averaged for more); Pearson, Spearman and MSE for
    regression."""
    if labels.is_regression:
        return ("pearson", "spearmanr", "mse")
    return ("accuracy", "f1") if len(labels.names) == 2 else ("accuracy", "macro_f1")


@dataclass(frozen=True)
class TextFiles:
    """One's own labelled texts: CSV, TSV, JSON or JSON-lines files, the text and label columns to read."""

    train_file: str
    validation_file: str
    test_file: str | None = None
    text_column_names: tuple[str, ...] | None = None
    label_column_name: str = "label"
    do_regression: bool | None = None

    def paths(self) -> dict[str, object]:
        """The local paths these files are (for the output directory's checks)."""
        return {"training file": self.train_file, "validation file": self.validation_file, "test file": self.test_file}


def text_classification_task_data(files: TextFiles, limits: SampleLimits) -> TaskData:
    """Single texts or pairs, classes or scores, from one's own files (splits cut to `limits`); predictions to
    `test_predictions.tsv`."""
    paths = {"train": files.train_file, "validation": files.validation_file, "test": files.test_file}
    columns = list(files.text_column_names) if files.text_column_names else None
    raw, labels, chosen = read_text_classification(paths, columns, files.label_column_name, files.do_regression)
    raw = limited(raw, ["test"], limits)
    names = classification_metric_names(labels)

    def metrics_for(split):
        def compute(prediction):
            return glue_metrics(names, predicted(prediction.predictions, labels.is_regression), prediction.label_ids)

        return compute

    def write_predictions(split, logits, output_dir):
        with open(output_dir / "test_predictions.tsv", "w", encoding="utf-8") as handle:
            handle.write("index\tprediction\n")
            for index, value in enumerate(predicted(logits, labels.is_regression)):
                written = f"{float(value):.4f}" if labels.is_regression else labels.names[int(value)]
                handle.write(f"{index}\t{written}\n")
        return ["test_predictions.tsv"]

    train_file = Path(files.train_file)
    return TaskData(
        description=f"{train_file.name} ({' + '.join(chosen)} -> {files.label_column_name})",
        raw=raw,
        model_kwargs=label_kwargs(labels.names),
        evaluation=[("validation", "eval")],
        tests=["test"] if "test" in raw else [],
        metrics_for=metrics_for,
        write_predictions=write_predictions,
        card=dict(dataset=train_file.name, dataset_tags="json" if train_file.suffix in (".json", ".jsonl") else "csv"),
        label_names=labels.names,
        sources=files.paths(),
        notes=describe_blank_lines(paths.values()),
    )


def cail_task_data(data_dir: str, limits: SampleLimits) -> TaskData:
    """CAIL2019-SCM from `data_dir` (train.json, valid.json, optional test.json): each triplet becomes two pairs, the
    metric is the triplet accuracy; the sample limits count whole triplets."""
    directory = Path(data_dir)
    triplets = {split: read_cail_split(directory / f"{split}.json") for split in ("train", "valid")}
    if (directory / "test.json").exists():
        triplets["test"] = read_cail_split(directory / "test.json")
    counts = {"train": limits.train, "valid": limits.evaluation, "test": limits.prediction}
    triplets = {split: records[: counts[split]] for split, records in triplets.items()}
    raw = datasets.DatasetDict({split: cail_pairs(records) for split, records in triplets.items()})

    def metrics_for(split):
        labels = [record["label"] for record in triplets[split]]
        return lambda prediction: {"triplet_accuracy": triplet_accuracy(prediction.predictions, labels)}

    def write_predictions(split, scores, output_dir):
        with open(output_dir / "test_predictions.json", "w", encoding="utf-8") as handle:
            for score_b, score_c in np.asarray(scores).reshape(-1, 2):
                handle.write(json.dumps({"label": "B" if score_b > score_c else "C"}) + "\n")
        return ["test_predictions.json"]

    return TaskData(
        description="CAIL2019-SCM",
        raw=raw,
        model_kwargs=dict(num_labels=1, problem_type="multi_label_classification", classifier_pooling="mean"),
        evaluation=[("valid", "eval")],
        tests=["test"] if "test" in raw else [],
        metrics_for=metrics_for,
        write_predictions=write_predictions,
        card=dict(dataset="CAIL2019-SCM", dataset_tags="cail2019-scm", language="zh"),
        label_names=("more similar",),
        sources={"data directory": data_dir},
    )


__all__ = [
    "GlueSource",
    "SampleLimits",
    "TaskData",
    "TextFiles",
    "cail_task_data",
    "glue_task",
    "glue_task_data",
    "text_classification_task_data",
]
