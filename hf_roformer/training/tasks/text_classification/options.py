"""`hf-roformer finetune text-classification`: the task's declaration to the command line (no torch imported)."""

from ...run.command_options import Option, TaskDeclaration
from ..shared_options import CLASSIFICATION_DEFAULTS, split_files


def load(args, limits):
    """The files and their columns; their data read when the run asks."""
    from .task import TextFiles, text_classification_task_data

    columns = tuple(name.strip() for name in args.text_column_names.split(",")) if args.text_column_names else None
    files = TextFiles(
        args.train_file, args.validation_file, args.test_file, columns, args.label_column_name, args.do_regression
    )
    return (lambda: text_classification_task_data(files, limits)), files.paths()


TASK = TaskDeclaration(
    name="text-classification",
    summary="fine-tune on your own labelled texts: CSV, TSV, JSON or JSON-lines files",
    details="One text column or two (pairs), classes or scores (regression); the training file defines the labels.",
    usage="--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR [options]",
    defaults=CLASSIFICATION_DEFAULTS,
    options=(
        *split_files(
            "training examples (.csv, .tsv, .json or .jsonl); it defines the labels",
            "evaluation examples, with labels",
            "examples to predict (labels optional)",
        ),
        Option("text_column_names", "one or two text columns (default: sentence1,sentence2 / sentence / text)",
               metavar="A[,B]"),  # fmt: skip
        Option("label_column_name", "the label column (default: label)", default="label"),
        Option(
            "do_regression",
            "true: predict a score; false: the labels are classes (default: strings and integers are classes, "
            "numbers with a fractional part a score; floats that are all whole, such as 0.0/1.0, must be told)",
            flag=True,
        ),
    ),
    loader=f"{__name__}:load",
)
