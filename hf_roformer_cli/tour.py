"""`hf-roformer tour`: a one-minute tour of the model features (the `tour` app)."""

import argparse


def add_parser(commands) -> None:
    """`tour`."""
    parser = commands.add_parser(
        "tour",
        help="a one-minute tour: checkpoint parity, long inputs, generation, remote code",
        description="A one-minute tour on CPU: a transformers RoFormer checkpoint loaded exactly, inputs past the "
        "trained length, generation with a cache, and a saved model loaded as remote code by a process that cannot "
        "import hf_roformer. Needs nothing beyond the base install.",
    )
    parser.set_defaults(_run=run)


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Run the tour."""
    from hf_roformer.apps.tour import run_tour

    run_tour()


__all__ = ["add_parser", "run"]
