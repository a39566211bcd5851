"""The `hf-roformer` command line, importable from the package (`python -m hf_roformer.cli ...`, `torchrun -m
hf_roformer.cli ...`). The console script runs `hf_roformer_cli.main` directly, which parses the arguments without
importing the package first."""

import sys

from hf_roformer_cli import build_parser, main


__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    main(sys.argv[1:])
