"""What the tests of the documented training pages check of a page's run: that a command learned on the page's
reviews (held-out accuracy above always answering the majority class), and that its commands print no warning."""

import json
from pathlib import Path

from docs_pages import PageRun, runnable


# How far above the majority class a documented command's held-out accuracy must be on the page's 200 held-out
# reviews: a model that learned nothing scores the majority share (52%) or a share near it.
LEARNED_MARGIN = 0.08


def labels_of(labelled: Path) -> list[str]:
    """The labels of a CSV or TSV file with a header line whose last column is the label."""
    lines = labelled.read_text(encoding="utf-8").splitlines()[1:]
    return [line.replace("\t", ",").rsplit(",", 1)[1] for line in lines]


def majority_share(*labelled: Path) -> float:
    """The share of the most frequent label over CSV or TSV files whose last column is the label."""
    labels = [label for path in labelled for label in labels_of(path)]
    return max(labels.count(label) for label in set(labels)) / len(labels)


def assert_learned(output: Path, chance: float) -> None:
    """The held-out accuracy of the run in `output` beats `chance` (the majority share) by `LEARNED_MARGIN`."""
    accuracy = json.loads((output / "eval_results.json").read_text())["eval_accuracy"]
    assert accuracy >= chance + LEARNED_MARGIN, f"{output.name}: accuracy {accuracy:.4f}, majority class {chance:.4f}"


def assert_training_commands_print_no_warning_table_or_traceback(run: PageRun) -> None:
    """The full stderr of every documented training command is empty: no warning, no load-report table, no
    traceback; and no report table or traceback reaches stdout either."""
    commands = [block for block in runnable(run.page) if block.language == "bash" and "hf-roformer" in block.code]
    assert commands
    for block in commands:
        assert run.stderr[block.where] == "", f"{block.where}:\n{run.stderr[block.where][-3000:]}"
    for noise in ("LOAD REPORT", "Traceback", "newly initialized", "pin_memory", "[A"):
        assert noise not in run.output, noise
