"""What each training task declares to the command line: its subcommand's name and help, its training defaults, its
own options, and the function that turns the parsed options into what its run reads. The declarations are data, one
`options.toml` in each task's package (`hf_roformer/training/tasks/<task>/`), listed in order by the tasks'
`registry.toml`: the command line builds every `finetune` subcommand from them with no branch on a task's name, and
reads them as files, without importing the package, so `--help` and mistakes answer at once. A declaration's `loader`
(`module:function`) is imported only when its task runs.
"""

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

from .parsing import non_negative_int, positive_int


if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, before it joined the standard library
    import tomli as tomllib


TASKS_PACKAGE = ("training", "tasks")
# The value types an option may declare, by name: the command line's parse-time checks.
VALUE_TYPES = {"int": int, "positive_int": positive_int, "non_negative_int": non_negative_int, "float": float}
OPTION_KEYS = {"name", "help", "aliases", "flag", "type", "choices", "default", "required", "metavar"}
DECLARATION_KEYS = {"name", "summary", "details", "usage", "loader", "examples", "runs", "whole_batches", "defaults",
                    "defaults_of", "smoke", "options"}  # fmt: skip
RUNS = ("fine_tune", "sentence_embedding")


class DeclarationError(ValueError):
    """A task's `options.toml` that the command line cannot build a subcommand from (a package's defect, named with
    its file and key)."""


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


@dataclass(frozen=True)
class SmokeSize:
    """A smoke run of a task (the documentation's tests): the first `train` training and `held_out` evaluation and
    test `what` (e.g. "paragraphs"), for `epochs` epochs."""

    train: int
    held_out: int
    epochs: float
    what: str


@dataclass(frozen=True)
class TaskDeclaration:
    """A training task as `hf-roformer finetune NAME` offers it.

    - `name`, `summary` (one line, in `finetune --help`), `details` (its own `--help`) and `usage` (what follows the
      subcommand in the usage line);
    - `defaults`: the `TrainingArguments` values (and `max_seq_length`) the task trains with unless told otherwise
      (`defaults_of` in the file: another task's, updated with its own);
    - `options`: the task's own options (its data, its reader's settings, its head);
    - `loader`: `module:function`, called with the parsed options and the sample limits: `(load_task, inputs)`, a
      function reading and checking the task's data and the local paths it reads (sentence embedding: its options);
    - `examples`: what one of its examples is called (`--max_train_samples N`: "the first N training triplets");
    - `runs`: "fine_tune" (a task on a checkpoint, with the model and batching options) or "sentence_embedding"
      (sentence-transformers' trainer; the task's options then name the model);
    - `whole_batches`: its batches run whole, so `--token_budget` does not apply;
    - `smoke`: how a smoke run cuts it down; None: the run as asked.
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
    smoke: SmokeSize | None = None

    def load(self, args, limits):
        """What the task's run reads, from the parsed options `args` (the loader, imported now)."""
        module, _, function = self.loader.partition(":")
        return getattr(importlib.import_module(module), function)(args, limits)


def tasks_folder() -> Path:
    """The tasks' folder of the installed hf_roformer, found without importing it."""
    spec = importlib.util.find_spec("hf_roformer")
    if spec is None or not spec.submodule_search_locations:
        raise DeclarationError("the hf_roformer package is not installed beside its command line")
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*TASKS_PACKAGE)


def read_toml(path: Path) -> dict:
    """A declaration file's contents; a missing or malformed one raises `DeclarationError` naming it."""
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise DeclarationError(f"{path}: {error}") from None


def declared_option(path: Path, entry: dict) -> Option:
    """One `[[options]]` entry of `path` as an `Option`."""
    unknown = set(entry) - OPTION_KEYS
    if unknown or "name" not in entry or "help" not in entry:
        raise DeclarationError(f"{path}: option {entry.get('name')!r}: needs name and help; unknown keys {unknown}")
    if entry.get("type") not in (None, *VALUE_TYPES):
        allowed = tuple(VALUE_TYPES)
        raise DeclarationError(f"{path}: option {entry['name']!r}: type {entry['type']!r} is not one of {allowed}")
    return Option(**{**entry, "aliases": tuple(entry.get("aliases", ())),
                     "choices": tuple(entry["choices"]) if "choices" in entry else None})  # fmt: skip


def read_declaration(folder: Path, package: str, declared: dict[str, "TaskDeclaration"]) -> TaskDeclaration:
    """The declaration in `folder/package/options.toml` (`declared`: those read before it, for `defaults_of`)."""
    path = folder / package / "options.toml"
    data = read_toml(path)
    unknown = set(data) - DECLARATION_KEYS
    missing = {"name", "summary", "details", "usage", "loader"} - set(data)
    if unknown or missing:
        raise DeclarationError(f"{path}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}")
    if data.get("runs", "fine_tune") not in RUNS:
        raise DeclarationError(f"{path}: runs {data['runs']!r} is not one of {RUNS}")
    defaults = dict(data.get("defaults", {}))
    if "defaults_of" in data:
        base = {task.name: task for task in declared.values()}.get(data["defaults_of"])
        if base is None:
            raise DeclarationError(f"{path}: defaults_of {data['defaults_of']!r} names no task declared before it")
        defaults = {**base.defaults, **defaults}
    fields = {key: value for key, value in data.items() if key not in ("defaults", "defaults_of", "smoke", "options")}
    return TaskDeclaration(
        **fields,
        defaults=defaults,
        options=tuple(declared_option(path, entry) for entry in data.get("options", [])),
        smoke=SmokeSize(**data["smoke"]) if "smoke" in data else None,
    )


def task_declarations() -> list[TaskDeclaration]:
    """Every task's declaration, in the order of the tasks' `registry.toml`."""
    folder = tasks_folder()
    declared: dict[str, TaskDeclaration] = {}
    for package in read_toml(folder / "registry.toml")["fine_tuning_tasks"]:
        declared[package] = read_declaration(folder, package, declared)
    return list(declared.values())


__all__ = ["DeclarationError", "Option", "SmokeSize", "TaskDeclaration", "VALUE_TYPES", "task_declarations"]
