"""GLUE from its published TSV files (or a `datasets` copy): the nine tasks' labels and metrics, and test predictions
in the leaderboard's format."""

from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np

from ....utils.errors import UsageError, unknown_name
from ...run.file_formats import describe_blank_lines
from ...run.fine_tuning_task import SampleLimits, Task, limited
from ..classification_metrics import glue_metrics
from ..sequence_classification import SentenceInputs, classification_head, predicted
from .files import (
    GLUE_TASKS,
    GlueTask,
    evaluation_splits,
    from_hub_glue,
    glue_split_path,
    read_glue,
    test_splits,
)


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


def glue_task_data(task: GlueTask, source: GlueSource, limits: SampleLimits) -> Task:
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
    return Task(
        description=f"GLUE {task.directory}",
        raw=raw,
        head=classification_head(task.labels),
        inputs=SentenceInputs(),
        evaluation=[(split, "eval" + split.removeprefix("validation") * (i > 0)) for i, split in enumerate(validation)],
        metrics_for=metrics_for,
        card=dict(
            dataset=f"GLUE {task.directory}",
            dataset_tags="nyu-mll/glue",
            dataset_args=task.name,
            hub_dataset=True,
            language="en",
        ),
        tests=[split for split in tests if split in raw],
        write_predictions=write_predictions,
        sources=source.paths(),
        notes=describe_blank_lines(source.tsv_files(task)),
    )


def from_command_line(args, limits: SampleLimits):
    """The GLUE task `hf-roformer finetune glue` names and where its data are (checked now), as `(load_task, inputs)`:
    its data are read when the run asks."""
    task = glue_task(args.task_name)
    source = GlueSource(
        args.data_dir, args.train_file, args.validation_file, args.test_file, args.dataset_name,
        args.dataset_config_name, args.dataset_dir,
    )  # fmt: skip
    source.check(task)
    return (lambda: glue_task_data(task, source, limits)), source.paths()


__all__ = ["GlueSource", "from_command_line", "glue_task", "glue_task_data", "write_glue_submission"]
