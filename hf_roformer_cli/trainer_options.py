"""The `TrainingArguments` options of the Trainer-based commands (`finetune`, `pretrain`).

The options most runs set are declared here, so that `--help` lists them with this command's defaults without
importing transformers, and impossible values (non-positive epochs, steps, batch sizes, learning rates) are refused at
parse time naming the flag. Every other `TrainingArguments` option (`--bf16`, `--fsdp`, `--deepspeed`,
`--gradient_checkpointing`, ...) is passed through to transformers' own `HfArgumentParser` when the command runs;
`--help_all` lists them all.
"""

import argparse
import sys

from .parsing import (
    add_flag,
    non_negative_float,
    non_negative_int,
    option,
    positive_float,
    positive_int,
    steps_or_fraction,
)


# (name, type, help) of the declared TrainingArguments options; `None` type: a boolean flag.
COMMON_OPTIONS = (
    ("num_train_epochs", positive_float, "passes over the training data"),
    ("max_steps", positive_int, "optimizer steps to run, instead of --num_train_epochs"),
    ("per_device_train_batch_size", positive_int, "training examples per step and process"),
    ("per_device_eval_batch_size", positive_int, "evaluation examples per batch and process"),
    ("gradient_accumulation_steps", positive_int, "batches accumulated into one optimizer step"),
    ("learning_rate", positive_float, "peak learning rate of AdamW"),
    ("weight_decay", non_negative_float, "AdamW weight decay"),
    ("warmup_steps", steps_or_fraction, "linear warm-up: steps (>= 1) or a fraction of all steps (< 1)"),
    ("lr_scheduler_type", str, "learning-rate schedule (linear, cosine, constant, ...)"),
    ("eval_strategy", str, "when to evaluate during training: no, steps or epoch"),
    ("eval_steps", positive_int, "evaluate every N steps (--eval_strategy steps)"),
    ("save_strategy", str, "when to save a checkpoint: no, steps, epoch or best"),
    ("save_steps", positive_int, "save every N steps (--save_strategy steps)"),
    ("save_total_limit", positive_int, "keep at most N checkpoints"),
    ("logging_steps", positive_int, "log the loss every N steps (default: at every twentieth of the run's steps)"),
    ("seed", non_negative_int, "random seed of the head's initialization, shuffling and dropout"),
    ("bf16", None, "train in bfloat16 mixed precision"),
    ("fp16", None, "train in float16 mixed precision"),
    ("use_cpu", None, "train on the CPU even where an accelerator is available"),
    ("resume_from_checkpoint", str, "resume from this checkpoint (default: the last complete one of --output_dir)"),
    ("push_to_hub", None, "upload the model and its card to the Hub at the end (checked before training)"),
    ("hub_model_id", str, "the Hub repository (default: the --output_dir name under your account)"),
    ("hub_token", str, "Hub token (default: the one `hf auth login` stored)"),
    ("report_to", str, "experiment trackers to report to (none, all, tensorboard, wandb, ...)"),
    ("disable_tqdm", None, "no progress bar (default: a bar on a terminal, log lines otherwise)"),
)
PHASES = ("do_train", "do_eval", "do_predict")
# The loss is logged at every twentieth of the steps unless the command or the user says otherwise: transformers'
# default (every 500 steps) prints nothing in runs shorter than that, which on a CPU can last an hour.
LOGGED_FRACTION = 0.05
COMMAND_ONLY = ("overwrite_output_dir", "help_all", *PHASES)


def add_trainer_options(parser: argparse.ArgumentParser, defaults: dict, phases: bool = True) -> None:
    """Add `--output_dir`, `--overwrite_output_dir`, the phases and `COMMON_OPTIONS`, showing `defaults` (this
    command's values, which replace transformers' defaults) in the help."""
    group = parser.add_argument_group(
        "run", "Training, evaluation and test predictions all run unless some are named with --do_train, --do_eval "
        "or --do_predict." if phases else None,
    )
    group.add_argument(*option("output_dir"), required=True, help="where the model, checkpoints and results go")
    add_flag(
        group,
        "overwrite_output_dir",
        "start over in --output_dir, replacing an earlier run of this command there: the files its record lists are "
        "removed, never other files (yours stay)",
    )
    if phases:
        for name, what in zip(PHASES, ("train", "evaluate", "predict the test files"), strict=True):
            add_flag(group, name, what)
    training = parser.add_argument_group(
        "training (transformers' TrainingArguments; --help_all lists every other one, all accepted)"
    )
    for name, kind, text in COMMON_OPTIONS:
        shown = f" (default: {defaults[name]})" if name in defaults else ""
        if kind is None:
            add_flag(training, name, text + shown)
        else:
            training.add_argument(*option(name), type=kind, default=None, metavar=name.split("_")[-1].upper(),
                                  help=text + shown)  # fmt: skip
    training.add_argument(
        *option("help_all"), action="store_true", help="list every TrainingArguments option (imports transformers)"
    )


def requested_phases(args: argparse.Namespace) -> tuple[bool, bool, bool]:
    """(train, evaluate, predict): all three unless the command line names some, then exactly those set true."""
    given = [getattr(args, name, None) for name in PHASES]
    if all(value is None for value in given):
        return True, True, True
    return tuple(bool(value) for value in given)


def check_phases_apply(args: argparse.Namespace) -> None:
    """Refuse `--do_predict` where the command line names nothing to predict: no `--test_file`, nor a directory or
    dataset that may hold a test split (its task decides)."""
    from hf_roformer.utils.errors import UsageError

    sources = ("test_file", "data_dir", "dataset_name", "dataset_dir")
    if getattr(args, "do_predict", None) and not any(getattr(args, name, None) for name in sources):
        raise UsageError("--do_predict cannot apply: no --test_file was given, so there is nothing to predict")


def print_all_trainer_options(prog: str) -> None:
    """Every `TrainingArguments` option with transformers' help and defaults (what `--help_all` prints)."""
    from transformers import HfArgumentParser, TrainingArguments

    HfArgumentParser(TrainingArguments, prog=prog).print_help()


def training_arguments(args: argparse.Namespace, passed_through: list[str], defaults: dict, prog: str):
    """`TrainingArguments` from the declared options (`args`), this command's `defaults` and the other options given
    (`passed_through`, parsed by transformers' `HfArgumentParser`). Mistakes raise `UsageError` naming the option."""
    import dataclasses

    import torch
    from transformers import HfArgumentParser, TrainingArguments

    from hf_roformer.utils.errors import UsageError

    class OneLineParser(HfArgumentParser):
        def error(self, message):
            raise UsageError(f"{message} (`{prog} --help_all` lists every option)")

    declared = {name: getattr(args, name) for name, _, _ in COMMON_OPTIONS if getattr(args, name) is not None}
    fields = {field.name for field in dataclasses.fields(TrainingArguments)}
    trainer_defaults = {name: value for name, value in defaults.items() if name in fields}  # not the model's options
    values = {**trainer_defaults, "output_dir": args.output_dir, **declared}
    given_elsewhere = {argument.split("=")[0].lstrip("-").replace("-", "_") for argument in passed_through}
    on_cpu = values.get("use_cpu") or not torch.accelerator.is_available()
    if on_cpu and "dataloader_pin_memory" not in given_elsewhere:
        values["dataloader_pin_memory"] = False  # pinning needs an accelerator; without one torch warns every run
    if "disable_tqdm" not in declared:
        values["disable_tqdm"] = not sys.stderr.isatty()  # bars on a terminal; plain log lines in files and pipes
    parser = OneLineParser(TrainingArguments, prog=prog)
    parser.set_defaults(**values)
    try:
        (training_args,) = parser.parse_args_into_dataclasses(args=passed_through, look_for_args_file=False)
    except ValueError as error:  # TrainingArguments' own checks of its settings, and unknown options
        text = str(error)
        if "not used by the HfArgumentParser" in text:
            unknown = text.split(":", 1)[1].strip()
            raise UsageError(f"unrecognized arguments {unknown} (`{prog} --help_all` lists every option)") from None
        raise UsageError(text) from None
    training_args.do_train, training_args.do_eval, training_args.do_predict = requested_phases(args)
    if "logging_steps" not in values and "logging_steps" not in given_elsewhere:
        training_args.logging_steps = LOGGED_FRACTION  # after parsing: `eval_steps` still defaults to transformers' 500
    check_device_options(training_args)
    return training_args


def check_device_options(training_args) -> None:
    """Refuse options that cannot apply on the device the run trains on, which transformers accepts and then ignores
    without a word: float16 mixed precision on the CPU (accelerate applies it only on an accelerator). transformers
    refuses the others itself (`--bf16` without a GPU unless `--use_cpu`, `--tf32`)."""
    from hf_roformer.utils.errors import UsageError

    if training_args.fp16 and training_args.device.type == "cpu":
        raise UsageError(
            "--fp16 cannot apply: training runs on the CPU, where float16 mixed precision is not available; use --bf16 "
            "for mixed precision on the CPU, or leave it out"
        )


def run_arguments(args: argparse.Namespace, training_args) -> dict:
    """The command's arguments as recorded in its output directory: its own options and every TrainingArguments
    value (the run record leaves out those that do not change the result)."""
    own = {key: value for key, value in vars(args).items() if key not in COMMAND_ONLY and not key.startswith("_")}
    for name, _, _ in COMMON_OPTIONS:
        own.pop(name, None)
    return {**own, **training_args.to_dict()}


__all__ = [
    "COMMON_OPTIONS",
    "add_trainer_options",
    "check_device_options",
    "check_phases_apply",
    "print_all_trainer_options",
    "requested_phases",
    "run_arguments",
    "training_arguments",
]
