"""Output directories that never cost the user anything: an output that equals, contains or lies inside one of the
command's inputs is refused whatever the flags, and an existing output is replaced (`--force`,
`--overwrite_output_dir`) only when it holds an earlier output of the same command, by removing what is inside it and
nothing else."""

import os
import shutil
from pathlib import Path

from .errors import OutputDirectoryError


def _absolute(path: str | os.PathLike) -> Path:
    """`path` made absolute with symbolic links resolved (as far as it exists), so two spellings of one place compare
    equal."""
    return Path(path).expanduser().resolve()


def check_apart_from_inputs(
    output_dir: str | os.PathLike, inputs: dict[str, object], flag: str = "--output_dir"
) -> None:
    """Refuse an output directory that is, contains or lies inside one of `inputs` (description -> path or None): a
    replaced or rewritten output must never touch what the command reads."""
    output = _absolute(output_dir)
    for what, path in inputs.items():
        if path is None:
            continue
        source = _absolute(path)
        if output == source:
            relation = "is"
        elif output in source.parents:
            relation = "contains"
        elif source in output.parents:
            relation = "lies inside"
        else:
            continue
        raise OutputDirectoryError(
            f"{flag} {output_dir} {relation} the {what} {path}; give an output directory apart from the inputs"
        )


def remove_contents(directory: str | os.PathLike) -> None:
    """Empty `directory` (an earlier output the caller has identified as its own): every entry inside it is removed,
    symbolic links as links (never what they point to); the directory itself stays."""
    for entry in Path(directory).iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def is_empty_or_missing(directory: str | os.PathLike) -> bool:
    """Whether `directory` does not exist or holds nothing."""
    path = Path(directory)
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


__all__ = ["check_apart_from_inputs", "is_empty_or_missing", "remove_contents"]
