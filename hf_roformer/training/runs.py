"""What a training command finds in its output directory, and what it may do there.

A run writes `hf_roformer_run.json` (the command and the arguments that decide its result) before anything else, and
`finished.json` (written last, listing the files it vouches for with their sizes) when it is done. A rerun of a command
then does what was asked:

- an empty or missing directory: a new run;
- the same command with the same arguments: resumes an interrupted run from its last complete checkpoint, or, when
  the finished marker holds and every file it lists is there and whole, has nothing to do;
- other arguments: refused, naming each differing argument, unless `--overwrite_output_dir` asks to start over (which
  empties the directory: it holds an earlier output of this very command);
- anything else (files that are not an output of this command): refused whatever the flags; nothing is deleted.
"""

import json
import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from ..utils.errors import OutputDirectoryError
from ..utils.output_dirs import check_apart_from_inputs, is_empty_or_missing, remove_contents
from .checkpoints import FINISHED, finished_problem, read_finished


RUN_RECORD = "hf_roformer_run.json"
# Arguments that change how a run is shown, logged, kept or uploaded, not the model it trains: a rerun may change them.
NOT_RESULT_ARGUMENTS = frozenset(
    {
        "output_dir", "overwrite_output_dir", "resume_from_checkpoint", "disable_tqdm", "report_to", "run_name",
        "project", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id", "push_to_hub", "hub_model_id",
        "hub_strategy", "hub_token", "hub_private_repo", "hub_always_push", "hub_revision", "token", "cache_dir",
        "log_level", "log_level_replica", "log_on_each_node", "logging_first_step", "logging_nan_inf_filter",
        "logging_steps", "logging_strategy", "save_total_limit", "save_on_each_node", "dataloader_num_workers",
        "dataloader_persistent_workers", "dataloader_prefetch_factor", "dataloader_pin_memory", "skip_memory_metrics",
        "local_rank", "ddp_timeout", "include_num_input_tokens_seen",
    }
)  # fmt: skip


class RunStart(Enum):
    """What a command does in its output directory."""

    NEW = "new"  # nothing there (or an earlier output replaced): start from the beginning
    RESUME = "resume"  # an interrupted run of the same arguments: continue from its last complete checkpoint
    FINISHED = "finished"  # the same run, finished and whole: nothing to do


@dataclass(frozen=True)
class RunDirectory:
    """An output directory checked for a command: what to do there, and the finished record when there is one."""

    path: Path
    start: RunStart
    finished: dict | None = None


def comparable(arguments: dict) -> dict:
    """The arguments that decide a run's result, as JSON values (what the run record stores and reruns compare)."""
    kept = {key: value for key, value in arguments.items() if key not in NOT_RESULT_ARGUMENTS}
    return json.loads(json.dumps(kept, sort_keys=True, default=str))


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


def read_run_record(directory: Path) -> dict | None:
    """The run record of `directory`, or None when it has none (or an unreadable one)."""
    try:
        record = json.loads((directory / RUN_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def prepare_run_directory(
    output_dir: str | os.PathLike,
    command: str,
    arguments: dict,
    inputs: dict[str, object],
    overwrite: bool = False,
    is_main_process: bool = True,
) -> RunDirectory:
    """Check `output_dir` for `command` with `arguments` before any data is read or written (see the module), and, on
    the main process, empty it when `overwrite` replaces an earlier output of the same command. `inputs` (description
    -> path or None) are what the run reads: an output equal to, inside or around one of them is refused."""
    path = Path(output_dir)
    check_apart_from_inputs(path, inputs)
    if is_empty_or_missing(path):
        return RunDirectory(path, RunStart.NEW)
    if not path.is_dir():
        raise OutputDirectoryError(f"--output_dir {path}: a file, not a directory")
    record = read_run_record(path)
    if record is None or record.get("command") != command:
        owner = f"`hf-roformer {record['command']}`" if record and isinstance(record.get("command"), str) else None
        raise OutputDirectoryError(
            f"--output_dir {path} holds files that are not an output of `hf-roformer {command}`"
            + (f" (it is an output of {owner})" if owner else "")
            + "; give another --output_dir (--overwrite_output_dir replaces only an earlier output of this command)"
        )
    if overwrite:
        if is_main_process:
            remove_contents(path)
        return RunDirectory(path, RunStart.NEW)
    differences = differing_arguments(record.get("arguments", {}), arguments)
    if differences:
        raise OutputDirectoryError(
            f"--output_dir {path} holds a run of `hf-roformer {command}` with other arguments: "
            f"{'; '.join(differences)}. Pass --overwrite_output_dir to replace it with this run, or give another "
            "--output_dir"
        )
    finished = read_finished(path)
    if finished is not None and finished_problem(path, finished) is None:
        return RunDirectory(path, RunStart.FINISHED, finished)
    return RunDirectory(path, RunStart.RESUME)


def write_run_record(output_dir: str | os.PathLike, command: str, arguments: dict, version: str) -> Path:
    """Record, before the run writes anything else, which command and arguments `output_dir` holds a run of."""
    path = Path(output_dir)
    path.mkdir(parents=True, exist_ok=True)
    record = {"command": command, "arguments": comparable(arguments), "hf_roformer_version": version}
    staging = path / f".{RUN_RECORD}.{os.getpid()}.tmp"
    staging.write_text(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(staging, path / RUN_RECORD)
    return path / RUN_RECORD


__all__ = [
    "FINISHED",
    "RUN_RECORD",
    "RunDirectory",
    "RunStart",
    "comparable",
    "differing_arguments",
    "prepare_run_directory",
    "write_run_record",
]
