"""`hf-roformer plot decay|methods`: figures of RoPE (the `plots` app). Each figure is a subcommand with its own
options, so `hf-roformer plot decay --help` describes that figure."""

import argparse

from .parsing import HelpFormatter, option, positive_float, positive_int


EXTRA = "plot"
NEEDS = 'Needs the `plot` extra: pip install "hf_roformer[plot]".'
FIGURES = {
    "decay": (
        "the long-term decay bound of the paper (appendix C, figure 3)",
        "How the upper bound of RoPE's attention score falls with the relative distance, for head dimension d.",
        128,
    ),
    "methods": (
        "the rotation pattern of each rope scaling method",
        "The rotation angle of each feature pair at a position past the pre-training length L, for each rope scaling "
        "method at factor s.",
        64,
    ),
}


def add_parser(commands) -> None:
    """`plot` and its figures."""
    parser = commands.add_parser(
        "plot",
        help="figures of RoPE (needs matplotlib: pip install 'hf_roformer[plot]')",
        description="Figures of RoPE: `decay`, the paper's long-term decay bound (appendix C, figure 3); `methods`, "
        "the rotation pattern of each rope scaling method. `hf-roformer plot FIGURE --help` lists its options.\n\n"
        + NEEDS,
        formatter_class=HelpFormatter,
    )
    figures = parser.add_subparsers(dest="figure", required=True, metavar="FIGURE")
    for name, (summary, details, head_dim) in FIGURES.items():
        figure = figures.add_parser(
            name, help=summary, description=f"Draw {summary}.\n\n{details}\n\n{NEEDS}", formatter_class=HelpFormatter
        )
        figure.add_argument(*option("output"), required=True, help="PNG file to write")
        figure.add_argument(*option("head_dim"), type=positive_int, default=head_dim,
                            help="head dimension d (default: %(default)s)")  # fmt: skip
        if name == "methods":
            figure.add_argument(*option("factor"), type=positive_float, default=4.0,
                                help="scaling factor s (default: %(default)s)")  # fmt: skip
            figure.add_argument(*option("original_length"), type=positive_int, default=512,
                                help="pre-training length L (default: %(default)s)")  # fmt: skip
        figure.set_defaults(_run=run)


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Draw the figure and print where it went."""
    from hf_roformer.utils.errors import UsageError
    from hf_roformer.utils.extras import require_extra

    require_extra(EXTRA, "`hf-roformer plot`")
    if args.head_dim % 2:
        raise UsageError(f"--head_dim {args.head_dim}: RoPE rotates pairs of features, so it must be even")
    from hf_roformer.apps import plots

    if args.figure == "decay":
        path = plots.plot_long_term_decay(args.output, head_dim=args.head_dim)
    else:
        path = plots.plot_rope_methods(
            args.output, head_dim=args.head_dim, factor=args.factor, original_length=args.original_length
        )
    print(path)


__all__ = ["add_parser", "run"]
