"""The run record, `hf_roformer_run.json`: which command and arguments an output directory holds a run of, and every
file that run wrote there, with its size.

A training command writes its record before anything else and adds to it as it writes. A Trainer checkpoint
directory is listed (as `checkpoint-N/`) before the Trainer starts writing it, so a run killed inside a save leaves
nothing unlisted, and with the size of each of its files once it is saved; the final outputs (model, tokenizer,
results, predictions, card, finished marker) are listed as they are written. `--overwrite_output_dir` removes exactly
what the record lists, and nothing else: files and folders the user put into the output directory stay.
"""

import contextlib
import json
import os
from pathlib import Path

from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, SaveStrategy

from ...utils.output_dirs import file_sizes, remove_listed


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


def comparable(arguments: dict) -> dict:
    """The arguments that decide a run's result, as JSON values (what the run record stores and reruns compare)."""
    kept = {key: value for key, value in arguments.items() if key not in NOT_RESULT_ARGUMENTS}
    return json.loads(json.dumps(kept, sort_keys=True, default=str))


class RunRecord:
    """The record of one run in `directory`: its command, the arguments that decide its result, and `written`, every
    file the run wrote (path relative to `directory` -> bytes; a folder it is writing, not listed file by file yet, as
    `name/` -> None). A record read from a run of an earlier hf_roformer, which listed nothing, has `written` None."""

    def __init__(self, directory, command: str, arguments: dict, version: str | None, written: dict | None = None):
        self.directory = Path(directory)
        self.command, self.arguments, self.version = command, arguments, version
        self.written = written

    @classmethod
    def read(cls, directory) -> "RunRecord | None":
        """The record of `directory`, or None when it has none (or an unreadable one)."""
        try:
            data = json.loads((Path(directory) / RUN_RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        written = data.get("written")
        return cls(
            directory,
            data.get("command"),
            data.get("arguments") if isinstance(data.get("arguments"), dict) else {},
            data.get("hf_roformer_version"),
            dict(written) if isinstance(written, dict) else None,
        )

    def save(self) -> Path:
        """Write the record, atomically."""
        self.directory.mkdir(parents=True, exist_ok=True)
        record = {
            "command": self.command,
            "arguments": self.arguments,
            "hf_roformer_version": self.version,
            "written": dict(sorted((self.written or {}).items())),
        }
        staging = self.directory / f".{RUN_RECORD}.{os.getpid()}.tmp"
        staging.write_text(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(staging, self.directory / RUN_RECORD)
        return self.directory / RUN_RECORD

    def expect(self, folder: str | os.PathLike) -> None:
        """List `folder` (under `directory`) before anything is written into it, and save."""
        name = Path(folder).as_posix().rstrip("/") + "/"
        if self.written is not None and name not in self.written:
            self.written[name] = None
            self.save()

    def add(self, *paths: str | os.PathLike) -> None:
        """List the files `paths` (under `directory`; a folder stands for every file in it) with their sizes, and
        save. (A record of an earlier hf_roformer, which listed nothing, stays so: see `RunDirectory`.)"""
        if self.written is None:
            return
        for path in paths:
            path = self.directory / path
            if path.is_dir() and not path.is_symlink():
                name = path.relative_to(self.directory).as_posix()
                self.written.pop(name + "/", None)
                self.written |= {f"{name}/{inside}": size for inside, size in file_sizes(path).items()}
            elif path.exists():
                self.written[path.relative_to(self.directory).as_posix()] = path.stat().st_size
        self.save()

    @contextlib.contextmanager
    def writing(self, folder: str | os.PathLike = "."):
        """Within it, the run writes into `folder` (under `directory`): every file that appears or changes there is
        listed when it ends, also when it ends with an error or Ctrl-C."""
        root = self.directory / folder
        before = _file_states(root)
        try:
            yield
        finally:
            after = _file_states(root)
            changed = [name for name, state in after.items() if before.get(name) != state]
            self.add(*(Path(folder) / name for name in changed))

    def forget_missing(self) -> None:
        """Drop what is no longer there (checkpoints the Trainer rotated out) from the list, and save."""
        if self.written is None:
            return
        self.written = {
            name: size for name, size in self.written.items() if (self.directory / name.rstrip("/")).exists()
        }
        self.save()

    def remove_written(self) -> list[str]:
        """Remove every file and folder the record lists (and folders left empty by that), never anything else; the
        record itself is rewritten by the run that replaces this one. Returns what was removed."""
        return remove_listed(self.directory, [name for name in self.written or {} if name != RUN_RECORD])


def _file_states(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` -> (size, modification time in ns)."""
    if not folder.is_dir():
        return {}
    return {name: _state(folder / name) for name in file_sizes(folder)}


def _state(path: Path) -> tuple[int, int]:
    status = path.lstat()
    return status.st_size, status.st_mtime_ns


class ListCheckpoints(TrainerCallback):
    """Lists each checkpoint directory the Trainer writes in `record` (None on processes that write no record):
    before the Trainer starts writing it, and with its files' sizes once saved; checkpoints the Trainer rotated out
    leave the list. Add it after every callback that changes `control.should_save`."""

    def __init__(self, record: RunRecord | None):
        self.record = record

    def _expect(self, args, state, control):
        if self.record is not None and control.should_save:
            folder = Path(args.output_dir).absolute() / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            self.record.expect(folder.relative_to(self.record.directory.absolute()))
        return control

    def on_step_end(self, args, state, control, **kwargs):
        return self._expect(args, state, control)

    def on_epoch_end(self, args, state, control, **kwargs):
        return self._expect(args, state, control)

    def on_evaluate(self, args, state, control, **kwargs):
        if args.save_strategy == SaveStrategy.BEST:  # the Trainer decides to save after this, on a new best metric
            control.should_save, wanted = True, control.should_save
            self._expect(args, state, control)
            control.should_save = wanted
        return control

    def on_save(self, args, state, control, **kwargs):
        if self.record is not None:
            folder = Path(args.output_dir).absolute() / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            self.record.add(folder.relative_to(self.record.directory.absolute()))
            self.record.forget_missing()
        return control


__all__ = ["NOT_RESULT_ARGUMENTS", "RUN_RECORD", "ListCheckpoints", "RunRecord", "comparable"]
