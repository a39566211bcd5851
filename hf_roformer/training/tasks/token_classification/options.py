"""`hf-roformer finetune token-classification`: the task's declaration to the command line (no torch imported)."""

from ...run.command_options import Option, SmokeSize, TaskDeclaration
from ..shared_options import split_files


# Named entities: 5 epochs at 1e-3 (10% warm-up), batches of 8 windows of up to 128 tokens, scored once at the end:
# on 3,000 People's Daily paragraphs from the shipped checkpoint, held-out entity F1 above 0.80 within 10 minutes of
# 2 CPU cores (docs/ner.md, benchmarks/bench_ner.py). Chosen on held-out F1 (validation / test): 2 epochs at 3e-4
# gave 0.77 / 0.74; 4 epochs at 3e-4 0.82 / 0.80, at 1e-3 0.83 / 0.80 (batch 16) and 0.83 / 0.81 (batch 8); windows
# of 512 tokens 0.75 / 0.73 where 128 gave 0.78 / 0.74 (2 epochs at 1e-3); on 2 threads, 4 epochs at batch 8 gave
# 0.82 / 0.79 in 374 s, so a fifth epoch fits.
NER_DEFAULTS = dict(
    num_train_epochs=5.0,
    learning_rate=1e-3,
    warmup_steps=0.1,  # a fraction of the training steps
    per_device_train_batch_size=8,
    max_seq_length=128,
    train_sampling_strategy="group_by_length",  # windows of similar length together: little padding
    eval_strategy="no",  # the run ends with one evaluation; one per epoch would cost a pass over validation each
    save_strategy="epoch",
    report_to="none",
)
# In a smoke run (the documentation's tests): paragraphs trained on for one epoch, and paragraphs evaluated and
# predicted. 800 is the fewest of People's Daily's that take the shipped checkpoint past tagging everything `O`
# (entity F1 0.49 on held-out paragraphs after one epoch; 0.00 with 400).
SMOKE_TRAIN_PARAGRAPHS, SMOKE_HELD_OUT_PARAGRAPHS = 800, 100


def load(args, limits):
    """The files, their keys and the head; their paragraphs read when the run asks."""
    from .task import EntityFiles, token_classification_task_data

    entity_files = EntityFiles(
        args.train_file, args.validation_file, args.test_file, args.text_column_name, args.label_column_name,
        bool(args.label_all_tokens), bool(args.return_entity_level_metrics), args.head,
    )  # fmt: skip
    return (lambda: token_classification_task_data(entity_files, limits)), entity_files.paths()


TASK = TaskDeclaration(
    name="token-classification",
    summary="fine-tune a named-entity tagger on your own files: CoNLL columns, run_ner JSON lines or CLUENER JSON",
    details="The format is read from each file's structure; IOB2 or BIOES tags. Paragraphs longer than "
    "--max_seq_length are read in overlapping windows, never cut. A softmax tagger (IOB2), or --head global_pointer "
    "for nested entities; entity-level precision, recall and F1 as seqeval computes them; the test file's "
    "predictions are written in its own format.",
    usage="--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR [options]",
    defaults=NER_DEFAULTS,
    options=(
        *split_files(
            "training sentences (CoNLL columns, JSON lines or CLUENER JSON); it defines the entity types",
            "evaluation sentences, with entities",
            "sentences to predict (entities optional)",
        ),
        Option("text_column_name", "JSON lines: the token list's key (default: tokens)"),
        Option("label_column_name", "JSON lines: the tag list's key (default: ner_tags)"),
        Option("label_all_tokens", "label every word piece of a word, not only its first", flag=True),
        Option("return_entity_level_metrics", "report precision, recall and F1 of each entity type too", flag=True),
        Option("head", "softmax: one IOB2 label per token; global_pointer: scored spans, nested entities (default: "
               "softmax)", choices=("softmax", "global_pointer"), default="softmax"),  # fmt: skip
    ),
    loader=f"{__name__}:load",
    whole_batches=True,  # windows of at most --max_seq_length tokens
    smoke=SmokeSize(SMOKE_TRAIN_PARAGRAPHS, SMOKE_HELD_OUT_PARAGRAPHS, 1.0, "paragraphs"),
)
