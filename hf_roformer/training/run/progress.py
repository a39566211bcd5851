"""Training progress as short lines: every logged loss and every evaluation during training, e.g.
`step 40/120 (epoch 1): loss 0.6120, learning rate 1.6e-05` and `step 40/120 (epoch 1): eval accuracy 0.8125, ...`.

transformers' own callbacks print the raw log dictionaries (with runtimes and rates as strings); these print the
numbers a person reads. On a terminal the lines go above the progress bar (`tqdm.write`); elsewhere (files, pipes,
CI) they are `hf_roformer` log records, and there is no bar.
"""

import logging

from transformers import PrinterCallback, ProgressCallback, TrainerCallback


logger = logging.getLogger(__name__)
NOT_SHOWN = ("_runtime", "_per_second", "epoch", "total_flos", "grad_norm")


def progress_line(logs: dict, state) -> str | None:
    """The line for one log record of the Trainer (None for what is not worth a line: the end-of-training summary
    record, which the run reports itself)."""
    where = f"step {state.global_step}/{state.max_steps}"
    if state.epoch is not None:
        where += f" (epoch {state.epoch:g})" if float(state.epoch).is_integer() else f" (epoch {state.epoch:.2f})"
    evaluated = {key: value for key, value in logs.items() if key.startswith("eval_") and not key.endswith(NOT_SHOWN)}
    if evaluated:
        scores = ", ".join(f"{key.removeprefix('eval_')} {value:.4f}" for key, value in evaluated.items())
        return f"{where}: eval {scores}"
    if "loss" in logs:
        rate = f", learning rate {logs['learning_rate']:.2e}" if "learning_rate" in logs else ""
        return f"{where}: loss {logs['loss']:.4f}{rate}"
    return None


class ProgressLines(TrainerCallback):
    """Progress as log lines during training, where no progress bar is shown (the evaluations after training are
    reported by the run itself)."""

    def __init__(self):
        self.training = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.training = True

    def on_train_end(self, args, state, control, **kwargs):
        self.training = False

    def on_log(self, args, state, control, logs=None, **kwargs):
        line = progress_line(logs or {}, state) if self.training and state.is_world_process_zero else None
        if line:
            logger.info(line)


class ProgressBarLines(ProgressCallback):
    """transformers' progress bars, with progress lines written above the training bar instead of log dictionaries."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and self.training_bar is not None:
            line = progress_line(logs or {}, state)
            if line:
                self.training_bar.write(line)


def show_progress_as_lines(trainer) -> None:
    """Replace the Trainer's log printing (a bar printing dictionaries, or dictionaries alone) with progress lines."""
    for callback in (PrinterCallback, ProgressCallback):
        trainer.remove_callback(callback)
    trainer.add_callback(ProgressLines() if trainer.args.disable_tqdm else ProgressBarLines())


__all__ = ["ProgressBarLines", "ProgressLines", "progress_line", "show_progress_as_lines"]
