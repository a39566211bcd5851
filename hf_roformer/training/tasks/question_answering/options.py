"""`hf-roformer finetune question-answering`: the task's declaration to the command line (no torch imported)."""

from ...run.command_options import Option, TaskDeclaration
from ..shared_options import CLASSIFICATION_DEFAULTS, split_files


# run_qa.py's README recipe (lr 3e-5, batch 12) and its default input length (384 tokens; windows overlap by 128).
QA_DEFAULTS = dict(CLASSIFICATION_DEFAULTS, learning_rate=3e-5, per_device_train_batch_size=12, max_seq_length=384)


def load(args, limits):
    """The files and how answers are found and scored; their questions read when the run asks."""
    from .task import QuestionFiles, question_answering_task_data

    files = QuestionFiles(
        args.train_file, args.validation_file, args.language, args.test_file, args.doc_stride, args.n_best_size,
        args.max_answer_length, bool(args.version_2_with_negative), args.null_score_diff_threshold,
    )  # fmt: skip
    return (lambda: question_answering_task_data(files, limits)), files.paths()


TASK = TaskDeclaration(
    name="question-answering",
    summary="fine-tune extractive question answering on SQuAD-format JSON (CMRC2018, DRCD, SQuAD) or JSON lines",
    details="A question and its context are one input up to --max_seq_length tokens (raise it to read whole "
    "documents), windows overlapping by --doc_stride tokens beyond it. Answers are scored with CMRC2018's metrics "
    "(--language zh) or SQuAD's (--language en) and written as run_qa.py writes them.",
    usage="--model_name_or_path MODEL --train_file FILE --validation_file FILE --language zh|en --output_dir DIR "
    "[options]",
    defaults=QA_DEFAULTS,
    options=(
        *split_files(
            "training questions: SQuAD-format JSON or JSON lines (id, context, question, answers)",
            "evaluation questions, with answers",
            "questions to answer (answers optional)",
        ),
        Option("language", "the data's language, which picks the metrics: zh (CMRC2018) or en (SQuAD)",
               required=True, choices=("zh", "en")),  # fmt: skip
        Option("doc_stride", "tokens shared by consecutive windows of a long context (default: %(default)s)",
               type="non_negative_int", default=128, metavar="N"),  # fmt: skip
        Option("n_best_size", "candidate starts and ends per window (default: %(default)s)", type="positive_int",
               default=20, metavar="N"),  # fmt: skip
        Option("max_answer_length", "longest answer, in tokens (default: %(default)s)", type="positive_int",
               default=30, metavar="N"),  # fmt: skip
        Option("version_2_with_negative", "some questions have no answer (SQuAD v2.0)", flag=True),
        Option("null_score_diff_threshold", "answer nothing when the null score beats the best span by more "
               "(default: 0.0)", type="float", default=0.0, metavar="X"),  # fmt: skip
    ),
    loader=f"{__name__}:load",
)
