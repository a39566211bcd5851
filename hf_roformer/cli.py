"""The `hf-roformer` command line."""

import argparse


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `hf-roformer` console script."""
    parser = argparse.ArgumentParser(prog="hf-roformer", description="RoFormer for Hugging Face Transformers.")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="a short CPU tour: checkpoint parity, long inputs, generation, remote code")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo()


if __name__ == "__main__":
    main()
