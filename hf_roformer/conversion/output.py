"""Writing a converted checkpoint all or nothing: the files go to a staging directory beside the output, which is
renamed into place only when complete.

Staging directories are named `.<output name>.hf-roformer-staging-<pid>-<random>` (and the previous output, while
`--force` replaces it, `.<output name>.hf-roformer-replaced-<pid>-<random>/previous`); the process writing one also
holds a lock on it until it is done. A run that is killed leaves them behind; the next run for the same output
removes those whose process has ended (a killed process that its parent has not reaped yet counts as ended) and that
nobody holds (a lock that another machine sharing the file system holds counts), and puts back a previous output that
a killed replacement had moved aside.

`--force` replaces the files of the earlier conversion, those its `conversion_report.json` lists, and keeps every
other file and folder of the output: they are carried into the new output. (A report written before reports listed
their files counts the names the new conversion writes as the earlier one's.) A kept file that the new conversion
would write too is refused, naming it, before anything changes. A full or read-only disk is reported as a
`ConversionError` naming the output and the system's reason, with nothing written.
"""

import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..utils.directory_locks import held_elsewhere, hold, process_alive, release
from ..utils.errors import OutputDirectoryError
from ..utils.output_dirs import check_apart_from_inputs, file_sizes, is_empty_or_missing, unlisted_entries
from .errors import ConversionError
from .report import REPORT_FILE


logger = logging.getLogger(__name__)

STAGING_MARK = "hf-roformer-staging"
REPLACED_MARK = "hf-roformer-replaced"
OS_ERROR_IN_MESSAGE = re.compile(r"os error (\d+)")  # how Rust libraries (safetensors, tokenizers) report OS errors


def _marked_prefix(output_dir: Path, mark: str) -> str:
    return f".{output_dir.name}.{mark}-"


def _owner_pid(path: Path, prefix: str) -> int | None:
    pid = path.name[len(prefix) :].split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def _stale(output_dir: Path, mark: str) -> list[Path]:
    prefix = _marked_prefix(output_dir, mark)
    if not output_dir.parent.is_dir():
        return []
    stale = []
    for path in output_dir.parent.iterdir():
        if not path.name.startswith(prefix) or not path.is_dir() or path.is_symlink():
            continue
        pid = _owner_pid(path, prefix)
        if pid is None:
            continue  # not named as this module names its directories: not ours
        if held_elsewhere(path) or (pid != os.getpid() and process_alive(pid)):
            continue  # being written: by a live process on this machine, or one holding it from elsewhere
        stale.append(path)
    return sorted(stale)


def earlier_conversion_files(previous: Path, new: Path) -> set[str]:
    """The files of `previous` (an earlier conversion's output) that its conversion wrote: those its report lists and
    the report itself; for a report that lists none (written before reports did), the names `new` (the conversion
    replacing it) writes."""
    try:
        listed = json.loads((previous / REPORT_FILE).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        listed = None
    if not isinstance(listed, dict):
        return set(file_sizes(new)) | {REPORT_FILE}
    return {*listed, REPORT_FILE}


def carry_over(previous: Path, new: Path, kept: list[str]) -> None:
    """Move the entries `kept` (the user's, not the earlier conversion's) from `previous` into `new`."""
    for name in kept:
        target = new / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(previous / name, target)


def clean_stale_staging(output_dir: str | Path) -> list[Path]:
    """Remove the staging directories of interrupted conversions into `output_dir` (their process is gone), first
    moving back a previous output that an interrupted `--force` run had set aside and not yet replaced. Returns the
    paths removed."""
    output_dir = Path(output_dir)
    removed = []
    for path in _stale(output_dir, REPLACED_MARK):
        previous = path / "previous"
        if previous.exists() and not output_dir.exists():
            os.replace(previous, output_dir)
            logger.warning("%s: restored the output an interrupted conversion had moved aside", output_dir)
        elif previous.exists():  # killed after the new output moved in: the user's files still have to follow it
            kept = unlisted_entries(previous, earlier_conversion_files(previous, output_dir))
            clashing = [name for name in kept if (output_dir / name).exists()]
            if clashing:
                logger.warning("%s: left in place, it holds %s, which %s also has", path, clashing[0], output_dir)
                continue
            carry_over(previous, output_dir, kept)
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    for path in _stale(output_dir, STAGING_MARK):
        shutil.rmtree(path, ignore_errors=True)
        logger.warning("removed %s, left by an interrupted conversion", path)
        removed.append(path)
    return removed


def prepare_output(output_dir: str | Path, force: bool, source_dir: str | Path | None = None) -> Path:
    """Check, before any work, that `output_dir` may be written: never the source, a directory inside it or one that
    contains it (whatever `force` says); an existing output only with `force`, and only when it holds an earlier
    conversion (its `conversion_report.json`), whose files alone `--force` replaces. Stale staging of interrupted
    runs is cleaned."""
    output_dir = Path(output_dir)
    check_apart_from_inputs(output_dir, {"source checkpoint": source_dir}, flag="output directory")
    clean_stale_staging(output_dir)
    if is_empty_or_missing(output_dir):
        return output_dir
    if not (output_dir / REPORT_FILE).is_file():
        raise OutputDirectoryError(
            f"{output_dir} exists and is not an output of hf-roformer convert (it has no {REPORT_FILE}); give "
            "another output directory (--force replaces only an earlier conversion)"
        )
    if not force:
        raise OutputDirectoryError(f"{output_dir} holds an earlier conversion; pass --force to replace it")
    return output_dir


def check_free_space(output_dir: str | Path, needed_bytes: int) -> None:
    """Refuse early when the disk that will hold `output_dir` has less than `needed_bytes` free."""
    directory = Path(output_dir).absolute().parent
    while not directory.exists():
        directory = directory.parent
    free = shutil.disk_usage(directory).free
    if free < needed_bytes:
        raise ConversionError(
            f"{output_dir}: not enough disk space (the conversion needs about {needed_bytes / 1e6:.1f} MB, "
            f"{free / 1e6:.1f} MB are free); nothing was written"
        )


def disk_error(error: BaseException) -> str | None:
    """The system's reason when `error` is an operating-system failure (full disk, read-only file system, ...), as
    Python or a Rust library (safetensors, tokenizers) reports it; None for any other error."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    match = OS_ERROR_IN_MESSAGE.search(str(error))
    return os.strerror(int(match.group(1))) if match else None


def _marked_directory(output_dir: Path, mark: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{_marked_prefix(output_dir, mark)}{os.getpid()}-", dir=output_dir.parent))


def write_atomically(
    output_dir: str | Path, force: bool, write: Callable[[Path], None], source_dir: str | Path | None = None
) -> None:
    """Call `write(staging_dir)` and move the result to `output_dir`, replacing an existing output only as
    `prepare_output` allows. On any failure the staging directory is removed and an existing output is left as it
    was."""
    output_dir = prepare_output(output_dir, force, source_dir)
    try:
        output_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = _marked_directory(output_dir, STAGING_MARK)
    except OSError as error:
        raise ConversionError(f"{output_dir}: cannot write ({error.strerror or error}); nothing was written") from None
    lock = hold(staging)
    try:
        write(staging)
        if output_dir.exists():
            replace_keeping_other_files(output_dir, staging)
        else:
            os.replace(staging, output_dir)
    except Exception as error:
        if isinstance(error, OutputDirectoryError):
            raise
        reason = disk_error(error)
        if reason is None:
            raise
        raise ConversionError(
            f"{output_dir}: cannot write the converted checkpoint ({reason}); nothing was written"
        ) from error
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        release(lock)


def replace_keeping_other_files(output_dir: Path, staging: Path) -> None:
    """Put the complete new conversion `staging` in place of the earlier one in `output_dir`, carrying over every
    entry the earlier conversion did not write. A kept file that the new conversion also writes is refused (naming
    it) before anything moves."""
    kept = unlisted_entries(output_dir, earlier_conversion_files(output_dir, staging))
    clashing = next((name for name in kept if (staging / name).exists()), None)
    if clashing is not None:
        raise OutputDirectoryError(
            f"{output_dir / clashing} is not a file of the earlier conversion, and the new one writes a file of that "
            f"name; move it out of {output_dir} and run again (--force replaces only the earlier conversion's files)"
        )
    aside = _marked_directory(output_dir, REPLACED_MARK)
    lock, carried = hold(aside), False
    try:
        os.replace(output_dir, aside / "previous")
        try:
            os.replace(staging, output_dir)
        except OSError:
            os.replace(aside / "previous", output_dir)
            raise
        carry_over(aside / "previous", output_dir, kept)
        carried = True
    finally:
        if carried or not (aside / "previous").exists():  # else it holds files of the user's: the next run moves them
            shutil.rmtree(aside, ignore_errors=True)
        release(lock)


__all__ = [
    "check_free_space",
    "clean_stale_staging",
    "disk_error",
    "prepare_output",
    "write_atomically",
]
