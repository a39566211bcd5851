"""Resuming after a crash: which Trainer checkpoints are complete, where a training resumes (`resume_point`), when
it is already done (`finished_training`, against the steps it plans: `planned_steps`), when a run is finished.

A process killed while the Trainer saves leaves a `checkpoint-N/` without `trainer_state.json` (written last), without
weights or optimizer state, or with a truncated file. transformers' `get_last_checkpoint` returns the highest-numbered
directory whatever it holds, so a rerun fails on it (or resumes without its optimizer). Here a checkpoint counts only
when every file a resume reads is present and whole; incomplete ones are skipped with a warning naming them, and left
in place (the Trainer rewrites them when it reaches their step again).

A run (or a pre-training stage) is finished only when its marker file, written last and atomically, exists and every
file it lists is there with the size it had: outputs found without it are from an interrupted run, and a marker whose
files are gone or cut (`holding_finished`) is not trusted.

`SaveAfterEpochEnd` fixes what made a resumed run differ from an uninterrupted one when a checkpoint falls on the last
step of an epoch: the Trainer saves that checkpoint before the epoch-end evaluation, whose data loader draws from the
global torch generator and whose metrics enter the log history. A run resumed from it starts the next epoch without
that evaluation, with the generator state from before it: different dropout masks (|dW| ~1e-2 after a few epochs), no
record of that epoch's metrics, and, with `load_best_model_at_end`, possibly another best checkpoint.
"""

import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainerCallback, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, SaveStrategy

from ...utils.errors import UsageError
from .engine_checkpoints import engine_checkpoint_problem, holds_engine_state
from .file_integrity import safetensors_problem, torch_file_problem


logger = logging.getLogger(__name__)

FINISHED = "finished.json"
TRAINED = "trained.json"  # the training phase's marker: its model and state are whole, whatever comes after failed
TRAINER_STATE = "trainer_state.json"
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors", "pytorch_model.bin")


def weights_problem(directory: Path) -> str | None:
    """Why a checkpoint's weights are missing or incomplete, or None."""
    for name in WEIGHTS:
        path = directory / name
        if not path.exists():
            continue
        if name.endswith(".index.json"):
            try:
                shards = set(json.loads(path.read_text())["weight_map"].values())
            except (OSError, ValueError, KeyError) as error:
                return f"{name} is unreadable ({error})"
            for shard in sorted(shards):
                problem = safetensors_problem(directory / shard) if (directory / shard).exists() else f"no {shard}"
                if problem:
                    return problem
            return None
        return safetensors_problem(path) if name.endswith(".safetensors") else torch_file_problem(path)
    if holds_engine_state(directory):
        return None  # sharded FSDP / DeepSpeed layouts: `engine_checkpoint_problem` checks them
    return "no weights"


def checkpoint_problem(directory: str | Path, world_size: int = 1) -> str | None:
    """What a resume from `directory` would lack (None when it is complete): a readable `trainer_state.json`, whole
    weights, optimizer and scheduler state, and the RNG state of each of the `world_size` processes."""
    directory = Path(directory)
    try:
        json.loads((directory / TRAINER_STATE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"no {TRAINER_STATE}"
    except (OSError, ValueError) as error:
        return f"{TRAINER_STATE} is unreadable ({error})"
    problem = weights_problem(directory) or engine_checkpoint_problem(directory)
    if problem:
        return problem
    if holds_engine_state(directory):  # the engine saved the optimizer (DeepSpeed: and the scheduler)
        required = () if any(directory.glob("global_step*")) else ("scheduler.pt",)
    else:
        required = ("optimizer.pt", "scheduler.pt")
    for name in required:
        if not (directory / name).exists():
            return f"no {name} (optimizer state)" if name == "optimizer.pt" else f"no {name}"
        problem = torch_file_problem(directory / name)
        if problem:
            return problem
    names = ["rng_state.pth"] if world_size <= 1 else [f"rng_state_{rank}.pth" for rank in range(world_size)]
    for name in names:
        if not (directory / name).exists():
            return f"no {name} (random generator state)"
        problem = torch_file_problem(directory / name)
        if problem:
            return problem
    return None


def checkpoint_directories(output_dir: str | Path) -> list[Path]:
    """The `checkpoint-N` directories of a Trainer output directory, highest step first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = []
    for child in output_dir.iterdir():
        prefix, _, step = child.name.partition("-")
        if prefix == PREFIX_CHECKPOINT_DIR and step.isdigit() and child.is_dir():
            found.append((int(step), child))
    return [path for _, path in sorted(found, reverse=True)]


def last_complete_checkpoint(output_dir: str | Path, world_size: int = 1, warn: bool = True) -> Path | None:
    """The highest-step complete checkpoint of `output_dir` (None if there is none); each incomplete one with a
    higher step is skipped with a warning naming it and what it lacks."""
    for directory in checkpoint_directories(output_dir):
        problem = checkpoint_problem(directory, world_size)
        if problem is None:
            return directory
        if warn:
            logger.warning(f"Skipping the incomplete checkpoint {directory} ({problem}); it was interrupted.")
    return None


def resume_point(
    directory: str | Path, world_size: int = 1, requested: str | None = None, earlier_run: bool = True
) -> Path | None:
    """Where a Trainer writing into `directory` resumes: the checkpoint `requested` (`--resume_from_checkpoint`, which
    must be complete: a `UsageError` otherwise), else, when an earlier run of the same arguments was interrupted there
    (`earlier_run`), its last complete checkpoint; None to start from the beginning."""
    if requested is not None:
        problem = checkpoint_problem(requested, world_size)
        if problem is not None:
            raise UsageError(f"--resume_from_checkpoint {requested}: the checkpoint is incomplete ({problem})")
        return Path(requested)
    return last_complete_checkpoint(directory, world_size) if earlier_run else None


def write_finished(directory: str | Path, record: dict, files: list[str] | None = None, name: str = FINISHED) -> Path:
    """Write the marker `name` that says `directory` holds a finished run (or stage; `TRAINED`: a finished training
    phase), atomically and last. `files` (paths relative to `directory`) are the outputs it vouches for: their sizes
    are recorded, and the marker counts only while they are all there and whole (`finished_problem`)."""
    directory = Path(directory)
    record = dict(record)
    if files is not None:
        record["files"] = {file: (directory / file).stat().st_size for file in sorted(files)}
    path = directory / name
    staging = path.with_name(f".{name}.{os.getpid()}.tmp")
    staging.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(staging, path)
    return path


def read_finished(directory: str | Path, name: str = FINISHED) -> dict | None:
    """The record of the marker `name` (a finished run) in `directory`, or None when it has no (readable) marker."""
    try:
        record = json.loads((Path(directory) / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def finished_problem(directory: str | Path, record: dict) -> str | None:
    """Why the outputs a finished marker vouches for are not all there and whole (None when they are): a listed file
    missing, of another size, or a weights file that does not read as complete."""
    directory = Path(directory)
    for name, size in (record.get("files") or {}).items():
        path = directory / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has changed size ({path.stat().st_size} bytes, {size} when the run finished)"
        if name.endswith(".safetensors"):
            problem = safetensors_problem(path)
            if problem:
                return problem
    return None


def holding_finished(directory: str | Path, announce: bool = True, name: str = FINISHED) -> dict | None:
    """The record of the marker `name` of `directory` when every file it vouches for is there and whole, else None:
    a marker that no longer holds is not trusted, and (when `announce`) one warning names what is wrong with it."""
    record = read_finished(directory, name)
    if record is None:
        return None
    problem = finished_problem(directory, record)
    if problem is None:
        return record
    if announce:
        logger.warning(f"{Path(directory) / name} no longer holds ({problem}): what it vouched for is made again")
    return None


def trained_steps(checkpoint: Path) -> int:
    """The optimizer steps the training saved in `checkpoint` had run (its `global_step`)."""
    return int(json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8")).get("global_step", 0))


def finished_training_checkpoint(checkpoint: Path | None, max_steps: int, load_best_model_at_end: bool) -> Path | None:
    """The directory holding the final model of a training of `max_steps` steps that reached its last step in
    `checkpoint` (its `global_step` is `max_steps`), in full weights `from_pretrained` reads: the checkpoint itself, or
    with `load_best_model_at_end` the best one it names; None when training is not over there (or the weights are
    sharded by an engine). Resuming the Trainer from such a checkpoint would run one step past the end when the last
    step falls inside an epoch (transformers 5.24 skips the epoch's trained batches but not the stop)."""
    if checkpoint is None:
        return None
    state = json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8"))
    if state.get("global_step", 0) < max_steps:
        return None
    final = checkpoint
    if load_best_model_at_end and state.get("best_model_checkpoint"):
        final = checkpoint.parent / Path(state["best_model_checkpoint"]).name
    return final if (final / "model.safetensors").exists() and weights_problem(final) is None else None


def planned_steps(training_args: TrainingArguments, train_examples: int) -> tuple[int, float]:
    """(optimizer steps, epochs) the Trainer will run for `train_examples` examples."""
    per_step = training_args.per_device_train_batch_size * max(training_args.world_size, 1)
    if training_args.dataloader_drop_last:
        batches = train_examples // per_step
    else:
        batches = math.ceil(train_examples / per_step)
    steps_per_epoch = max(batches // training_args.gradient_accumulation_steps, 1)
    if training_args.max_steps > 0:
        return training_args.max_steps, training_args.max_steps / steps_per_epoch
    return math.ceil(training_args.num_train_epochs * steps_per_epoch), training_args.num_train_epochs


@dataclass(frozen=True)
class FinishedTraining:
    """A training phase of `max_steps` steps already done: by an earlier run of the same arguments (which stopped
    later, in its evaluation or predictions), or up to its last step in the checkpoint `requested` with
    `--resume_from_checkpoint`. Its final model is in `model` (a directory `from_pretrained` reads), the Trainer's state
    in `state`; `outputs_whole` when the output directory already holds them all (its `trained.json` holds), else they
    come from the final checkpoint and are to be written again."""

    model: Path
    state: Path
    outputs_whole: bool
    max_steps: int
    requested: Path | None = None


def finished_training(
    output_dir: Path,
    checkpoint: Path | None,
    training_args: TrainingArguments,
    train_examples: int,
    resuming: bool,
    announce: bool = True,
) -> FinishedTraining | None:
    """The training that `training_args` plan for `train_examples` examples (`max_steps` steps), already done (None:
    train, from `checkpoint`, the resume point): by an earlier, interrupted run of these arguments (`resuming`), its
    outputs in `output_dir` vouched for by `trained.json`; or up to its last step in `checkpoint` (this run's, or the
    one `--resume_from_checkpoint` names), where resuming would train past the end. A checkpoint past `max_steps` is
    refused (`UsageError`): its model holds more training than this run asks for."""
    max_steps = planned_steps(training_args, train_examples)[0]
    if resuming and holding_finished(output_dir, announce=announce, name=TRAINED) is not None:
        return FinishedTraining(output_dir, output_dir / TRAINER_STATE, outputs_whole=True, max_steps=max_steps)
    if checkpoint is None:
        return None
    requested = checkpoint if training_args.resume_from_checkpoint is not None else None
    steps = trained_steps(checkpoint)
    if steps > max_steps:
        named = f"--resume_from_checkpoint {checkpoint}" if requested is not None else str(checkpoint)
        raise UsageError(
            f"{named}: the checkpoint has trained {steps} steps, more than the {max_steps} of this run; resume "
            f"from an earlier checkpoint, or train for {steps} steps or more"
        )
    final = finished_training_checkpoint(checkpoint, max_steps, training_args.load_best_model_at_end)
    if final is None:
        return None
    return FinishedTraining(
        final, checkpoint / TRAINER_STATE, outputs_whole=False, max_steps=max_steps, requested=requested
    )


class SaveAfterEpochEnd(TrainerCallback):
    """Moves a checkpoint that the step schedule (or the end of training) asks for on the last step of an epoch to the
    end of that epoch, after its evaluation and logging, so the checkpoint holds the state the next epoch starts from.
    Add it to every Trainer whose runs may be resumed."""

    def __init__(self):
        self.deferred = False

    def on_step_end(self, args, state, control, **kwargs):
        epoch_ends = state.epoch is not None and float(state.epoch).is_integer()
        if control.should_save and args.save_strategy != SaveStrategy.BEST:
            if epoch_ends or control.should_training_stop:
                control.should_save = False
                self.deferred = True
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.deferred:
            control.should_save = True
            self.deferred = False
        return control
