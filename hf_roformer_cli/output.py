"""What the command line prints: hf_roformer's own messages as plain lines, the libraries' chatter off, and every
foreseeable failure as one line `error: ...` (exit 1) or, for Ctrl-C, one line saying where the run stopped and how to
resume (exit 130). Tracebacks only for failures nobody foresaw, or on request: `HF_ROFORMER_TRACEBACK=1`.
"""

import logging
import os
import sys

from .parsing import TRACEBACK_VARIABLE


INTERRUPTED_EXIT_STATUS = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
# Loggers of optional libraries that print at import time about kernels a CPU build lacks (torchao's CUDA
# extensions, and torch's notice about the types torchao registers), before any command has started.
IMPORT_TIME_CHATTER = ("torchao", "torch.utils._pytree")


class _Levels(logging.Filter):
    """Let through records from `low` up to (not including) `high`."""

    def __init__(self, low: int, high: int):
        super().__init__()
        self.low, self.high = low, high

    def filter(self, record: logging.LogRecord) -> bool:
        return self.low <= record.levelno < self.high


def configure_output() -> None:
    """hf_roformer's messages: INFO lines on stdout as they are, warnings on stderr as `warning: ...`; the optional
    libraries' import-time chatter off. Called before anything heavy is imported."""
    package = logging.getLogger("hf_roformer")
    package.setLevel(logging.INFO)
    package.propagate = False
    for handler in list(package.handlers):
        package.removeHandler(handler)
    info = logging.StreamHandler(sys.stdout)
    info.addFilter(_Levels(logging.INFO, logging.WARNING))
    info.setFormatter(logging.Formatter("%(message)s"))
    warning = logging.StreamHandler(sys.stderr)
    warning.setLevel(logging.WARNING)
    warning.setFormatter(logging.Formatter("warning: %(message)s"))
    package.addHandler(info)
    package.addHandler(warning)
    for name in IMPORT_TIME_CHATTER:
        logging.getLogger(name).setLevel(logging.ERROR)


def quiet_libraries() -> None:
    """transformers' and datasets' info messages and progress bars off (their own switches): the command prints what
    happens itself; the Trainer's progress bar stays (`--disable_tqdm` decides it)."""
    import huggingface_hub
    import torch
    import transformers

    if not torch.cuda.is_available():  # DeepSpeed, when installed, otherwise prints on stdout that it found no GPU
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()
    try:
        import datasets
    except ImportError:
        return
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()


def is_main_process() -> bool:
    """Whether this is the first process of a distributed launch (torchrun, accelerate) or the only one: messages
    every process would print alike are printed once."""
    return os.environ.get("RANK", "0") == "0"


def is_foreseen(error: BaseException) -> bool:
    """Failures the command line reports in one line: hf_roformer's typed errors, a package a feature needs that is
    not installed (the message says what to install), and file-system errors (a missing or unreadable file, a full or
    read-only disk)."""
    errors = sys.modules.get("hf_roformer.utils.errors")
    if errors is not None and isinstance(error, errors.HfRoFormerError):
        return True
    missing_package = isinstance(error, ModuleNotFoundError) or (
        isinstance(error, ImportError) and "pip install" in str(error)
    )
    return missing_package or (isinstance(error, OSError) and error.errno is not None)


def interruption_line(interrupt: KeyboardInterrupt) -> str:
    """Where a Ctrl-C stopped the command and what the same command does when run again."""
    output_dir = getattr(interrupt, "output_dir", None)
    if output_dir is None:
        return "interrupted; nothing was finished: run the same command again to start it"
    step, total, checkpoint = interrupt.step, interrupt.total_steps, interrupt.checkpoint
    trained = getattr(interrupt, "trained", None)
    if trained:
        return (
            f"interrupted after training finished ({step} of {total} step{'' if total == 1 else 's'}); complete in "
            f"{output_dir}/: "
            f"{', '.join(trained)}; run the same command again to do the rest with this model, without training again"
        )
    where = f" at step {step} of {total}" if step is not None and total else ""
    if checkpoint is not None:
        return f"interrupted{where}; run the same command again to resume from {checkpoint}"
    return f"interrupted{where}, before the first checkpoint; run the same command again to start over in {output_dir}"


def report_failure(error: BaseException) -> int:
    """Print a foreseen failure (or Ctrl-C) as one line and return the exit status; re-raise anything else, and
    everything when `HF_ROFORMER_TRACEBACK` is set."""
    wanted = os.environ.get(TRACEBACK_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")
    if isinstance(error, KeyboardInterrupt):
        if wanted:
            raise error
        sys.stdout.flush()
        if is_main_process():
            start = "\n" if sys.stderr.isatty() else ""  # after a progress bar's unfinished line
            print(f"{start}{interruption_line(error)}", file=sys.stderr)
        return INTERRUPTED_EXIT_STATUS
    if wanted or not is_foreseen(error):
        raise error
    if is_main_process():
        print(f"error: {error}", file=sys.stderr)
    tell_the_launcher(f"error: {error}")
    return 1


def tell_the_launcher(line: str) -> None:
    """Under torchrun, write this process's one-line failure where the launcher reads it (`TORCHELASTIC_ERROR_FILE`,
    torch's error-file format): torchrun's closing report (`ChildFailedError`, printed last, after its own
    traceback) then shows the line of every failed rank, the first under "Root Cause", instead of a link."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    import json
    import time

    try:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"message": line, "timestamp": int(time.time())}, handle)
    except OSError:
        pass  # the report then shows torch's link instead of the line, which was printed above anyway


__all__ = ["configure_output", "interruption_line", "is_foreseen", "quiet_libraries", "report_failure"]
