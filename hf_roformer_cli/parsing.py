"""Argument parsing shared by every subcommand: a parser whose mistakes are one line, option spellings, and value
types that refuse impossible numbers at parse time, naming the flag.

Nothing here imports torch, transformers or the hf_roformer package, so `--help` and mistakes answer at once.
"""

import argparse
import difflib
import re
import sys


TRACEBACK_VARIABLE = "HF_ROFORMER_TRACEBACK"
ALIASES = re.compile(r"(--\w+)(?:/--?[\w-]+)+")  # an option's spellings as argparse lists them in messages


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose errors are one line, `error: ...` plus where to find the options (not the whole
    usage), with a close match for a mistyped choice; exit status 2, as argparse's. An option is its full name
    (`allow_abbrev=False`): no prefix of one can be mistaken for another. Subcommands' parsers are of this class too
    (argparse makes them of their parent's class)."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message: str):
        message = ALIASES.sub(r"\1", message)  # `--output_dir/--output-dir` -> `--output_dir`
        if "invalid choice" in message:
            message = _with_suggestion(message)
        sys.stderr.write(f"error: {message} (`{self.prog} --help` lists the options)\n")
        sys.exit(2)


def _with_suggestion(message: str) -> str:
    """argparse's "invalid choice: 'x' (choose from a, b)" with "did you mean 'y'?" when one choice is close."""
    try:
        given = message.split("invalid choice: ", 1)[1].split(" (choose from", 1)[0].strip("'\"")
        choices = message.split("(choose from ", 1)[1].rstrip(")").replace("'", "").split(", ")
    except IndexError:
        return message
    close = difflib.get_close_matches(given, choices, n=1, cutoff=0.6)
    return message + (f"; did you mean {close[0]!r}?" if close else "")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (paragraphs kept), option help wrapped."""


def option(name: str) -> list[str]:
    """`--name` and, when it has an underscore, its dashed alias (`--output_dir`, `--output-dir`)."""
    spellings = [f"--{name}"]
    if "_" in name:
        spellings.append(f"--{name.replace('_', '-')}")
    return spellings


def _number(kind, text: str, test, requirement: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if value != value or value in (float("inf"), float("-inf")) or not test(value):  # NaN, infinities
        raise argparse.ArgumentTypeError(f"{text} must be {requirement}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _number(int, text, lambda value: value >= 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return _number(int, text, lambda value: value >= 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _number(float, text, lambda value: value > 0, "a positive number")


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    return _number(float, text, lambda value: value >= 0, "a number >= 0")


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    return _number(float, text, lambda value: 0 < value <= 1, "in (0, 1]")


def steps_or_fraction(text: str) -> float:
    """Warm-up: a number of steps (>= 1) or a fraction of all steps (in [0, 1)), as `TrainingArguments` reads it."""
    value = _number(float, text, lambda value: value >= 0, "a number of steps or a fraction of the steps (>= 0)")
    return int(value) if value >= 1 else value


def boolean(text: str) -> bool:
    """`true`/`false` (and yes/no, 1/0), as transformers' `HfArgumentParser` reads booleans."""
    lowered = text.lower()
    if lowered in ("true", "yes", "y", "1", "t"):
        return True
    if lowered in ("false", "no", "n", "0", "f"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not true or false")


def add_flag(group, name: str, help: str) -> None:
    """A boolean option as transformers' scripts take it: `--name` alone means true, `--name false` false."""
    group.add_argument(*option(name), type=boolean, nargs="?", const=True, default=None, metavar="BOOL", help=help)


__all__ = [
    "TRACEBACK_VARIABLE",
    "HelpFormatter",
    "Parser",
    "add_flag",
    "boolean",
    "fraction",
    "non_negative_float",
    "non_negative_int",
    "option",
    "positive_float",
    "positive_int",
    "steps_or_fraction",
]
