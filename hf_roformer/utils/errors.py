"""The errors hf_roformer raises for problems the caller can fix: a bad argument, file, setting or environment.

Each message names what is wrong (the argument or file, the value) and what to do instead, in one sentence, so the
command line prints it as `error: <message>` without a traceback; library callers catch the class they care about.
`HfRoFormerError` is the base of all of them; each also derives from the built-in class callers already expect
(`ValueError` for bad values, `ImportError` for a missing package, `OSError` for files and the network).
"""

import difflib


class HfRoFormerError(Exception):
    """A problem the caller can fix; the message says what is wrong and what to do."""


class UsageError(HfRoFormerError, ValueError):
    """An argument (or a combination of them) that cannot work as given; the message names the argument."""


class DataError(HfRoFormerError, ValueError):
    """Input data that does not follow its format; the message names the file and line."""


class MissingExtraError(HfRoFormerError, ImportError):
    """A feature whose optional packages are not installed; the message names the extra that installs them."""


class ModelSourceError(HfRoFormerError, OSError):
    """A model or tokenizer that cannot be found: no such directory, an unknown shipped name, a Hub id that does not
    exist or a Hub that cannot be reached."""


class OutputDirectoryError(HfRoFormerError, OSError):
    """An output directory that may not be written or replaced (it holds other files, or overlaps an input)."""


class HubError(HfRoFormerError, OSError):
    """The Hugging Face Hub refused or could not be reached for an upload; the message says what was kept locally."""


class ExportMismatchError(HfRoFormerError, ValueError):
    """An exported graph whose outputs differ from the PyTorch model's beyond the tolerance on one checked input shape,
    or that does not run there; nothing was written. `shape` is the input shape, `output` the output's name (None when
    the graph does not run), `difference` the largest absolute difference (inf when it does not run or its output has
    another shape) and `tolerance` the limit it passed."""

    def __init__(self, message: str, shape: tuple[int, ...], output: str | None, difference: float, tolerance: float):
        super().__init__(message)
        self.shape, self.output, self.difference, self.tolerance = shape, output, difference, tolerance


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (SIGINT), with where it stopped: still a `KeyboardInterrupt`, so callers that stop on
    Ctrl-C keep doing so. `step`/`total_steps` are the optimizer steps done and planned (None before training
    started), `checkpoint` the last complete checkpoint a rerun of the same command resumes from (None: it starts
    over); `trained`, when training had finished (the stop came after it), the outputs of training that are complete
    in `output_dir`, which a rerun uses without training again."""

    def __init__(
        self,
        output_dir,
        step: int | None = None,
        total_steps: int | None = None,
        checkpoint=None,
        trained: list[str] | None = None,
    ):
        super().__init__(output_dir, step, total_steps, checkpoint)
        self.output_dir, self.step, self.total_steps, self.checkpoint = output_dir, step, total_steps, checkpoint
        self.trained = trained


def unknown_name(what: str, name: str, valid: list[str]) -> str:
    """The message for a name that is not one of `valid`: "unknown WHAT 'NAME'. Did you mean 'X'? Valid: A, B." (the
    suggestion when one is close: the same letters up to case, dashes and underscores, or a near spelling)."""

    def normal(text: str) -> str:
        return text.lower().replace("-", "").replace("_", "")

    matches = [choice for choice in valid if normal(choice) == normal(name)]
    matches = matches or difflib.get_close_matches(name.lower(), valid, n=1, cutoff=0.6)
    suggestion = f" Did you mean {matches[0]!r}?" if matches else ""
    return f"unknown {what} {name!r}.{suggestion} Valid: {', '.join(valid)}."


__all__ = [
    "DataError",
    "ExportMismatchError",
    "HfRoFormerError",
    "HubError",
    "MissingExtraError",
    "ModelSourceError",
    "OutputDirectoryError",
    "RunInterrupted",
    "UsageError",
    "unknown_name",
]
