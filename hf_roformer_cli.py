"""The `hf-roformer` command line.

Arguments are parsed here, before torch or transformers is imported (this module imports neither, nor the
`hf_roformer` package, whose import registers the models with transformers), so `--help` and mistakes in the command
answer at once; a subcommand imports what it needs only when it runs. Options are spelled with underscores, as
transformers' `HfArgumentParser` spells them (`--output_dir`); the same name with dashes (`--output-dir`) is accepted
everywhere.
"""

import argparse
import difflib
import sys


FINETUNE_TASKS = ("glue", "text-classification", "cail2019-scm")


def unknown_choice(what: str, name: str, valid: list[str]) -> str:
    """ "unknown ...: did you mean ...? Valid: ..." for a name that is not one of `valid`."""

    def normal(text: str) -> str:
        return text.lower().replace("-", "").replace("_", "")

    matches = [choice for choice in valid if normal(choice) == normal(name)]
    matches = matches or difflib.get_close_matches(name.lower(), valid, n=1, cutoff=0.6)
    suggestion = f" Did you mean {matches[0]!r}?" if matches else ""
    return f"unknown {what} {name!r}.{suggestion} Valid: {', '.join(valid)}."


def option(name: str) -> list[str]:
    """`--name` and, when it has an underscore, its dashed alias."""
    spellings = [f"--{name}"]
    if "_" in name:
        spellings.append(f"--{name.replace('_', '-')}")
    return spellings


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (the Trainer-based ones take their own options after the subcommand)."""
    parser = argparse.ArgumentParser(prog="hf-roformer", description="RoFormer for Hugging Face Transformers.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="fine-tune the shipped pre-trained RoFormer on Chinese reviews on CPU (a few minutes)"
    )
    demo.add_argument(*option("output_dir"), default="roformer-sentiment-demo", help="where the model is saved")
    demo.add_argument(*option("epochs"), type=float, help="passes over the training reviews (default: the demo's)")
    demo.add_argument(*option("max_train_examples"), type=int, help="train on fewer reviews (quick check)")
    demo.add_argument(
        *option("from_scratch"), action="store_true", help="random weights instead of the pre-trained ones"
    )
    commands.add_parser("tour", help="a one-minute tour: checkpoint parity, long inputs, generation, remote code")

    finetune = commands.add_parser(
        "finetune",
        help="fine-tune with the Trainer: glue, text-classification (your CSV/JSON files) or cail2019-scm",
        description="`hf-roformer finetune TASK --help` lists every option of TASK.",
    )
    finetune.add_argument("task", metavar="TASK", help=", ".join(FINETUNE_TASKS))
    finetune.add_argument("arguments", nargs=argparse.REMAINDER, help="data, model and TrainingArguments options")

    pretrain = commands.add_parser(
        "pretrain", help="masked-LM pre-training in stages; `hf-roformer pretrain mlm --help` lists every option"
    )
    pretrain.add_argument("objective", choices=["mlm"])
    pretrain.add_argument("arguments", nargs=argparse.REMAINDER, help="corpus, stages, model and TrainingArguments")

    convert = commands.add_parser("convert", help="convert an original (TF) or transformers-format RoFormer checkpoint")
    convert.add_argument(
        "source_dir",
        help="released zip contents (bert_config.json, *.ckpt.*, vocab.txt) or a transformers-format directory",
    )
    convert.add_argument("output_dir")
    convert.add_argument(
        "--family",
        default="auto",
        choices=["auto", "v1", "gpt", "sim", "v2"],
        help="auto: RoFormer-V2 from its variables, v1/gpt/sim only from a release's directory name (they hold the "
        "same variables), otherwise refused",
    )
    convert.add_argument("--force", action="store_true", help="replace output_dir if it exists")
    convert.add_argument(
        *option("layer_norm_eps"),
        type=float,
        help="epsilon of the embedding and encoder norms: 1e-12 (default, the release-time bert4keras) or 1e-7 for "
        "checkpoints trained with bert4keras >= 0.11.4; the MLM head's norm stays 1e-12",
    )
    convert.add_argument(
        *option("push_to_hub"), metavar="REPO", help="upload the converted folder to this Hub repository"
    )

    similar = commands.add_parser(
        "similar", help="generate sentences similar to a text with RoFormer-Sim, ranked by similarity"
    )
    similar.add_argument("texts", nargs="+", metavar="text", help="source sentence(s)")
    similar.add_argument(*option("model_name_or_path"), required=True, help="a converted RoFormer-Sim directory")
    similar.add_argument("-n", *option("num_candidates"), type=int, default=20, help="candidates generated per text")
    similar.add_argument(
        "-k", *option("num_results"), type=int, help="best candidates printed per text (default: all)"
    )
    similar.add_argument(*option("top_p"), type=float, default=0.95, help="nucleus sampling threshold")
    similar.add_argument(*option("top_k"), type=int, help="sample among the k likeliest tokens only")
    similar.add_argument(*option("max_new_tokens"), type=int, default=64, help="longest candidate in tokens")
    similar.add_argument("--greedy", action="store_true", help="greedy decoding instead of sampling")
    similar.add_argument("--seed", type=int, help="random seed, for repeatable candidates")

    plot = commands.add_parser("plot", help="figures of RoPE (needs matplotlib: pip install 'hf_roformer[plot]')")
    plot.add_argument("figure", choices=["decay", "methods"], help="long-term decay bound, or scaling methods")
    plot.add_argument(*option("output"), required=True, help="PNG file to write")
    plot.add_argument(*option("head_dim"), type=int, help="head dimension d (default 128 for decay, 64 for methods)")
    plot.add_argument(*option("factor"), type=float, default=4.0, help="scaling factor s (methods)")
    plot.add_argument(*option("original_length"), type=int, default=512, help="pre-training length L (methods)")
    return parser


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `hf-roformer` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "finetune" and args.task not in FINETUNE_TASKS:
        parser.error(unknown_choice("finetune task", args.task, list(FINETUNE_TASKS)))
    if args.command == "demo":
        from hf_roformer.training.demo import run_demo

        options = {"epochs": args.epochs, "max_train_examples": args.max_train_examples}
        run_demo(args.output_dir, from_scratch=args.from_scratch, **{k: v for k, v in options.items() if v is not None})
    elif args.command == "tour":
        from hf_roformer.tour import run_tour

        run_tour()
    elif args.command == "finetune":
        from hf_roformer.training.finetune import main as finetune_main

        finetune_main(args.task, args.arguments)
    elif args.command == "pretrain":
        from hf_roformer.training.pretrain import main as pretrain_main

        pretrain_main(args.arguments)
    elif args.command == "convert":
        from hf_roformer.conversion.cli import run_convert

        run_convert(args)
    elif args.command == "similar":
        from hf_roformer.similar_sentences import run_similar

        run_similar(args)
    elif args.command == "plot":
        from hf_roformer import plots

        if args.figure == "decay":
            path = plots.plot_long_term_decay(args.output, head_dim=args.head_dim or 128)
        else:
            path = plots.plot_rope_methods(
                args.output, head_dim=args.head_dim or 64, factor=args.factor, original_length=args.original_length
            )
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
