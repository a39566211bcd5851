"""Output directories that never cost the user anything: an output that equals, contains or lies inside one of the
command's inputs is refused whatever the flags, and an existing output is replaced (`--force`,
`--overwrite_output_dir`) only when it holds an earlier output of the same command, by removing the files that
command's record lists (`file_sizes` makes such a list) and nothing else: files the user put there stay."""

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


def file_sizes(directory: str | os.PathLike) -> dict[str, int]:
    """Every file under `directory` (a symbolic link counts as a file, never followed), as its path relative to
    `directory` in POSIX form -> its size in bytes: what a command's record lists as written."""
    root = Path(directory)
    sizes = {}
    for folder, subfolders, files in os.walk(root):
        for name in sorted(files + [entry for entry in subfolders if (Path(folder) / entry).is_symlink()]):
            path = Path(folder) / name
            sizes[path.relative_to(root).as_posix()] = path.lstat().st_size
    return dict(sorted(sizes.items()))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()


def remove_listed(directory: str | os.PathLike, listed) -> list[str]:
    """Remove from `directory` the entries of `listed` (relative POSIX paths: a file, or a folder as `name/`, which goes
    whole), then each folder the removal left empty; everything else stays, and so does `directory` itself. Returns the
    listed paths that were there."""
    root = Path(directory)
    removed, parents = [], set()
    for name in sorted(listed):
        path = root / name
        if path.is_symlink() or path.exists():
            _remove(path)
            removed.append(name)
        parents.update(parent for parent in (root / name.rstrip("/")).parents if root in parent.parents)
    for parent in sorted(parents, key=lambda folder: len(folder.parts), reverse=True):
        if parent.is_dir() and not parent.is_symlink() and not any(parent.iterdir()):
            parent.rmdir()
    return removed


def unlisted_entries(directory: str | os.PathLike, listed) -> list[str]:
    """The entries of `directory` that hold nothing `listed` names (relative POSIX paths; a folder as `name/` covers
    everything in it): each one as high up as possible, so a folder of the user's is one entry."""
    listed = set(listed)
    covered = {name.rstrip("/") for name in listed}
    ancestors = {parent.as_posix() for name in covered for parent in Path(name).parents if parent != Path(".")}

    def walk(folder: Path, prefix: str) -> list[str]:
        found = []
        for entry in sorted(folder.iterdir()):
            name = prefix + entry.name
            if name in covered:
                continue
            if name in ancestors and entry.is_dir() and not entry.is_symlink():
                found += walk(entry, name + "/")
            else:
                found.append(name)
        return found

    return walk(Path(directory), "") if Path(directory).is_dir() else []


def is_empty_or_missing(directory: str | os.PathLike) -> bool:
    """Whether `directory` does not exist or holds nothing."""
    path = Path(directory)
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


__all__ = [
    "check_apart_from_inputs",
    "file_sizes",
    "is_empty_or_missing",
    "remove_listed",
    "unlisted_entries",
]
