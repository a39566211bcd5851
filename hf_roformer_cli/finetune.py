"""`hf-roformer finetune glue|text-classification|cail2019-scm|token-classification|question-answering|
multiple-choice|sentence-embedding`: fine-tuning with transformers' Trainer (sentence vectors:
sentence-transformers' trainer).

The options are those of transformers' `run_glue.py` (`--model_name_or_path`, `--task_name`, `--max_seq_length`,
`--train_file`, ...; `--model`, `--task`, `--max_length` are aliases) and every `TrainingArguments` option. Parsing
answers without importing torch; the run itself is `hf_roformer.training.run.finetune.fine_tune`.
"""

import argparse

from .parsing import HelpFormatter, add_flag, non_negative_int, option, positive_int
from .task_declarations import VALUE_TYPES, task_declarations
from .trainer_options import (
    add_trainer_options,
    check_phases_apply,
    print_all_trainer_options,
    requested_phases,
    run_arguments,
    training_arguments,
)


EXTRA = "training"
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
    """`finetune` and each task of `hf_roformer/training/tasks/` (its options, defaults and loader from its
    declaration, `task_declarations.py`)."""
    declarations = task_declarations()
    finetune = commands.add_parser(
        "finetune",
        help="fine-tune with the Trainer: glue, text-classification (your CSV/JSON files), cail2019-scm, "
        "token-classification (named entities), question-answering, multiple-choice or sentence-embedding",
        description="Fine-tune a RoFormer with transformers' Trainer. "
        "`hf-roformer finetune TASK --help` lists every option of TASK.",
        formatter_class=HelpFormatter,
    )
    tasks = finetune.add_subparsers(dest="task", required=True, metavar="TASK")
    for declaration in declarations:
        summary = declaration.summary
        parser = tasks.add_parser(
            declaration.name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.\n\n{declaration.details}",
            epilog=EPILOG, formatter_class=HelpFormatter,
            usage=f"hf-roformer finetune {declaration.name} {declaration.usage}",
        )  # fmt: skip
        add_declared_options(parser.add_argument_group("data"), declaration.options)
        if declaration.runs == "fine_tune":
            add_model_options(parser, declaration.defaults)  # --max_seq_length: the task's own default, else 512
            add_batching_options(parser)
        add_sample_options(parser, declaration.examples)
        add_trainer_options(parser, declaration.defaults)
        parser.set_defaults(_run=RUNS[declaration.runs], _declaration=declaration, _defaults=declaration.defaults)


def add_declared_options(group, options) -> None:
    """A task's declared options (`task_declarations.Option`s) as argparse arguments."""
    for declared in options:
        if declared.flag:
            add_flag(group, declared.name, declared.help)
            continue
        extra = {key: value for key, value in (("choices", declared.choices), ("metavar", declared.metavar))
                 if value is not None}  # fmt: skip
        if declared.type is not None:
            extra["type"] = VALUE_TYPES[declared.type]
        group.add_argument(
            *option(declared.name), *declared.aliases, required=declared.required, default=declared.default,
            help=declared.help, **extra,
        )  # fmt: skip


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


def smoke_sized(args: argparse.Namespace, declaration, defaults: dict) -> dict:
    """Under `HF_ROFORMER_SMOKE` (the docs tests), the examples and epochs of the task's `smoke` declaration;
    otherwise (or for a task that declares none) `defaults` unchanged."""
    from .smoke import smoke_run

    if declaration.smoke is None or not smoke_run():
        return defaults
    from hf_roformer.training.run.smoke import announce_smoke_run

    size = declaration.smoke
    announce_smoke_run(
        f"at most {size.train} training {size.what} for {size.epochs:g} epoch{'' if size.epochs == 1 else 's'}, "
        f"{size.held_out} to evaluate and to predict"
    )
    args.max_train_samples = size.train
    args.max_eval_samples = args.max_predict_samples = size.held_out
    return {**defaults, "num_train_epochs": size.epochs}


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Fine-tune as the parsed command line says: the task's loader (`args._declaration`) reads its options."""
    from hf_roformer.utils.extras import require_extra

    prog = f"hf-roformer finetune {args.task}"
    if args.help_all:
        print_all_trainer_options(prog)
        return
    declaration = args._declaration
    rope = rope_parameters(args.rope_parameters)
    defaults = smoke_sized(args, declaration, args._defaults)
    check_phases_apply(args)
    require_extra(EXTRA, f"`{prog}`")
    from hf_roformer.training.run.fine_tuning_task import SampleLimits
    from hf_roformer.training.run.finetune import DEFAULT_TOKEN_BUDGET, Batching, ModelOptions, Phases, fine_tune
    from hf_roformer.utils.errors import UsageError

    training_args = training_arguments(args, passed_through, defaults, prog)
    phases = Phases(*requested_phases(args))
    arguments = run_arguments(args, training_args)
    if declaration.whole_batches and args.token_budget:
        raise UsageError(f"--token_budget does not apply to {declaration.name}: its batches run whole")
    token_budget = DEFAULT_TOKEN_BUDGET if args.token_budget is None else args.token_budget or None
    model_options = ModelOptions(
        model_name_or_path=args.model_name_or_path, tokenizer_name=args.tokenizer_name,
        max_seq_length=args.max_seq_length, pad_to_max_length=bool(args.pad_to_max_length),
        model_max_length=args.model_max_length, rope_parameters=rope,
        cache_dir=args.cache_dir, model_revision=args.model_revision, token=args.token,
        trust_remote_code=bool(args.trust_remote_code), ignore_mismatched_sizes=bool(args.ignore_mismatched_sizes),
    )  # fmt: skip
    limits = SampleLimits(args.max_train_samples, args.max_eval_samples, args.max_predict_samples)
    load_task, inputs = declaration.load(args, limits)
    return fine_tune(
        f"finetune {args.task}",
        load_task,
        model_options,
        training_args,
        phases,
        arguments=arguments,
        inputs=inputs,
        overwrite_output_dir=bool(args.overwrite_output_dir),
        batching=Batching(None if declaration.whole_batches else token_budget, args.sort_evaluation is not False),
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
    from hf_roformer.training.run.fine_tuning_task import SampleLimits
    from hf_roformer.training.run.finetune import Phases
    from hf_roformer.training.tasks.sentence_embedding.task import train_sentence_embedding

    training_args = training_arguments(args, passed_through, args._defaults, prog)
    phases = Phases(*requested_phases(args))
    arguments = run_arguments(args, training_args)
    limits = SampleLimits(args.max_train_samples, args.max_eval_samples, args.max_predict_samples)
    options, _ = args._declaration.load(args, limits)
    return train_sentence_embedding(
        options, training_args, phases, arguments=arguments, overwrite=bool(args.overwrite_output_dir)
    )


RUNS = {"fine_tune": run, "sentence_embedding": run_sentence_embedding}


__all__ = ["add_parser", "run", "run_sentence_embedding"]
