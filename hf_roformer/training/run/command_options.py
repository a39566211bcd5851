"""What a training task declares to the command line, as data: its subcommand's name and help, its training
defaults, its own options, and the function that turns the parsed options into the task the run reads. The command
line (`hf_roformer_cli`) builds each subcommand from a declaration (`tasks/<task>/options.py`) without a branch on the
task's name, so a new task is one package and one line in `tasks/__init__.py`.

Nothing here imports torch, transformers or datasets: `--help` and mistakes answer at once. A declaration's `loader`
is named as `module:function` and imported only when the task runs.
"""

import importlib
from dataclasses import dataclass


# The value types an option may declare: the command line's parse-time checks of the same names.
VALUE_TYPES = ("int", "positive_int", "non_negative_int", "float")


@dataclass(frozen=True)
class Option:
    """One option of a task: `--name` (and `--name-with-dashes` when it has an underscore), its other spellings
    `aliases`, its help, and how its value is read: `flag` (`--name` alone is true, `--name false` false), a value
    type of `VALUE_TYPES` (None: text), `choices`, a `default`, `required`, and the `metavar` help shows."""

    name: str
    help: str
    aliases: tuple[str, ...] = ()
    flag: bool = False
    type: str | None = None
    choices: tuple[str, ...] | None = None
    default: object = None
    required: bool = False
    metavar: str | None = None

    def __post_init__(self):
        if self.type is not None and self.type not in VALUE_TYPES:
            raise ValueError(f"option --{self.name}: type {self.type!r} is not one of {', '.join(VALUE_TYPES)}")


@dataclass(frozen=True)
class SmokeSize:
    """A smoke run of a task: the first `train` training and `held_out` evaluation and test `what` (e.g.
    "paragraphs"), for `epochs` epochs."""

    train: int
    held_out: int
    epochs: float
    what: str


@dataclass(frozen=True)
class TaskDeclaration:
    """A training task as the command line offers it (`hf-roformer finetune NAME`).

    - `name`, `summary` (one line, in `finetune --help`), `details` (its own `--help`) and `usage` (what follows the
      subcommand in the usage line);
    - `defaults`: the `TrainingArguments` values (and `max_seq_length`) the task trains with unless told otherwise;
    - `options`: the task's own options (its data, its reader's settings, its head);
    - `loader`: `module:function`, called with the parsed options and the `SampleLimits` as `(load_task, inputs)`:
      a function reading and checking the task's data, and the local paths it reads;
    - `examples`: what one of its examples is called (`--max_train_samples N`: "the first N training triplets");
    - `runs`: the run it takes: "fine_tune" (a `Task` on a checkpoint, with the model and batching options) or
      "sentence_embedding" (sentence-transformers' trainer; the task's options then name the model);
    - `whole_batches`: its batches run whole (windows of at most `--max_seq_length` tokens), so `--token_budget`
      does not apply;
    - `smoke`: how a smoke run (the documentation's tests) is cut down (`SmokeSize`); None: the run as asked.
    """

    name: str
    summary: str
    details: str
    usage: str
    defaults: dict
    options: tuple[Option, ...]
    loader: str
    examples: str = "examples"
    runs: str = "fine_tune"
    whole_batches: bool = False
    smoke: "SmokeSize | None" = None

    def load(self, args, limits):
        """`(load_task, inputs)` for the parsed options `args` (the loader, imported now)."""
        module, _, function = self.loader.partition(":")
        return getattr(importlib.import_module(module), function)(args, limits)


__all__ = ["VALUE_TYPES", "Option", "SmokeSize", "TaskDeclaration"]
