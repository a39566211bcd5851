"""`hf-roformer finetune glue`: the task's declaration to the command line (no torch imported)."""

from ...run.command_options import Option, TaskDeclaration
from ..shared_options import CLASSIFICATION_DEFAULTS


# The GLUE tasks by name (those of `files.GLUE_TASKS`, which needs `datasets`: a test keeps the two equal).
GLUE_TASK_NAMES = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")


def load(args, limits):
    """The GLUE task and where its data are, checked now; its data read when the run asks."""
    from .task import GlueSource, glue_task, glue_task_data

    task = glue_task(args.task_name)
    source = GlueSource(
        args.data_dir, args.train_file, args.validation_file, args.test_file, args.dataset_name,
        args.dataset_config_name, args.dataset_dir,
    )  # fmt: skip
    source.check(task)
    return (lambda: glue_task_data(task, source, limits)), source.paths()


TASK = TaskDeclaration(
    name="glue",
    summary="fine-tune on a GLUE task from its published TSV files (or a `datasets` copy)",
    details="Trains (3 epochs, learning rate 2e-5, batch 32, inputs up to 512 tokens, as in the paper), evaluates on "
    "the dev files after every epoch and at the end, and writes the test predictions in the leaderboard format.",
    usage="--task_name TASK --model_name_or_path MODEL (--data_dir DIR | --train_file FILE --validation_file FILE | "
    "--dataset_dir DIR | --dataset_name NAME) --output_dir DIR [options]",
    defaults=CLASSIFICATION_DEFAULTS,
    options=(
        Option("task_name", f"the GLUE task: {', '.join(GLUE_TASK_NAMES)}", aliases=("--task",), required=True,
               choices=GLUE_TASK_NAMES, metavar="TASK"),  # fmt: skip
        Option("data_dir", "directory in the published GLUE layout (<dir>/MRPC/train.tsv, ...)"),
        Option("train_file", "the task's train.tsv (with --validation_file)"),
        Option("validation_file", "the task's dev.tsv"),
        Option("test_file", "the task's test.tsv (optional)"),
        Option("dataset_name", "a `datasets` name, e.g. nyu-mll/glue (needs the network)"),
        Option("dataset_config_name", "its configuration (default: the task)"),
        Option("dataset_dir", "a `datasets.save_to_disk` directory"),
    ),
    loader=f"{__name__}:load",
)
