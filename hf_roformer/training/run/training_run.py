"""The run every training command shares (`finetune` with each of its tasks, sentence embedding, `pretrain`, the
demo): its output directory and the rules for running it again, its record, the Trainer, Ctrl-C and resume, the
final save, the model card and the finished marker, and the order of it all, written once here (`TrainingRun.run`).
A command supplies only what is its own, as `RunSteps` (`run_steps.py`): its data, its model, its metrics and
predictions (a fine-tuning task: `tasks/`), its stages (`StageSteps`, performed by `TrainingRun.train_stage`).

`TrainingRun.run(steps, ...)` works in this order, so that a mistake stops it before anything is read or written:

1. the output directory is checked (`open`, `run_directory.py`): never an input; an earlier run of other arguments is
   refused unless `overwrite`; the same arguments resume an interrupted run or find it finished (`nothing_to_do()`);
2. the command reads and checks its data (`steps.read`); a training whose checkpoints go into the output directory
   resumes from the last complete one (`resume_point`) unless it is already done (`finished_training`): a training
   that an interrupted earlier run finished, or whose last step the checkpoint `--resume_from_checkpoint` names
   holds, is not resumed, its model is used as it is; a checkpoint past the training's end is refused;
3. the command builds its model (`steps.build`); `begin()` replaces an earlier run's files (only those its record
   lists) and writes the run record; the command says what will happen (`steps.describe`);
4. the Trainer (`trainer(...)`: checkpoints saved after an epoch's evaluation and listed in the record, progress as
   lines, FSDP or DeepSpeed as configured) trains (`train_phase`: Ctrl-C becomes `RunInterrupted`, saying where a
   rerun resumes), the model is saved and vouched for by `trained.json`; or each stage trains in its own directory
   (`train_stage`), with a finished marker of its own;
5. the command evaluates and predicts (`steps.score`), Ctrl-C then saying what is complete (`after_training`); the
   model card and the finished marker are written last, each listed in the record; the closing lines; with
   `--push_to_hub`, the upload of the output directory and its card (`cards.publish`; the command checks that the Hub
   can take it when it reads its data). Commands that train in stages (pre-training) upload nothing.

Messages go to the `hf_roformer` logger, on the main process only.
"""

import contextlib
import logging
import os
import tempfile
from pathlib import Path

from transformers import TrainerState, TrainingArguments

from ... import __version__
from ...utils.errors import OutputDirectoryError, RunInterrupted, UsageError
from .cards import publish
from .checkpoints import (
    TRAINED,
    FinishedTraining,
    SaveAfterEpochEnd,
    finished_training,
    holding_finished,
    last_complete_checkpoint,
    resume_point,
    write_finished,
)
from .distributed import prepare_distributed_training, save_full_model
from .progress import show_progress_as_lines
from .run_directory import RunDirectory, RunStart, begin_run_record, prepare_run_directory
from .run_record import RUN_RECORD, ListCheckpoints, RunRecord
from .run_steps import (
    RunSteps,
    StageSteps,
    Training,
    describe_finished_training,
    describe_training,
    metric_line,
)


logger = logging.getLogger(__name__)


class TrainingRun:
    """One run of command `command` (e.g. "finetune glue") in `training_args.output_dir`, whose `directory` has been
    checked (`open` checks it): see the module. `arguments` are what decide its result (recorded)."""

    def __init__(self, command: str, arguments: dict, training_args: TrainingArguments, directory: RunDirectory):
        self.command, self.arguments, self.args = command, arguments, training_args
        self.directory = directory
        self.output_dir = directory.path
        self.main_process = training_args.process_index == 0
        self.record: RunRecord | None = None  # on the main process, once `begin` has written it

    @classmethod
    def open(
        cls,
        command: str,
        arguments: dict,
        training_args: TrainingArguments,
        inputs: dict[str, object],
        overwrite: bool = False,
    ) -> "TrainingRun":
        """The run, its output directory checked before anything is read or written (the main process first):
        `inputs` are the local paths it reads (description -> path or None: the output directory must stay apart from
        them); `overwrite` replaces an earlier run of other `arguments` (a rerun with them is refused otherwise).
        Processes launched together that would each train alone (and race in one output directory) are refused."""
        check_processes_train_together(training_args)
        with training_args.main_process_first(local=False, desc="output directory check"):
            directory = prepare_run_directory(
                training_args.output_dir, command, arguments, inputs, overwrite, training_args.process_index == 0
            )
        return cls(command, arguments, training_args, directory)

    @classmethod
    def run(cls, steps: RunSteps, training_args: TrainingArguments, overwrite: bool = False) -> dict[str, float]:
        """Perform the command `steps` stands for, in the order of every training command (the module's), and return
        its metrics. `overwrite` replaces an earlier run of other arguments in the output directory."""
        run = cls.open(steps.command, steps.arguments, training_args, steps.inputs(), overwrite)
        trains = steps.phases.train
        if run.finished is not None and trains:
            return run.nothing_to_do()
        resumes = trains and steps.checkpoints_in_output_dir
        checkpoint = None
        if resumes:
            checkpoint = resume_point(
                run.output_dir, training_args.world_size, training_args.resume_from_checkpoint, run.resumes_earlier_run
            )
        steps.read(run)
        finished = None
        if resumes:  # before the model: a training already done gives the weights, and nothing resumes
            finished = finished_training(
                run.output_dir,
                checkpoint,
                training_args,
                steps.train_examples,
                run.resumes_earlier_run,
                run.main_process,
            )
            checkpoint = None if finished is not None else checkpoint
        steps.build(run, checkpoint, finished)
        run.begin(__version__)
        steps.describe(run, checkpoint, finished)
        with steps.around_training(run):
            if steps.checkpoints_in_output_dir:
                trainer = steps.trainer(run)
                written = run.train_phase(steps, trainer, checkpoint, finished) if trains else []
                training = Training(trainer, trains and trainer.state.global_step > 0, written)
            else:
                training = steps.train_stages(run)
            stops_after_training = training.trained and training.written
            guard = run.after_training(training.trainer, training.written) if stops_after_training else None
            with guard or contextlib.nullcontext():
                metrics, written = steps.score(run, training)
                training.written += written
                if training.trained:
                    run.write_card(lambda: steps.write_card(training, metrics))
                    training.written.append("model card (README.md)")
                    run.finish(steps.finished_record(training, metrics), [*steps.model_files, "README.md"])
        if run.main_process:
            steps.report(run, training, metrics)
        if training.trained and training_args.push_to_hub and steps.checkpoints_in_output_dir:
            publish(run.output_dir, training.trainer, lambda: steps.write_card(training, metrics))
        return metrics

    @property
    def finished(self) -> dict | None:
        """The record of this very run, finished with its outputs whole (nothing to do), or None."""
        return self.directory.finished if self.directory.start is RunStart.FINISHED else None

    @property
    def resumes_earlier_run(self) -> bool:
        """Whether the output directory holds an earlier run of the same arguments, which this run continues (a
        finished one stops a training run before anything resumes: `nothing_to_do`)."""
        return self.directory.start is not RunStart.NEW

    def nothing_to_do(self) -> dict[str, float]:
        """Say that the output directory holds this run, finished, with its results, and return its metrics."""
        metrics = self.finished.get("metrics", {})
        if self.main_process:
            logger.info(
                f"{self.output_dir} holds this run, finished, with the same arguments: nothing to do "
                "(--overwrite_output_dir runs it again)"
            )
            for prefix in ("eval", "test"):
                if any(name.startswith(prefix + "_") for name in metrics):
                    logger.info(metric_line(prefix, metrics))
        return metrics

    def finish_training(self, record: dict, files: list[str]) -> None:
        """Write the training phase's marker (`trained.json`) vouching for `files` (its outputs in the output
        directory), on the main process: a rerun after a later stop uses them without training again."""
        if self.main_process:
            present = [name for name in files if (self.output_dir / name).exists()]
            with self.writing():
                write_finished(self.output_dir, record, present, name=TRAINED)

    @contextlib.contextmanager
    def after_training(self, trainer, trained: list[str]):
        """Within it (evaluation, predictions, card, after a finished training whose outputs `trained` are complete),
        Ctrl-C raises `RunInterrupted` saying so; a rerun then uses them without training again."""
        try:
            yield
        except RunInterrupted:
            raise
        except KeyboardInterrupt as interrupt:
            state = trainer.state
            raise RunInterrupted(self.output_dir, state.global_step, state.max_steps, trained=trained) from interrupt

    def begin(self, version: str) -> None:
        """Start writing: the files an earlier run being replaced wrote are removed (only those), and the run record is
        written; the other processes wait for it."""
        with self.args.main_process_first(local=False, desc="run record"):
            if self.main_process:
                self.record = begin_run_record(self.directory, self.command, self.arguments, version)

    def trainer(self, trainer_class, *, args: TrainingArguments | None = None, callbacks=(), **kwargs):
        """`trainer_class(args=..., callbacks=..., **kwargs)` (args: the run's) set up for this run: checkpoints that
        fall on an epoch's end saved after its evaluation, each listed in the run record before it is written,
        progress printed as lines, FSDP and DeepSpeed applied as configured. Pass every argument by keyword."""
        if self.main_process and self.record is None:  # its checkpoints would be missing from the run record
            raise RuntimeError("TrainingRun.trainer() before begin(): a run's steps are performed by TrainingRun.run")
        callbacks = [*callbacks, SaveAfterEpochEnd(), ListCheckpoints(self.record)]  # after any that decides saves
        trainer = trainer_class(args=args or self.args, callbacks=callbacks, **kwargs)
        show_progress_as_lines(trainer)
        prepare_distributed_training(trainer)
        return trainer

    def train(self, trainer, checkpoint: Path | None = None):
        """`trainer.train()` from `checkpoint` (None: from the start) and its result; Ctrl-C raises `RunInterrupted`
        naming the checkpoint a rerun of the same command resumes from."""
        try:
            return trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
        except KeyboardInterrupt as interrupt:
            output_dir = Path(trainer.args.output_dir)
            last = last_complete_checkpoint(output_dir, trainer.args.world_size, warn=False)
            raise RunInterrupted(output_dir, trainer.state.global_step, trainer.state.max_steps, last) from interrupt

    def train_phase(self, steps: RunSteps, trainer, checkpoint: Path | None, finished: FinishedTraining | None):
        """Train (from `checkpoint`, None: the start) and write the model, tokenizer, training metrics and state, then
        the training marker (`trained.json`) vouching for them and the saved `steps.model_files`; or, when the
        training is already `finished` (by an earlier run of these arguments that stopped later, or in the checkpoint
        `--resume_from_checkpoint` names), take its model and state without training a step. Returns the outputs, as
        the closing line names them."""
        outputs = ["model", "tokenizer", "train_results.json", "trainer_state.json"]
        if finished is not None:
            trainer.state = TrainerState.load_from_json(str(finished.state))
            trainer.state.max_steps = finished.max_steps  # as the Trainer sets it when resuming
            if self.main_process:
                logger.info(describe_finished_training(finished, trainer.state.global_step, steps.phases))
            if finished.outputs_whole:
                return outputs
            outputs.remove("train_results.json")  # the final checkpoint holds no training metrics
        else:
            if self.main_process:
                for line in describe_training(trainer.args, steps.train_examples, checkpoint):
                    logger.info(line)
            result = self.train(trainer, checkpoint)
            self.save_metrics(trainer, "train", result.metrics)
        self.save_model(trainer)
        with self.writing():
            trainer.save_state()
        if trainer.state.global_step > 0:
            record = {"command": self.command, "global_step": trainer.state.global_step}
            self.finish_training(record, [*steps.model_files, "train_results.json", "trainer_state.json"])
        return outputs

    def train_stage(self, stage: StageSteps):
        """One stage trained in a directory of its own (`stage.directory`), in the order every stage shares: skipped
        when its finished marker there holds (`stage.finished_earlier`); else its Trainer built, resumed from the
        stage's last complete checkpoint, trained, evaluated, its outputs saved and its marker written last. Returns
        what `stage.trained` (or `stage.finished_earlier`) gives."""
        done = self.finished_stage(stage.directory)
        if done is not None:
            return stage.finished_earlier(done)
        trainer = stage.trainer(self)
        checkpoint = resume_point(stage.directory, self.args.world_size, earlier_run=self.resumes_earlier_run)
        stage.describe(self, trainer, checkpoint)
        self.train(trainer, checkpoint)
        metrics = trainer.evaluate()
        files = stage.save(self, trainer, metrics)
        self.finish(stage.finished_record(metrics), files, stage.directory)
        return stage.trained(self, trainer, metrics)

    @contextlib.contextmanager
    def writing(self, folder: str | os.PathLike | None = None):
        """Within it, the command writes outputs into `folder` (a path inside the output directory; None: the output
        directory itself): whatever appears or changes there is listed in the run record (on the main process)."""
        if self.record is None:
            yield
            return
        inside = Path(folder or self.output_dir).absolute().relative_to(self.output_dir.absolute())
        with self.record.writing(inside):
            yield

    def claim(self, *names: str, folder: str | os.PathLike | None = None) -> None:
        """Refuse, before writing them, output files (`names` in `folder`, default the output directory) that are
        there already and that no run of this command wrote (the run record does not list them): the user's own
        files are never replaced. On the main process; the others write nothing."""
        if self.record is None:
            return
        directory = Path(folder or self.output_dir)
        inside = directory.absolute().relative_to(self.output_dir.absolute())
        for name in names:
            if (directory / name).exists() and (inside / name).as_posix() not in (self.record.written or {}):
                raise OutputDirectoryError(
                    f"{directory / name}: already there and not written by `hf-roformer {self.command}` (the run "
                    f"record {RUN_RECORD} does not list it), so this run will not replace it; move it elsewhere, or "
                    "give another --output_dir"
                )

    def save_metrics(self, trainer, split: str, metrics: dict) -> None:
        """`trainer.save_metrics(split, metrics)` (`{split}_results.json` and `all_results.json`), listed in the
        record, after `claim`ing both names."""
        self.claim(f"{split}_results.json", "all_results.json")
        with self.writing():
            trainer.save_metrics(split, metrics)

    def write_new_files(self, write) -> list[str]:
        """Call `write(folder)` (which writes files into `folder` and returns their names) on the main process, into
        a folder of its own inside the output directory, then move those files into the output directory once
        `claim`ed: a name the user's own file has stops the run, and that file stays as it was. Returns the names."""
        if not self.main_process:
            return []
        with tempfile.TemporaryDirectory(prefix=".writing-", dir=self.output_dir) as staging:
            names = write(Path(staging))
            self.claim(*names)
            with self.writing():
                for name in names:
                    os.replace(Path(staging) / name, self.output_dir / name)
        return names

    def save_model(self, trainer, directory: str | os.PathLike | None = None) -> None:
        """The trained model (and the Trainer's tokenizer) written whole to `directory` (default: the output
        directory); every process calls it (sharded weights are gathered), the main one writes."""
        with self.writing(directory):
            save_full_model(trainer, None if directory is None else str(directory))

    def write_card(self, write) -> Path | None:
        """Call `write()` (which writes the model card, README.md, and returns its path) on the main process, after
        `claim`ing README.md."""
        if not self.main_process:
            return None
        self.claim("README.md")
        with self.writing():
            return write()

    def finished_stage(self, directory: str | os.PathLike) -> dict | None:
        """The finished marker of a stage written into `directory`, when every file it lists is whole (else None,
        with one line saying that the stage is done again)."""
        return holding_finished(directory, announce=self.main_process)

    def finish(self, record: dict, files: list[str], directory: str | os.PathLike | None = None) -> None:
        """Write the finished marker (of the run, or of the stage in `directory`) vouching for `files` (relative to its
        directory) with their sizes, last, on the main process."""
        if not self.main_process:
            return
        directory = Path(directory or self.output_dir)
        with self.writing(directory):
            write_finished(directory, record, [name for name in files if (directory / name).exists()])


def check_processes_train_together(training_args: TrainingArguments) -> None:
    """Refuse a launch of several processes (`torchrun`, `accelerate launch`) that the Trainer would run as
    independent single-process runs: on a machine without a GPU, accelerate joins CPU processes only when asked."""
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and training_args.world_size == 1:
        raise UsageError(
            f"{launched} processes were launched (WORLD_SIZE={launched}), but each would train alone and all would "
            f"write {training_args.output_dir}; without a GPU, pass --use_cpu so that they train together (gloo)"
        )


__all__ = ["FinishedTraining", "TrainingRun", "check_processes_train_together"]
