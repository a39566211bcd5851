"""`hf-roformer convert SOURCE OUTPUT`: an original (TF) or transformers-format RoFormer checkpoint into hf_roformer
(`hf_roformer.conversion.convert_checkpoint`), optionally uploaded to the Hub."""

import argparse
import signal
import sys

from .parsing import HelpFormatter, option, positive_float


def add_parser(commands) -> None:
    """`convert` and its options."""
    parser = commands.add_parser(
        "convert",
        help="convert an original (TF) or transformers-format RoFormer checkpoint",
        description="Convert a released RoFormer directory (bert_config.json, *.ckpt.*, vocab.txt; no TensorFlow "
        "needed) or a transformers-format RoFormer directory into an hf_roformer checkpoint with its tokenizer, "
        "model card and conversion_report.json. Everything is checked before anything is written; the output "
        "appears whole or not at all. The output may not be, contain or lie inside the source, and --force replaces "
        "only the files of an earlier conversion (those its conversion_report.json lists): other files stay.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "source_dir",
        help="released zip contents (bert_config.json, *.ckpt.*, vocab.txt) or a transformers-format directory",
    )
    parser.add_argument("output_dir", help="the directory to create")
    parser.add_argument(
        "--family", default="auto", choices=["auto", "v1", "gpt", "sim", "v2"],
        help="auto (default): RoFormer-V2 from its variables, v1/gpt/sim only from a release's directory name (they "
        "hold the same variables), otherwise refused",
    )  # fmt: skip
    parser.add_argument(
        "--force", action="store_true", help="replace the files of an earlier conversion in output_dir (others stay)"
    )
    parser.add_argument(
        *option("layer_norm_eps"), type=positive_float,
        help="epsilon of the embedding and encoder norms: 1e-12 (default, the release-time bert4keras) or 1e-7 for "
        "checkpoints trained with bert4keras >= 0.11.4; the MLM head's norm stays 1e-12",
    )  # fmt: skip
    parser.add_argument(
        *option("push_to_hub"), metavar="REPO", help="upload the converted folder to this Hub repository"
    )
    parser.set_defaults(_run=run)


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Convert, print the report, and upload when asked. A SIGTERM ends the conversion as Ctrl-C does, so its staging
    directory is removed and nothing is left half-written."""
    import json

    from hf_roformer.conversion import convert_checkpoint
    from hf_roformer.pretrained.sources import check_hub_upload

    if args.push_to_hub:
        check_hub_upload("--push_to_hub")
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        report = convert_checkpoint(
            args.source_dir, args.output_dir, family=args.family, force=args.force, layer_norm_eps=args.layer_norm_eps
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    shown = {key: value for key, value in vars(report).items() if key not in ("source_sha256", "files")}
    print(json.dumps(shown, indent=2))
    if args.push_to_hub:
        from hf_roformer.conversion.hub import push_folder
        from hf_roformer.utils.errors import HubError

        try:
            print(push_folder(args.output_dir, args.push_to_hub))
        except Exception as error:  # any failure of the upload: the converted folder is complete on disk
            raise HubError(
                f"{args.output_dir} is converted, but the upload to {args.push_to_hub} failed ({type(error).__name__}: "
                f"{error}); upload it later with `hf upload {args.push_to_hub} {args.output_dir}`"
            ) from error
    return report


__all__ = ["add_parser", "run"]
