"""What a training command finds in its output directory, and what it may do there.

A run writes its record, `hf_roformer_run.json` (the command, the arguments that decide its result, and every file it
writes, with its size: `run_record.py`), before anything else, and `finished.json` (written last, listing the files it
vouches for with their sizes) when it is done. A rerun of a command then does what was asked:

- an empty or missing directory: a new run;
- the same command with the same arguments: resumes an interrupted run from its last complete checkpoint, or, when
  the finished marker holds and every file it lists is there and whole, has nothing to do (a marker that no longer
  holds is named, and the run completed again);
- other arguments: refused, naming each differing argument, unless `--overwrite_output_dir` asks to start over: then
  the files the earlier run's record lists are removed, when the new run begins (after everything is checked), and
  everything else in the directory stays;
- anything else (a directory without a record of this command): refused whatever the flags; nothing is deleted.
"""

import json
import logging
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ...utils.errors import OutputDirectoryError
from ...utils.output_dirs import check_apart_from_inputs, is_empty_or_missing, unlisted_entries
from .checkpoints import FINISHED, holding_finished
from .run_record import RUN_RECORD, RunRecord, comparable


logger = logging.getLogger(__name__)


class RunStart(Enum):
    """What a command does in its output directory."""

    NEW = "new"  # nothing there (or an earlier output replaced): start from the beginning
    RESUME = "resume"  # an interrupted run of the same arguments: continue from its last complete checkpoint
    FINISHED = "finished"  # the same run, finished and whole: nothing to do


@dataclass(frozen=True)
class RunDirectory:
    """An output directory checked for a command: what to do there, the finished record when there is one, and the
    record of the earlier run found there (resumed, or replaced when `start` is NEW)."""

    path: Path
    start: RunStart
    finished: dict | None = None
    earlier: RunRecord | None = None


def differing_arguments(recorded: dict, current: dict) -> list[str]:
    """`--name recorded -> current` for each argument whose value differs (one absent from either side counts only
    when the other side has it set to something)."""
    current = comparable(current)
    differences = []
    for key in sorted(recorded.keys() | current.keys()):
        old, new = recorded.get(key), current.get(key)
        if old != new:
            old_text, new_text = (json.dumps(value, ensure_ascii=False) for value in (old, new))
            differences.append(f"--{key} {old_text} -> {new_text}")
    return differences


def prepare_run_directory(
    output_dir: str | os.PathLike,
    command: str,
    arguments: dict,
    inputs: dict[str, object],
    overwrite: bool = False,
    is_main_process: bool = True,
) -> RunDirectory:
    """Check `output_dir` for `command` with `arguments` before any data is read or written (see the module); nothing
    is removed here (`begin_run_record` does that). `inputs` (description -> path or None) are what the run reads: an
    output equal to, inside or around one of them is refused."""
    path = Path(output_dir)
    check_apart_from_inputs(path, inputs)
    if is_empty_or_missing(path):
        return RunDirectory(path, RunStart.NEW)
    if not path.is_dir():
        raise OutputDirectoryError(f"--output_dir {path}: a file, not a directory")
    record = RunRecord.read(path)
    if record is None or record.command != command:
        owner = f"`hf-roformer {record.command}`" if record and isinstance(record.command, str) else None
        raise OutputDirectoryError(
            f"--output_dir {path} holds files that are not an output of `hf-roformer {command}`"
            + (f" (it is an output of {owner})" if owner else "")
            + "; give another --output_dir (--overwrite_output_dir replaces only an earlier output of this command)"
        )
    if overwrite:
        if record.written is None:
            raise OutputDirectoryError(
                f"--output_dir {path} holds a run of `hf-roformer {command}` recorded by an earlier hf_roformer, which "
                "did not list the files it wrote, so --overwrite_output_dir cannot tell them from yours; move what "
                "you want to keep out of it and delete it, or give another --output_dir"
            )
        return RunDirectory(path, RunStart.NEW, earlier=record)
    differences = differing_arguments(record.arguments, arguments)
    if differences:
        raise OutputDirectoryError(
            f"--output_dir {path} holds a run of `hf-roformer {command}` with other arguments: "
            f"{'; '.join(differences)}. Pass --overwrite_output_dir to replace it with this run, or give another "
            "--output_dir"
        )
    finished = holding_finished(path, announce=is_main_process)
    if finished is not None:
        return RunDirectory(path, RunStart.FINISHED, finished, earlier=record)
    return RunDirectory(path, RunStart.RESUME, earlier=record)


def begin_run_record(run: RunDirectory, command: str, arguments: dict, version: str) -> RunRecord:
    """Start the record of the run about to write into `run.path` (on the main process, once everything is checked):
    an earlier run being replaced loses the files its record lists, and only those (one line says what stays); a
    resumed run keeps the list of what it wrote before."""
    if run.earlier is not None and run.start is RunStart.NEW:  # replaced (--overwrite_output_dir)
        removed = run.earlier.remove_written()
        kept = unlisted_entries(run.path, [RUN_RECORD])
        shown = f"; kept what it did not write: {', '.join(kept[:5])}{' ...' if len(kept) > 5 else ''}" if kept else ""
        logger.info(f"replacing the earlier run in {run.path}: removed the {len(removed)} files it wrote{shown}")
        written = {}
    else:  # resumed, or run again after it finished (to evaluate): what it wrote stays listed
        written = run.earlier.written if run.earlier is not None else {}
    record = RunRecord(run.path, command, comparable(arguments), version, written)
    record.save()
    return record


__all__ = [
    "FINISHED",
    "RUN_RECORD",
    "RunDirectory",
    "RunStart",
    "begin_run_record",
    "differing_arguments",
    "prepare_run_directory",
]
