"""One's own labelled texts (CSV, TSV, JSON or JSON-lines files): single texts or pairs, classes or scores, as
transformers' `run_glue.py` reads them; predictions to `test_predictions.tsv`."""

from dataclasses import dataclass
from pathlib import Path

from ...run.file_formats import describe_blank_lines
from ...run.fine_tuning_task import SampleLimits, Task, limited
from ..classification_metrics import glue_metrics
from ..sequence_classification import SentenceInputs, classification_head, predicted
from .files import Labels, read_text_classification, regression_note


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


def text_classification_task_data(files: TextFiles, limits: SampleLimits) -> Task:
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
    label_note = regression_note(train_file, labels, files.do_regression)
    return Task(
        description=f"{train_file.name} ({' + '.join(chosen)} -> {files.label_column_name})",
        raw=raw,
        head=classification_head(labels.names),
        inputs=SentenceInputs(),
        evaluation=[("validation", "eval")],
        metrics_for=metrics_for,
        card=dict(dataset=train_file.name, dataset_tags="json" if train_file.suffix in (".json", ".jsonl") else "csv"),
        tests=["test"] if "test" in raw else [],
        write_predictions=write_predictions,
        sources=files.paths(),
        notes=describe_blank_lines(paths.values()) + ([label_note] if label_note else []),
    )


def from_command_line(args, limits: SampleLimits):
    """The files `hf-roformer finetune text-classification` names and their columns, as `(load_task, inputs)`: their
    data are read when the run asks."""
    columns = tuple(name.strip() for name in args.text_column_names.split(",")) if args.text_column_names else None
    files = TextFiles(
        args.train_file, args.validation_file, args.test_file, columns, args.label_column_name, args.do_regression
    )
    return (lambda: text_classification_task_data(files, limits)), files.paths()


__all__ = ["TextFiles", "classification_metric_names", "from_command_line", "text_classification_task_data"]
