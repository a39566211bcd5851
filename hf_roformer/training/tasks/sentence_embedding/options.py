"""`hf-roformer finetune sentence-embedding`: the task's declaration to the command line (no torch imported)."""

from ...run.command_options import Option, TaskDeclaration
from ..shared_options import split_files


# Sentence vectors: one epoch, learning rate 2e-5, batch 32; scored once at the end (Spearman's correlation).
SENTENCE_DEFAULTS = dict(
    num_train_epochs=1.0,
    learning_rate=2e-5,
    per_device_train_batch_size=32,
    eval_strategy="no",
    save_strategy="epoch",
    report_to="none",
)


def load(args, limits):
    """The options of the run (its model, files, loss, pooling, lengths), which reads the pairs itself."""
    from .task import SentenceEmbeddingOptions

    options = SentenceEmbeddingOptions(
        args.model_name_or_path, args.train_file, args.validation_file, args.test_file, args.loss, args.pooling,
        args.max_seq_length, limits.train, limits.evaluation, limits.prediction,
    )  # fmt: skip
    return options, options.paths()


TASK = TaskDeclaration(
    name="sentence-embedding",
    summary="train sentence vectors with sentence-transformers on sentence pairs (LCQMC/AFQMC/STS-B files, or pairs "
    "without labels)",
    details="Labelled or scored pairs train with CoSENT, pairs without labels with in-batch negatives; RoFormer-Sim's "
    "pooler is kept; the validation pairs are scored by Spearman's correlation of cosine similarities. The output "
    "directory loads in SentenceTransformer.",
    usage="--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR [options]",
    defaults=SENTENCE_DEFAULTS,
    options=(
        Option("model_name_or_path", "checkpoint directory (a RoFormer-Sim keeps its pooler), Hub id, or "
               "shipped:roformer-zh-char-small", aliases=("--model",), required=True, metavar="MODEL"),  # fmt: skip
        *split_files(
            "training pairs: TSV (text_a, text_b[, label]; or STS-B's with a header) or JSON lines (not needed to "
            "score a model as it is: --do_eval or --do_predict without --do_train)",
            "held-out pairs with labels or scores",
            "more pairs with scores, scored after training",
            train_required=False,
        ),
        Option("loss", "cosent for labelled pairs, in-batch-negatives for pairs without labels (default: what the "
               "file is)", choices=("cosent", "in-batch-negatives")),  # fmt: skip
        Option("pooling", "pool token states this way (default: the checkpoint's own sentence vector, else mean)",
               choices=("mean", "cls", "max")),  # fmt: skip
        Option("max_seq_length", "truncate sentences to N tokens (default: %(default)s)", aliases=("--max_length",),
               type="positive_int", default=128, metavar="N"),  # fmt: skip
    ),
    loader=f"{__name__}:load",
    examples="pairs",
    runs="sentence_embedding",
)
