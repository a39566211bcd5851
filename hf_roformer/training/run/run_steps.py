"""What a training command brings to its run: its own steps (`RunSteps`: a fine-tuning task, sentence embedding,
pre-training; `StageSteps`: one stage of pre-training), which `TrainingRun.run` and `TrainingRun.train_stage`
perform in the one order every command shares (`training_run.py`); and the lines every run prints about its
training. No command writes the order out: each fills in its steps, and the run calls them.
"""

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainingArguments
from transformers.trainer_utils import SaveStrategy

from .checkpoints import planned_steps


logger = logging.getLogger(__name__)

# What a saved model's markers vouch for (with the card and the training's results).
WEIGHTS_AND_TOKENIZER = ("config.json", "model.safetensors", "tokenizer_config.json")


@dataclass(frozen=True)
class Phases:
    """What a run does; all three unless the command line names some."""

    train: bool = True
    evaluate: bool = True
    predict: bool = True


@dataclass
class Training:
    """What a run's training did: its `trainer` (None when every stage was finished before), whether a step was
    `trained` (then the card and the finished marker are written), and `written`: the outputs the training left
    complete in the output directory, which the closing line names and a rerun after a later Ctrl-C uses without
    training again (none for a run whose stages keep markers of their own)."""

    trainer: object | None
    trained: bool
    written: list[str] = field(default_factory=list)


class RunSteps:
    """A training command's own part of its run. `TrainingRun.run(steps, ...)` calls each hook once, in this order,
    after checking the output directory against `inputs()` (and finding it finished: nothing to do):

    1. `read(run)`: the data, tokenizer and options, read and checked; nothing is written yet. A training whose
       checkpoints go into the output directory (`checkpoints_in_output_dir`) sets `train_examples` (the examples of
       an epoch), from which the run finds whether that training is already done;
    2. `build(run, checkpoint, finished)`: the model, to resume from `checkpoint` (None: from the start), or from
       `finished.model` when the training is already done;
    3. the run record is written; `describe(run, checkpoint, finished)` says what will happen;
    4. within `around_training(run)`: `trainer(run)` (built with `run.trainer`) trains when `phases.train`, and the
       model is saved, vouched for with `model_files`; or `train_stages(run)` trains each stage in its own directory
       (`run.train_stage`), where checkpoints are not in the output directory;
    5. `score(run, training)`: evaluation and predictions (their metrics and the files written); when a step was
       trained, `write_card(training, metrics)` and the finished marker (`finished_record`) last;
    6. `report(run, training, metrics)` on the main process; then, with `push_to_hub` and a step trained in the output
       directory, the run uploads it and the card `write_card` writes (`read` checks first that the Hub can take it).

    `command` and `arguments` name the run in its record (a rerun with other arguments is refused)."""

    command: str
    arguments: dict
    phases: Phases = Phases()
    model_files: tuple[str, ...] = WEIGHTS_AND_TOKENIZER
    checkpoints_in_output_dir: bool = True
    train_examples: int = 0
    # The closing line's words: the model trained and the data it was trained on.
    model_name: str = ""
    description: str = ""

    def inputs(self) -> dict[str, object]:
        """The local files and directories the run reads (description -> path or None): the output directory must
        stay apart from them."""
        return {}

    def read(self, run) -> None:
        """Read and check everything the run needs before its model, writing nothing."""

    def build(self, run, checkpoint: Path | None, finished) -> None:
        """Build the model (`finished`: a `FinishedTraining` whose model is used as it is, or None)."""

    def describe(self, run, checkpoint: Path | None, finished) -> None:
        """Say what the run will do (its summary), once its record is written."""

    def around_training(self, run) -> contextlib.AbstractContextManager:
        """A context around training, scoring and the final writes (default: none)."""
        return contextlib.nullcontext()

    def trainer(self, run):
        """The Trainer, built with `run.trainer` (where checkpoints go into the output directory)."""
        raise NotImplementedError(f"{type(self).__name__} trains in the output directory but builds no Trainer")

    def train_stages(self, run) -> Training:
        """Train every stage with `run.train_stage` (where checkpoints are not in the output directory)."""
        raise NotImplementedError(f"{type(self).__name__} trains in stages but names none")

    def score(self, run, training: Training) -> tuple[dict[str, float], list[str]]:
        """Evaluate and predict as `phases` asks: the metrics and the names of the files written."""
        return {}, []

    def write_card(self, training: Training, metrics: dict) -> Path:
        """Write the model card (README.md) into the output directory and return its path."""
        raise NotImplementedError(f"{type(self).__name__} writes no model card")

    def finished_record(self, training: Training, metrics: dict) -> dict:
        """The record the finished marker keeps."""
        return {"command": self.command, "global_step": training.trainer.state.global_step, "metrics": metrics}

    def report(self, run, training: Training, metrics: dict) -> None:
        """The closing line (main process only): what happened and where everything went."""
        report_end(self.model_name, self.description, training.trainer, self.phases, training.trained,
                   training.written)  # fmt: skip


class StageSteps:
    """One stage of a run trained in a directory of its own (pre-training's stages). `TrainingRun.train_stage` skips
    it when its finished marker there holds (`finished_earlier`), else builds its `trainer`, resumes it from the
    stage's last complete checkpoint, trains and evaluates it, `save`s its outputs and writes its marker
    (`finished_record`) last; `trained` gives what the stage returns."""

    directory: Path

    def finished_earlier(self, done: dict):
        """The stage's result when an earlier run finished it (`done`: its marker's record)."""
        raise NotImplementedError

    def trainer(self, run):
        """The stage's Trainer, built with `run.trainer`."""
        raise NotImplementedError

    def describe(self, run, trainer, checkpoint: Path | None) -> None:
        """Say what the stage will train (and where it resumes)."""

    def save(self, run, trainer, metrics: dict) -> list[str]:
        """Write the stage's outputs into its directory (every process calls it); the files its marker vouches for."""
        raise NotImplementedError

    def finished_record(self, metrics: dict) -> dict:
        """The record the stage's finished marker keeps."""
        return {"metrics": metrics}

    def trained(self, run, trainer, metrics: dict):
        """The stage's result once trained and saved."""
        raise NotImplementedError


def describe_training(training_args: TrainingArguments, train_examples: int, checkpoint: Path | None) -> list[str]:
    """The summary's lines about training: steps and batch, where checkpoints go, where it resumes."""
    steps, epochs = planned_steps(training_args, train_examples)
    processes = max(training_args.world_size, 1)
    batch = f"batch {training_args.per_device_train_batch_size} x {counted(processes, 'process', 'processes')}"
    if training_args.gradient_accumulation_steps > 1:
        batch += f" x {training_args.gradient_accumulation_steps} accumulated"
    saving = training_args.save_strategy != SaveStrategy.NO
    kept = f", checkpoints in {training_args.output_dir}/" if saving else ", no checkpoints (--save_strategy no)"
    lines = [f"training: {counted(steps, 'step')} ({epochs:g} epoch{'' if epochs == 1 else 's'}, {batch}){kept}"]
    if checkpoint is not None:
        explicit = training_args.resume_from_checkpoint is not None
        source = "as --resume_from_checkpoint asks" if explicit else "the last complete checkpoint"
        lines.append(f"resuming from {checkpoint}, {source}")
    return lines


def describe_finished_training(finished, steps: int, phases: Phases) -> str:
    """The line saying that the training (`finished`, a `FinishedTraining`) is already done, where, and what the run
    does with its model instead."""
    if finished.requested is not None:
        done = (
            f"--resume_from_checkpoint {finished.requested}: the checkpoint holds the finished training "
            f"({steps:,} of {finished.max_steps:,} steps);"
        )
    else:
        done = f"training finished in an earlier run ({counted(steps, 'step')}):"
    uses = " and ".join(
        name for name, wanted in (("evaluating", phases.evaluate), ("predicting", phases.predict)) if wanted
    )
    instead = f"{uses} with its model" if uses else "saving its model"
    return f"{done} {instead} ({finished.model}), without training again"


def report_end(model: str, description: str, trainer, phases: Phases, trained: bool, written: list):
    """The closing line of a run of `model` on the data `description` names: what happened and where everything went,
    and nothing that did not happen."""
    output_dir = trainer.args.output_dir
    files = ", ".join(written)
    if trained:
        logger.info(
            f"fine-tuned {model} on {description} ({counted(trainer.state.global_step, 'step')}); in {output_dir}/: "
            f"{files}"
        )
    elif phases.train:
        logger.warning(f"no training step ran; no model card written to {output_dir}/")
    else:
        done = " and ".join(
            name for name, wanted in (("evaluated", phases.evaluate), ("predicted", phases.predict)) if wanted
        )
        logger.info(
            f"{done} {model} on {description} without training (--do_train not given); in {output_dir}/: {files}; no "
            "model card written"
        )


def metric_line(prefix: str, metrics: dict[str, float]) -> str:
    """`eval: accuracy 0.8700, f1 0.8650, loss 0.3120` from the metrics of one evaluation."""
    shown = {
        name.removeprefix(prefix + "_"): value
        for name, value in metrics.items()
        if name.startswith(prefix + "_")
        and not name.endswith(("_runtime", "_per_second", "epoch", "_preparation_time"))
    }
    return f"{prefix}: " + ", ".join(f"{name} {value:.4f}" for name, value in shown.items())


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 step`, `75 steps`: `count` and `noun`, in the plural (default: with an s) unless one."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {plural or noun + 's'}"


__all__ = [
    "WEIGHTS_AND_TOKENIZER",
    "Phases",
    "RunSteps",
    "StageSteps",
    "Training",
    "counted",
    "describe_finished_training",
    "describe_training",
    "metric_line",
    "report_end",
]
