"""`hf-roformer finetune glue|text-classification|cail2019-scm|token-classification|question-answering|
multiple-choice|sentence-embedding`: fine-tuning with transformers' Trainer (sentence vectors:
sentence-transformers' trainer).

The options are those of transformers' `run_glue.py` (`--model_name_or_path`, `--task_name`, `--max_seq_length`,
`--train_file`, ...; `--model`, `--task`, `--max_length` are aliases) and every `TrainingArguments` option. Parsing
answers without importing torch; the run itself is `hf_roformer.training.finetune.fine_tune`.
"""

import argparse

from .parsing import HelpFormatter, add_flag, non_negative_int, option, positive_int
from .trainer_options import (
    add_trainer_options,
    check_phases_apply,
    print_all_trainer_options,
    requested_phases,
    run_arguments,
    training_arguments,
)


EXTRA = "training"
GLUE_TASKS = ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
GLUE_DEFAULTS = dict(
    num_train_epochs=3.0,
    learning_rate=2e-5,
    per_device_train_batch_size=32,
    eval_strategy="epoch",
    save_strategy="epoch",
    report_to="none",
)
# The original CAIL2019-SCM recipe: Adam lr 6e-6, batch 8 pairs, 20 epochs, the best checkpoint on valid.
CAIL_DEFAULTS = dict(
    num_train_epochs=20.0,
    learning_rate=6e-6,
    weight_decay=0.0,
    per_device_train_batch_size=8,
    eval_strategy="epoch",
    save_strategy="epoch",
    load_best_model_at_end=True,
    metric_for_best_model="triplet_accuracy",
    greater_is_better=True,
    save_total_limit=2,
    report_to="none",
)
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
# run_qa.py's README recipe (lr 3e-5, batch 12) and its default input length (384 tokens; windows overlap by 128).
QA_DEFAULTS = dict(GLUE_DEFAULTS, learning_rate=3e-5, per_device_train_batch_size=12, max_seq_length=384)
# Sentence vectors: one epoch, learning rate 2e-5, batch 32; scored once at the end (Spearman's correlation).
SENTENCE_DEFAULTS = dict(
    num_train_epochs=1.0,
    learning_rate=2e-5,
    per_device_train_batch_size=32,
    eval_strategy="no",
    save_strategy="epoch",
    report_to="none",
)
USAGE = {
    "glue": "--task_name TASK --model_name_or_path MODEL (--data_dir DIR | --train_file FILE --validation_file FILE | "
    "--dataset_dir DIR | --dataset_name NAME) --output_dir DIR [options]",
    "text-classification": "--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR "
    "[options]",
    "cail2019-scm": "--model_name_or_path MODEL --data_dir DIR --output_dir DIR [options]",
    "token-classification": "--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR "
    "[options]",
    "question-answering": "--model_name_or_path MODEL --train_file FILE --validation_file FILE --language zh|en "
    "--output_dir DIR [options]",
    "multiple-choice": "--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR [options]",
    "sentence-embedding": "--model_name_or_path MODEL --train_file FILE --validation_file FILE --output_dir DIR "
    "[options]",
}
TASKS = {
    "glue": (
        "fine-tune on a GLUE task from its published TSV files (or a `datasets` copy)",
        "Trains (3 epochs, learning rate 2e-5, batch 32, inputs up to 512 tokens, as in the paper), evaluates on the "
        "dev files after every epoch and at the end, and writes the test predictions in the leaderboard format.",
        GLUE_DEFAULTS,
    ),
    "text-classification": (
        "fine-tune on your own labelled texts: CSV, TSV, JSON or JSON-lines files",
        "One text column or two (pairs), classes or scores (regression); the training file defines the labels.",
        GLUE_DEFAULTS,
    ),
    "cail2019-scm": (
        "fine-tune on CAIL2019-SCM (similar-case matching of long legal documents), the original recipe",
        "Each triplet (A, B, C) becomes the pairs (A, B) and (A, C); masked mean pooling, a sigmoid, learning rate "
        "6e-6, batch 8, 20 epochs, the best checkpoint on valid; the metric is the triplet accuracy.",
        CAIL_DEFAULTS,
    ),
    "token-classification": (
        "fine-tune a named-entity tagger on your own files: CoNLL columns, run_ner JSON lines or CLUENER JSON",
        "The format is read from each file's structure; IOB2 or BIOES tags. Paragraphs longer than --max_seq_length "
        "are read in overlapping windows, never cut. A softmax tagger (IOB2), or --head global_pointer for nested "
        "entities; entity-level precision, recall and F1 as seqeval computes them; the test file's predictions are "
        "written in its own format.",
        NER_DEFAULTS,
    ),
    "question-answering": (
        "fine-tune extractive question answering on SQuAD-format JSON (CMRC2018, DRCD, SQuAD) or JSON lines",
        "A question and its context are one input up to --max_seq_length tokens (raise it to read whole documents), "
        "windows overlapping by --doc_stride tokens beyond it. Answers are scored with CMRC2018's metrics "
        "(--language zh) or SQuAD's (--language en) and written as run_qa.py writes them.",
        QA_DEFAULTS,
    ),
    "multiple-choice": (
        "fine-tune multiple choice on C3's JSON or run_swag.py's columns (CSV or JSON lines)",
        "Each choice is the pair (context, question and choice); questions may have different numbers of choices; "
        "the metric is accuracy.",
        GLUE_DEFAULTS,
    ),
    "sentence-embedding": (
        "train sentence vectors with sentence-transformers on sentence pairs (LCQMC/AFQMC/STS-B files, or pairs "
        "without labels)",
        "Labelled or scored pairs train with CoSENT, pairs without labels with in-batch negatives; RoFormer-Sim's "
        "pooler is kept; the validation pairs are scored by Spearman's correlation of cosine similarities. The "
        "output directory loads in SentenceTransformer.",
        SENTENCE_DEFAULTS,
    ),
}
EPILOG = (
    "Every phase runs unless --do_train/--do_eval/--do_predict name some. Running the same command again resumes an "
    "interrupted run from its last complete checkpoint; a finished one is not redone.\n"
    "Needs the `training` extra: pip install \"hf_roformer[training]\"."
)


def add_model_options(parser: argparse.ArgumentParser, defaults: dict) -> None:
    """The `run_glue.py` model options: which checkpoint, how inputs are encoded, how it is loaded."""
    group = parser.add_argument_group("model")
    group.add_argument(
        *option("model_name_or_path"), "--model", required=True, metavar="MODEL",
        help="checkpoint directory, Hub id, or shipped:roformer-zh-char-small (the checkpoint in the package)",
    )  # fmt: skip
    group.add_argument(
        *option("tokenizer_name"), "--tokenizer", help="tokenizer directory or Hub id (default: the model's)"
    )
    group.add_argument(
        *option("max_seq_length"), "--max_length", "--max-length", type=positive_int,
        default=defaults.get("max_seq_length", 512), metavar="N",
        help="truncate inputs to N tokens, special tokens included (default: %(default)s)",
    )  # fmt: skip
    add_flag(group, "pad_to_max_length", "pad every input to --max_seq_length (default: each batch to its longest)")
    group.add_argument(
        *option("model_max_length"), type=positive_int, metavar="N",
        help="`model_max_length` of the saved tokenizer (default: the model's max_position_embeddings)",
    )  # fmt: skip
    group.add_argument(
        *option("rope_parameters"), metavar="JSON",
        help='rope scaling for inputs past the trained length, e.g. \'{"rope_type": "ntk", "factor": 2.0}\'',
    )  # fmt: skip
    group.add_argument(*option("cache_dir"), help="where Hub downloads are cached")
    group.add_argument(*option("model_revision"), default="main", help="Hub revision of the model (default: main)")
    group.add_argument("--token", help="Hub token for private models")
    add_flag(group, "trust_remote_code", "allow a model's own code from the Hub")
    add_flag(group, "ignore_mismatched_sizes", "load a checkpoint whose classifier has another number of labels")


def add_batching_options(parser: argparse.ArgumentParser) -> None:
    """How batches of mixed lengths are laid out."""
    group = parser.add_argument_group(
        "batching", "Batches cost their real tokens: a training batch above the budget runs as passes of rows of "
        "similar length (the same gradients), evaluation runs longest first (the same results)."
    )
    group.add_argument(
        *option("token_budget"), type=non_negative_int, metavar="TOKENS",
        help="most padded tokens in one training pass; 0: whole batches (default: 4096)",
    )  # fmt: skip
    add_flag(group, "sort_evaluation", "evaluate and predict in length order (default: true)")


def add_sample_options(parser: argparse.ArgumentParser, what: str = "examples") -> None:
    """`--max_train_samples`, `--max_eval_samples`, `--max_predict_samples` (quick runs)."""
    group = parser.add_argument_group("quick runs")
    for name, split in (("train", "training"), ("eval", "evaluation"), ("predict", "test")):
        group.add_argument(
            *option(f"max_{name}_samples"), type=positive_int, metavar="N", help=f"use the first N {split} {what} only"
        )


def add_parser(commands) -> None:
    """`finetune` and its three tasks."""
    finetune = commands.add_parser(
        "finetune",
        help="fine-tune with the Trainer: glue, text-classification (your CSV/JSON files), cail2019-scm, "
        "token-classification (named entities), question-answering, multiple-choice or sentence-embedding",
        description="Fine-tune a RoFormer with transformers' Trainer. "
        "`hf-roformer finetune TASK --help` lists every option of TASK.",
        formatter_class=HelpFormatter,
    )
    tasks = finetune.add_subparsers(dest="task", required=True, metavar="TASK")
    for name, (summary, details, defaults) in TASKS.items():
        parser = tasks.add_parser(
            name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.\n\n{details}", epilog=EPILOG,
            formatter_class=HelpFormatter, usage=f"hf-roformer finetune {name} {USAGE[name]}",
        )  # fmt: skip
        add_data_options(parser, name)
        if name == "sentence-embedding":
            add_sample_options(parser, "pairs")
            add_trainer_options(parser, defaults)
            parser.set_defaults(_run=run_sentence_embedding, _defaults=defaults)
            continue
        add_model_options(parser, defaults)  # --max_seq_length: the task's own default, else 512
        add_batching_options(parser)
        add_sample_options(parser, "triplets" if name == "cail2019-scm" else "examples")
        add_trainer_options(parser, defaults)
        parser.set_defaults(_run=run, _defaults=defaults)


def add_data_options(parser: argparse.ArgumentParser, task: str) -> None:
    """Where the task's data are."""
    group = parser.add_argument_group("data")
    if task == "glue":
        group.add_argument(*option("task_name"), "--task", required=True, choices=GLUE_TASKS, metavar="TASK",
                           help=f"the GLUE task: {', '.join(GLUE_TASKS)}")  # fmt: skip
        group.add_argument(
            *option("data_dir"), help="directory in the published GLUE layout (<dir>/MRPC/train.tsv, ...)"
        )
        group.add_argument(*option("train_file"), help="the task's train.tsv (with --validation_file)")
        group.add_argument(*option("validation_file"), help="the task's dev.tsv")
        group.add_argument(*option("test_file"), help="the task's test.tsv (optional)")
        group.add_argument(*option("dataset_name"), help="a `datasets` name, e.g. nyu-mll/glue (needs the network)")
        group.add_argument(*option("dataset_config_name"), help="its configuration (default: the task)")
        group.add_argument(*option("dataset_dir"), help="a `datasets.save_to_disk` directory")
    elif task == "text-classification":
        add_split_files(
            group,
            "training examples (.csv, .tsv, .json or .jsonl); it defines the labels",
            "evaluation examples, with labels",
            "examples to predict (labels optional)",
        )
        group.add_argument(*option("text_column_names"), metavar="A[,B]",
                           help="one or two text columns (default: sentence1,sentence2 / sentence / text)")  # fmt: skip
        group.add_argument(*option("label_column_name"), default="label", help="the label column (default: label)")
        add_flag(
            group,
            "do_regression",
            "true: predict a score; false: the labels are classes (default: strings and integers are classes, "
            "numbers with a fractional part a score; floats that are all whole, such as 0.0/1.0, must be told)",
        )
    elif task == "token-classification":
        add_split_files(
            group,
            "training sentences (CoNLL columns, JSON lines or CLUENER JSON); it defines the entity types",
            "evaluation sentences, with entities",
            "sentences to predict (entities optional)",
        )
        group.add_argument(*option("text_column_name"), help="JSON lines: the token list's key (default: tokens)")
        group.add_argument(*option("label_column_name"), help="JSON lines: the tag list's key (default: ner_tags)")
        add_flag(group, "label_all_tokens", "label every word piece of a word, not only its first")
        add_flag(group, "return_entity_level_metrics", "report precision, recall and F1 of each entity type too")
        group.add_argument("--head", choices=("softmax", "global_pointer"), default="softmax",
                           help="softmax: one IOB2 label per token; global_pointer: scored spans, nested entities "
                           "(default: softmax)")  # fmt: skip
    elif task == "question-answering":
        add_split_files(
            group,
            "training questions: SQuAD-format JSON or JSON lines (id, context, question, answers)",
            "evaluation questions, with answers",
            "questions to answer (answers optional)",
        )
        group.add_argument(
            *option("language"), required=True, choices=("zh", "en"),
            help="the data's language, which picks the metrics: zh (CMRC2018) or en (SQuAD)",
        )  # fmt: skip
        group.add_argument(
            *option("doc_stride"), type=non_negative_int, default=128, metavar="N",
            help="tokens shared by consecutive windows of a long context (default: %(default)s)",
        )  # fmt: skip
        group.add_argument(
            *option("n_best_size"), type=positive_int, default=20, metavar="N",
            help="candidate starts and ends per window (default: %(default)s)",
        )  # fmt: skip
        group.add_argument(
            *option("max_answer_length"), type=positive_int, default=30, metavar="N",
            help="longest answer, in tokens (default: %(default)s)",
        )  # fmt: skip
        add_flag(group, "version_2_with_negative", "some questions have no answer (SQuAD v2.0)")
        group.add_argument(
            *option("null_score_diff_threshold"), type=float, default=0.0, metavar="X",
            help="answer nothing when the null score beats the best span by more (default: 0.0)",
        )  # fmt: skip
    elif task == "multiple-choice":
        add_split_files(
            group,
            "training questions: C3's JSON, or run_swag.py's columns (sent1, sent2, ending0.., label) in .csv or "
            "JSON lines",
            "evaluation questions, with answers",
            "questions to answer (answers optional)",
        )
    elif task == "sentence-embedding":
        group.add_argument(
            *option("model_name_or_path"), "--model", required=True, metavar="MODEL",
            help="checkpoint directory (a RoFormer-Sim keeps its pooler), Hub id, or shipped:roformer-zh-char-small",
        )  # fmt: skip
        add_split_files(
            group,
            "training pairs: TSV (text_a, text_b[, label]; or STS-B's with a header) or JSON lines (not needed to "
            "score a model as it is: --do_eval or --do_predict without --do_train)",
            "held-out pairs with labels or scores",
            "more pairs with scores, scored after training",
            train_required=False,
        )
        group.add_argument(
            *option("loss"), choices=("cosent", "in-batch-negatives"),
            help="cosent for labelled pairs, in-batch-negatives for pairs without labels (default: what the file is)",
        )  # fmt: skip
        group.add_argument(
            *option("pooling"), choices=("mean", "cls", "max"),
            help="pool token states this way (default: the checkpoint's own sentence vector, else mean)",
        )  # fmt: skip
        group.add_argument(
            *option("max_seq_length"), "--max_length", type=positive_int, default=128, metavar="N",
            help="truncate sentences to N tokens (default: %(default)s)",
        )  # fmt: skip
    else:
        group.add_argument(*option("data_dir"), required=True,
                           help="directory holding train.json, valid.json and (optionally) test.json")  # fmt: skip


def add_split_files(group, train: str, validation: str, test: str, train_required: bool = True) -> None:
    """`--train_file` (required unless `train_required` is false: the task then checks it is given to train) and
    `--validation_file` (required) and `--test_file` (optional), each with what it holds."""
    group.add_argument(*option("train_file"), required=train_required, help=train)
    group.add_argument(*option("validation_file"), required=True, help=validation)
    group.add_argument(*option("test_file"), help=test)


def rope_parameters(text: str | None) -> dict | None:
    """`--rope_parameters` as a dict (None when not given)."""
    import json

    from hf_roformer.utils.errors import UsageError

    if text is None:
        return None
    try:
        parameters = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--rope_parameters is not valid JSON: {error.msg}") from None
    if not isinstance(parameters, dict):
        raise UsageError("--rope_parameters must be a JSON object, e.g. '{\"rope_type\": \"ntk\", \"factor\": 2.0}'")
    return parameters


def task_loader(args: argparse.Namespace):
    """(a function that reads and validates the task's data, the local paths it reads)."""
    from hf_roformer.training import tasks

    limits = tasks.SampleLimits(args.max_train_samples, args.max_eval_samples, args.max_predict_samples)
    if args.task == "glue":
        task = tasks.glue_task(args.task_name)
        source = tasks.GlueSource(
            args.data_dir, args.train_file, args.validation_file, args.test_file, args.dataset_name,
            args.dataset_config_name, args.dataset_dir,
        )  # fmt: skip
        source.check(task)
        return (lambda: tasks.glue_task_data(task, source, limits)), source.paths()
    if args.task == "text-classification":
        columns = tuple(name.strip() for name in args.text_column_names.split(",")) if args.text_column_names else None
        files = tasks.TextFiles(
            args.train_file, args.validation_file, args.test_file, columns, args.label_column_name, args.do_regression
        )
        return (lambda: tasks.text_classification_task_data(files, limits)), files.paths()
    if args.task == "token-classification":
        entity_files = tasks.EntityFiles(
            args.train_file, args.validation_file, args.test_file, args.text_column_name, args.label_column_name,
            bool(args.label_all_tokens), bool(args.return_entity_level_metrics), args.head,
        )  # fmt: skip
        return (lambda: tasks.token_classification_task_data(entity_files, limits)), entity_files.paths()
    if args.task == "question-answering":
        files = tasks.QuestionFiles(
            args.train_file, args.validation_file, args.language, args.test_file, args.doc_stride, args.n_best_size,
            args.max_answer_length, bool(args.version_2_with_negative), args.null_score_diff_threshold,
        )  # fmt: skip
        return (lambda: tasks.question_answering_task_data(files, limits)), files.paths()
    if args.task == "multiple-choice":
        files = tasks.ChoiceFiles(args.train_file, args.validation_file, args.test_file)
        return (lambda: tasks.multiple_choice_task_data(files, limits)), files.paths()
    return (lambda: tasks.cail_task_data(args.data_dir, limits)), {"data directory": args.data_dir}


# Under HF_ROFORMER_SMOKE (the docs tests): paragraphs trained on for one epoch, and paragraphs evaluated and
# predicted. 800 is the fewest of People's Daily's that take the shipped checkpoint past tagging everything `O`
# (entity F1 0.49 on held-out paragraphs after one epoch; 0.00 with 400).
SMOKE_TRAIN_PARAGRAPHS, SMOKE_HELD_OUT_PARAGRAPHS = 800, 100


def smoke_sized(args: argparse.Namespace, defaults: dict) -> dict:
    """Under `HF_ROFORMER_SMOKE` (the docs tests), fewer paragraphs and one epoch; otherwise `defaults` unchanged."""
    from hf_roformer.training.smoke import announce_smoke_run

    from .smoke import smoke_run

    if not smoke_run():
        return defaults
    announce_smoke_run(
        f"at most {SMOKE_TRAIN_PARAGRAPHS} training paragraphs for 1 epoch, {SMOKE_HELD_OUT_PARAGRAPHS} to evaluate "
        "and to predict"
    )
    args.max_train_samples = SMOKE_TRAIN_PARAGRAPHS
    args.max_eval_samples = args.max_predict_samples = SMOKE_HELD_OUT_PARAGRAPHS
    return {**defaults, "num_train_epochs": 1.0}


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Fine-tune as the parsed command line says."""
    from hf_roformer.utils.extras import require_extra

    prog = f"hf-roformer finetune {args.task}"
    if args.help_all:
        print_all_trainer_options(prog)
        return
    check_phases_apply(args)
    require_extra(EXTRA, f"`{prog}`")
    from hf_roformer.training.finetune import DEFAULT_TOKEN_BUDGET, Batching, ModelOptions, Phases, fine_tune

    defaults = args._defaults
    if args.task == "token-classification":
        defaults = smoke_sized(args, defaults)
    training_args = training_arguments(args, passed_through, defaults, prog)
    model_options = ModelOptions(
        model_name_or_path=args.model_name_or_path, tokenizer_name=args.tokenizer_name,
        max_seq_length=args.max_seq_length, pad_to_max_length=bool(args.pad_to_max_length),
        model_max_length=args.model_max_length, rope_parameters=rope_parameters(args.rope_parameters),
        cache_dir=args.cache_dir, model_revision=args.model_revision, token=args.token,
        trust_remote_code=bool(args.trust_remote_code), ignore_mismatched_sizes=bool(args.ignore_mismatched_sizes),
    )  # fmt: skip
    load_task, inputs = task_loader(args)
    token_budget = DEFAULT_TOKEN_BUDGET if args.token_budget is None else args.token_budget or None
    if args.task == "token-classification":  # windows of at most --max_seq_length tokens: batches run whole
        if args.token_budget:
            from hf_roformer.utils.errors import UsageError

            raise UsageError("--token_budget does not apply to token-classification: its batches run whole")
        token_budget = None
    return fine_tune(
        f"finetune {args.task}",
        load_task,
        model_options,
        training_args,
        Phases(*requested_phases(args)),
        arguments=run_arguments(args, training_args),
        inputs=inputs,
        overwrite_output_dir=bool(args.overwrite_output_dir),
        batching=Batching(
            token_budget,
            args.sort_evaluation is not False,
        ),
    )


def run_sentence_embedding(args: argparse.Namespace, passed_through: list[str]) -> dict:
    """Train sentence vectors as the parsed command line says."""
    from hf_roformer.utils.extras import require_extra

    prog = "hf-roformer finetune sentence-embedding"
    if args.help_all:
        print_all_trainer_options(prog)
        return {}
    check_phases_apply(args)
    require_extra(EXTRA, f"`{prog}`")
    import importlib.util

    from hf_roformer.utils.errors import MissingExtraError

    if importlib.util.find_spec("sentence_transformers") is None:
        raise MissingExtraError(f'`{prog}` needs sentence-transformers: pip install "sentence-transformers>=5.4"')
    from hf_roformer.training.finetune import Phases
    from hf_roformer.training.sentence_embedding import SentenceEmbeddingOptions, train_sentence_embedding

    training_args = training_arguments(args, passed_through, args._defaults, prog)
    options = SentenceEmbeddingOptions(
        args.model_name_or_path, args.train_file, args.validation_file, args.test_file, args.loss, args.pooling,
        args.max_seq_length, args.max_train_samples, args.max_eval_samples, args.max_predict_samples,
    )  # fmt: skip
    return train_sentence_embedding(
        options,
        training_args,
        Phases(*requested_phases(args)),
        arguments=run_arguments(args, training_args),
        overwrite=bool(args.overwrite_output_dir),
    )


__all__ = ["add_parser", "run", "run_sentence_embedding"]
