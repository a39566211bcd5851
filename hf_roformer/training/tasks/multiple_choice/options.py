"""`hf-roformer finetune multiple-choice`: the task's declaration to the command line (no torch imported)."""

from ...run.command_options import TaskDeclaration
from ..shared_options import CLASSIFICATION_DEFAULTS, split_files


def load(args, limits):
    """The files; their questions read when the run asks."""
    from .task import ChoiceFiles, multiple_choice_task_data

    files = ChoiceFiles(args.train_file, args.validation_file, args.test_file)
    return (lambda: multiple_choice_task_data(files, limits)), files.paths()


TASK = TaskDeclaration(
    name="multiple-choice",
    summary="fine-tune multiple choice on C3's JSON or run_swag.py's columns (CSV or JSON lines)",
    details="Each choice is the pair (context, question and choice); questions may have different numbers of "
    "choices; the metric is accuracy.",
    usage="--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR [options]",
    defaults=CLASSIFICATION_DEFAULTS,
    options=split_files(
        "training questions: C3's JSON, or run_swag.py's columns (sent1, sent2, ending0.., label) in .csv or JSON "
        "lines",
        "evaluation questions, with answers",
        "questions to answer (answers optional)",
    ),
    loader=f"{__name__}:load",
)
