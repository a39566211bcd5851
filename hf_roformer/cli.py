"""The `hf-roformer` command line."""

import argparse


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `hf-roformer` console script."""
    parser = argparse.ArgumentParser(prog="hf-roformer", description="RoFormer for Hugging Face Transformers.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="a short CPU tour: checkpoint parity, long inputs, generation, remote code")

    plot = commands.add_parser("plot", help="figures of RoPE (needs matplotlib: pip install 'hf_roformer[plot]')")
    plot.add_argument("figure", choices=["decay", "methods"], help="long-term decay bound, or scaling methods")
    plot.add_argument("--output", required=True, help="PNG file to write")
    plot.add_argument("--head-dim", type=int, help="head dimension d (default 128 for decay, 64 for methods)")
    plot.add_argument("--factor", type=float, default=4.0, help="scaling factor s (methods)")
    plot.add_argument("--original-length", type=int, default=512, help="pre-training length L (methods)")

    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo()
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
