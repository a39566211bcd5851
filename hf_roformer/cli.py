"""The `hf-roformer` command line."""

import argparse


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `hf-roformer` console script."""
    parser = argparse.ArgumentParser(prog="hf-roformer", description="RoFormer for Hugging Face Transformers.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo", help="fine-tune the shipped pre-trained RoFormer on Chinese reviews on CPU (a few minutes)"
    )
    demo.add_argument("--output-dir", default="roformer-sentiment-demo", help="where the model is saved")
    demo.add_argument("--epochs", type=float, help="passes over the training reviews (default: the demo's)")
    demo.add_argument("--max-train-examples", type=int, help="train on fewer reviews (quick check)")
    demo.add_argument("--from-scratch", action="store_true", help="random weights instead of the pre-trained ones")
    commands.add_parser("tour", help="a one-minute tour: checkpoint parity, long inputs, generation, remote code")

    finetune = commands.add_parser(
        "finetune", help="fine-tune with the Trainer; `hf-roformer finetune glue --help` lists every option"
    )
    finetune.add_argument("task", choices=["glue", "cail2019-scm"])
    finetune.add_argument("arguments", nargs=argparse.REMAINDER, help="task and TrainingArguments flags")

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
        "--layer_norm_eps",
        "--layer-norm-eps",
        type=float,
        help="epsilon of the embedding and encoder norms: 1e-12 (default, the release-time bert4keras) or 1e-7 for "
        "checkpoints trained with bert4keras >= 0.11.4; the MLM head's norm stays 1e-12",
    )
    convert.add_argument(
        "--push_to_hub", "--push-to-hub", metavar="REPO", help="upload the converted folder to this Hub repository"
    )

    similar = commands.add_parser(
        "similar", help="generate sentences similar to a text with RoFormer-Sim, ranked by similarity"
    )
    similar.add_argument("texts", nargs="+", metavar="text", help="source sentence(s)")
    similar.add_argument(
        "--model_name_or_path", "--model-name-or-path", required=True, help="a converted RoFormer-Sim directory"
    )
    similar.add_argument(
        "-n", "--num_candidates", "--num-candidates", type=int, default=20, help="candidates generated per text"
    )
    similar.add_argument(
        "-k", "--num_results", "--num-results", type=int, help="best candidates printed per text (default: all)"
    )
    similar.add_argument("--top_p", "--top-p", type=float, default=0.95, help="nucleus sampling threshold")
    similar.add_argument("--top_k", "--top-k", type=int, help="sample among the k likeliest tokens only")
    similar.add_argument(
        "--max_new_tokens", "--max-new-tokens", type=int, default=64, help="longest candidate in tokens"
    )
    similar.add_argument("--greedy", action="store_true", help="greedy decoding instead of sampling")
    similar.add_argument("--seed", type=int, help="random seed, for repeatable candidates")

    plot = commands.add_parser("plot", help="figures of RoPE (needs matplotlib: pip install 'hf_roformer[plot]')")
    plot.add_argument("figure", choices=["decay", "methods"], help="long-term decay bound, or scaling methods")
    plot.add_argument("--output", required=True, help="PNG file to write")
    plot.add_argument("--head-dim", type=int, help="head dimension d (default 128 for decay, 64 for methods)")
    plot.add_argument("--factor", type=float, default=4.0, help="scaling factor s (methods)")
    plot.add_argument("--original-length", type=int, default=512, help="pre-training length L (methods)")

    args = parser.parse_args(argv)
    if args.command == "demo":
        from .training.demo import run_demo

        options = {"epochs": args.epochs, "max_train_examples": args.max_train_examples}
        run_demo(args.output_dir, from_scratch=args.from_scratch, **{k: v for k, v in options.items() if v is not None})
    elif args.command == "tour":
        from .tour import run_tour

        run_tour()
    elif args.command == "finetune":
        from .training.finetune import main as finetune_main

        finetune_main(args.task, args.arguments)
    elif args.command == "pretrain":
        from .training.pretrain import main as pretrain_main

        pretrain_main(args.arguments)
    elif args.command == "convert":
        from .conversion.cli import run_convert

        run_convert(args)
    elif args.command == "similar":
        from .similar_sentences import run_similar

        run_similar(args)
    elif args.command == "plot":
        from . import plots

        if args.figure == "decay":
            path = plots.plot_long_term_decay(args.output, head_dim=args.head_dim or 128)
        else:
            path = plots.plot_rope_methods(
                args.output, head_dim=args.head_dim or 64, factor=args.factor, original_length=args.original_length
            )
        print(path)


if __name__ == "__main__":
    main()
