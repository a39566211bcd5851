"""What a fine-tuning task supplies to the run: its examples, read and validated; the model head it trains; how its
examples become model inputs; its metrics; its prediction files. `finetune.fine_tune` runs any task on the run
skeleton every training command shares (`training_run.py`: output directory, record, Trainer, Ctrl-C and resume,
save, card, finished marker), so a new task (token classification, question answering, multiple choice) is one module
in this package that builds a `Task`:

- `raw`: its splits as `datasets`, every file read completely and checked first (`DataError` naming the file and
  line before anything is written);
- `head`: the Auto class of its model and the head's configuration (labels, pooling, ...);
- `inputs`: how one split is encoded (truncation or windows, label alignment) and batched; the encodings are kept for
  the task's metrics and predictions, which may need them (question answering maps features back to examples);
- `metrics_for(split)`: the Trainer's `compute_metrics` for a split; `write_predictions(split, predictions, dir)`: the
  prediction files of a test split, in the format of the input; `write_evaluation(split, dir)` (optional): files of
  an evaluation split's last evaluation (question answering writes its answers, as `run_qa.py` does);
- `card`: what the model card says about the data.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import datasets
import numpy as np


@dataclass(frozen=True)
class Head:
    """The model a task trains: `auto_class` loads a checkpoint with this head (a new head on a pre-trained
    encoder), `config` configures it (`from_pretrained` keyword arguments: labels, pooling, ...), `weight_prefixes`
    name its weights (those a pre-trained encoder lacks), `name` says what it is in messages, `pipeline_tag` is the
    pipeline task of the trained model (its card's), `label_names` its classes (None: a score), `outputs` what a head
    without classes gives, said in messages instead of a count of labels (the config's `num_labels` means nothing
    for a head that scores spans or choices). `new_head_config` holds configuration values a new head gets (a
    checkpoint that brings this head keeps its own), `new_head_note` what they mean, for the run summary."""

    auto_class: type
    config: dict
    weight_prefixes: tuple[str, ...]
    name: str
    pipeline_tag: str
    label_names: tuple[str, ...] | None = None
    outputs: str | None = None
    new_head_config: dict = field(default_factory=dict)
    new_head_note: str | None = None


class Inputs(Protocol):
    """How a task's examples become model inputs."""

    def check(self, tokenizer, max_length: int, raw: datasets.DatasetDict) -> None:
        """Refuse a `max_length` the task's examples cannot be encoded at (before any work)."""

    def encode(self, data: datasets.Dataset, tokenizer, max_length: int, pad_to_max_length: bool) -> datasets.Dataset:
        """The model inputs of one split, with a `truncated` column (whether the length limit cut an example)."""

    def collator(self, tokenizer, config, max_length: int) -> Callable:
        """What batches the encoded examples (padding) for the model `config` configures, trained at inputs of at most
        `max_length` tokens."""


@dataclass
class Task:
    """A task read and validated: its examples, its head, its inputs, how to score them and how to write
    predictions (see the module)."""

    description: str  # for messages and cards, e.g. "GLUE MRPC"
    raw: datasets.DatasetDict  # train, evaluation and test splits
    head: Head
    inputs: Inputs
    evaluation: list[tuple[str, str]]  # (split, metric prefix), the first is the one evaluated during training
    metrics_for: Callable[[str], Callable]  # split -> compute_metrics
    card: dict  # write_fine_tuning_card's words for the data: dataset, dataset_tags, dataset_args, hub_dataset, ...
    tests: list[str] = field(default_factory=list)  # splits to predict
    write_predictions: Callable[[str, np.ndarray, Path], list[str]] | None = None  # split, outputs, dir -> files
    write_evaluation: Callable[[str, Path], list[str]] | None = None  # split, dir -> files of its last evaluation
    loss: Callable | None = None  # the Trainer's `compute_loss_func` (None: the model's own loss)
    card_note: Callable[[dict[str, float]], str] | None = None  # a paragraph for the card, from the final metrics
    sources: dict[str, object] = field(default_factory=dict)  # description -> path the data were read from
    notes: list[str] = field(default_factory=list)  # what the run summary says about the data as read
    # What evaluation keeps of the model's outputs, when they are too large to keep whole (the Trainer's
    # `preprocess_logits_for_metrics`: outputs, labels -> kept); None keeps them.
    preprocess_logits: Callable | None = None


@dataclass(frozen=True)
class SampleLimits:
    """Use only the first examples of each split (quick runs), as `run_glue.py`'s `--max_*_samples` do."""

    train: int | None = None
    evaluation: int | None = None
    prediction: int | None = None


def first(dataset: datasets.Dataset, count: int | None) -> datasets.Dataset:
    """The first `count` examples (all when `count` is None)."""
    return dataset if count is None else dataset.select(range(min(count, len(dataset))))


def limited(raw: datasets.DatasetDict, tests: list[str], limits: SampleLimits) -> datasets.DatasetDict:
    """`raw` with each split cut to its limit: training, test splits (`tests`) and the evaluation splits (the rest)."""
    counts = {split: limits.prediction if split in tests else limits.evaluation for split in raw}
    counts["train"] = limits.train
    return datasets.DatasetDict({split: first(data, counts[split]) for split, data in raw.items()})


__all__ = ["Head", "Inputs", "SampleLimits", "Task", "first", "limited"]
