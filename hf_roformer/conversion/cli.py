"""`hf-roformer convert`: pick the converter for the source directory, report, optionally push."""

import json
import signal
import sys
from pathlib import Path

from .convert import ConversionError, convert_tf_checkpoint, convert_transformers_roformer
from .hub import push_folder
from .tf_checkpoint import CheckpointError


def convert_source(args):
    """Run the converter that fits `args.source_dir`: transformers format (`config.json`, no TF index) or TF1."""
    source = Path(args.source_dir)
    if (source / "config.json").exists() and not list(source.glob("*.index")):
        return convert_transformers_roformer(source, args.output_dir, force=args.force)
    return convert_tf_checkpoint(
        source, args.output_dir, family=args.family, force=args.force, layer_norm_eps=args.layer_norm_eps
    )


def run_convert(args) -> None:
    """Convert `args.source_dir` into `args.output_dir` (see `hf-roformer convert --help`). A SIGTERM ends the
    conversion as Ctrl-C does, so its staging directory is removed."""
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        report = convert_source(args)
    except (ConversionError, CheckpointError, FileExistsError) as error:
        raise SystemExit(f"error: {error}") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(json.dumps({key: value for key, value in vars(report).items() if key != "source_sha256"}, indent=2))
    if args.push_to_hub:
        print(push_folder(args.output_dir, args.push_to_hub))
