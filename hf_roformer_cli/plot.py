"""`hf-roformer plot decay|methods`: figures of RoPE (the `plots` app)."""

import argparse

from .parsing import HelpFormatter, option, positive_float, positive_int


EXTRA = "plot"


def add_parser(commands) -> None:
    """`plot` and its options."""
    parser = commands.add_parser(
        "plot",
        help="figures of RoPE (needs matplotlib: pip install 'hf_roformer[plot]')",
        description="Figures of RoPE: `decay`, the paper's long-term decay bound (appendix C, figure 3); `methods`, "
        "the rotation pattern of each rope scaling method.\n\n"
        'Needs the `plot` extra: pip install "hf_roformer[plot]".',
        formatter_class=HelpFormatter,
    )
    parser.add_argument("figure", choices=["decay", "methods"], help="long-term decay bound, or scaling methods")
    parser.add_argument(*option("output"), required=True, help="PNG file to write")
    parser.add_argument(*option("head_dim"), type=positive_int,
                        help="head dimension d (default 128 for decay, 64 for methods)")  # fmt: skip
    parser.add_argument(*option("factor"), type=positive_float, default=4.0,
                        help="scaling factor s (methods; default: %(default)s)")  # fmt: skip
    parser.add_argument(*option("original_length"), type=positive_int, default=512,
                        help="pre-training length L (methods; default: %(default)s)")  # fmt: skip
    parser.set_defaults(_run=run)


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Draw the figure and print where it went."""
    from hf_roformer.utils.errors import UsageError
    from hf_roformer.utils.extras import require_extra

    require_extra(EXTRA, "`hf-roformer plot`")
    if args.head_dim is not None and args.head_dim % 2:
        raise UsageError(f"--head_dim {args.head_dim}: RoPE rotates pairs of features, so it must be even")
    from hf_roformer.apps import plots

    if args.figure == "decay":
        path = plots.plot_long_term_decay(args.output, head_dim=args.head_dim or 128)
    else:
        path = plots.plot_rope_methods(
            args.output, head_dim=args.head_dim or 64, factor=args.factor, original_length=args.original_length
        )
    print(path)


__all__ = ["add_parser", "run"]
