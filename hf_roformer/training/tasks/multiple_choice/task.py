"""Multiple choice (C3, SWAG) as transformers' `run_swag.py` trains it: each choice is the pair (context, question
and choice), scored by the multiple-choice head; the metric is accuracy; predictions go to `test_predictions.json`.

Questions with fewer choices than the most any question has get empty stand-in choices that never count: the loss
(the Trainer's `compute_loss_func`, `choice_loss`) and the predictions ignore them. A new head reads each choice's
first token; a head that a checkpoint brings may read its last real token (transformers' RoFormer default,
`summary_type` "last"). Neither score depends on the padding, so every choice of a batch is padded to the batch's
longest (`ChoiceCollator`).
"""

import json
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
from transformers import AutoModelForMultipleChoice, DataCollatorForMultipleChoice

from ...run.fine_tuning_task import Head, SampleLimits, Task, limited
from .files import read_multiple_choice_file


IGNORED = -100


def choice_labels(label: int | None, choices: int, slots: int) -> list[int]:
    """The labels of one question over `slots` choice slots: the number of its real choices at the correct one and
    `IGNORED` elsewhere (all `IGNORED` without an answer). One entry a question counts, so the Trainer's
    `num_items_in_batch` is the number of answered questions, and the real choices are the first ones."""
    labels = [IGNORED] * slots
    if label is not None:
        labels[label] = choices
    return labels


def choice_loss(outputs, labels, num_items_in_batch=None) -> torch.Tensor:
    """Cross-entropy over each question's real choices (`choice_labels`), summed over answered questions and divided
    by `num_items_in_batch` (gradient accumulation) or their count."""
    logits = outputs["logits"] if isinstance(outputs, dict) else outputs[0]
    labels = labels.to(logits.device)
    answered = (labels != IGNORED).any(dim=-1)
    if not bool(answered.any()):
        return logits.sum() * 0.0
    logits, labels = logits[answered], labels[answered]
    counts = labels.max(dim=-1).values
    slots = torch.arange(logits.shape[-1], device=logits.device)
    logits = logits.masked_fill(slots[None, :] >= counts[:, None], torch.finfo(logits.dtype).min)
    loss = torch.nn.functional.cross_entropy(logits.float(), (labels != IGNORED).float().argmax(-1), reduction="sum")
    return loss / (num_items_in_batch if num_items_in_batch is not None else len(counts))


def predicted_choices(logits: np.ndarray, counts: list[int]) -> np.ndarray:
    """The best real choice of every question (`counts[i]`: how many question `i` has)."""
    slots = np.arange(logits.shape[-1])
    return np.where(slots[None, :] < np.asarray(counts)[:, None], logits, -np.inf).argmax(-1)


class ChoiceCollator:
    """Batches of questions, every choice padded to the longest of the batch, with `labels` where the split has
    answers. transformers' `DataCollatorForMultipleChoice` pads; it needs labels, which a
    test split lacks, so a batch without them gets stand-ins that are dropped again."""

    def __init__(self, tokenizer):
        self.pad = DataCollatorForMultipleChoice(tokenizer, padding="longest")

    def __call__(self, questions: list[dict]) -> dict[str, torch.Tensor]:
        """The tensors of `questions` (encoded by `ChoiceInputs`): (questions, slots, tokens) and `labels`."""
        if "labels" in questions[0]:
            return self.pad(questions)
        batch = self.pad([{**question, "labels": 0} for question in questions])
        del batch["labels"]
        return batch


class ChoiceInputs:
    """Every question as `slots` pairs (context, question + choice)."""

    def __init__(self, slots: int):
        self.slots = slots

    def check(self, tokenizer, max_length: int, raw: datasets.DatasetDict) -> None:
        """Nothing beyond the run's own check: pairs are truncated longest first."""

    def encode(self, data: datasets.Dataset, tokenizer, max_length: int, pad_to_max_length: bool) -> datasets.Dataset:
        """`input_ids` etc. of `slots` choices per question, each of at most `max_length` tokens (padded to it with
        `pad_to_max_length`), `labels` (`choice_labels`) where the split has answers, and `truncated`: whether a
        choice was cut."""
        firsts, seconds, rows = [], [], list(data)
        for row in rows:
            choices = row["choices"] + [""] * (self.slots - len(row["choices"]))
            firsts += [row["context"]] * self.slots
            seconds += [f"{row['question']} {choice}".strip() for choice in choices]
        padding = "max_length" if pad_to_max_length else False
        encoded = tokenizer(firsts, seconds, truncation=True, max_length=max_length, padding=padding)
        lengths = tokenizer(firsts, seconds)["input_ids"]
        columns = {
            name: [values[i : i + self.slots] for i in range(0, len(values), self.slots)]
            for name, values in encoded.items()
        }
        cut = [len(ids) > max_length for ids in lengths]
        columns["truncated"] = [any(cut[i : i + self.slots]) for i in range(0, len(cut), self.slots)]
        if "label" in data.column_names:
            columns["labels"] = [choice_labels(row["label"], len(row["choices"]), self.slots) for row in rows]
        return datasets.Dataset.from_dict(columns)

    def collator(self, tokenizer, config, max_length: int) -> ChoiceCollator:
        """Choices padded to their batch's longest: the head reads a real token of each ([CLS] or its last), so the
        padding changes no score."""
        return ChoiceCollator(tokenizer)


def multiple_choice_head() -> Head:
    """The multiple-choice head: one score a choice. A new head scores each choice from its first token ([CLS]),
    which the shipped checkpoint learned from (docs/reading-comprehension.md); a checkpoint with this head keeps the
    position it was trained with (transformers' RoFormer default: the last, read here at each choice's last real
    token)."""
    return Head(
        auto_class=AutoModelForMultipleChoice,
        config={},
        weight_prefixes=("classifier.",),
        name="multiple-choice",
        pipeline_tag="multiple-choice",
        outputs="one score a choice",
        new_head_config={"summary_type": "first"},
        new_head_note="read at its first token ([CLS]; summary_type 'first')",
    )


@dataclass(frozen=True)
class ChoiceFiles:
    """Where the questions are: C3's JSON or run_swag.py's columns (.csv or JSON lines)."""

    train_file: str
    validation_file: str
    test_file: str | None = None

    def paths(self) -> dict[str, object]:
        """The local paths these files are (for the output directory's checks)."""
        return {"training file": self.train_file, "validation file": self.validation_file, "test file": self.test_file}


def multiple_choice_task_data(files: ChoiceFiles, limits: SampleLimits) -> Task:
    """Questions from `files` (splits cut to `limits`); accuracy; test predictions as JSON lines
    (`{"id", "label", "answer"}`: the chosen index and its text)."""
    paths = {"train": files.train_file, "validation": files.validation_file, "test": files.test_file}
    raw = datasets.DatasetDict(
        {
            split: read_multiple_choice_file(path, need_labels=split != "test")
            for split, path in paths.items()
            if path is not None
        }
    )
    raw = limited(raw, ["test"], limits)
    slots = max(len(choices) for data in raw.values() for choices in data["choices"])
    counts = {split: [len(choices) for choices in data["choices"]] for split, data in raw.items()}

    def metrics_for(split):
        answers = np.asarray(raw[split]["label"])

        def compute(prediction):
            chosen = predicted_choices(prediction.predictions, counts[split])
            return {"accuracy": float(np.mean(chosen == answers))}

        return compute

    def write_predictions(split, logits, output_dir: Path):
        chosen = predicted_choices(logits, counts[split])
        with open(output_dir / "test_predictions.json", "w", encoding="utf-8") as handle:
            for row, index in zip(raw[split], chosen, strict=True):
                record = {"id": row["id"], "label": int(index), "answer": row["choices"][index]}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        return ["test_predictions.json"]

    train_file = Path(files.train_file)
    return Task(
        description=f"{train_file.name} (multiple choice, up to {slots} choices)",
        raw=raw,
        head=multiple_choice_head(),
        inputs=ChoiceInputs(slots),
        evaluation=[("validation", "eval")],
        metrics_for=metrics_for,
        card=dict(dataset=train_file.name, dataset_tags="json" if train_file.suffix != ".csv" else "csv"),
        tests=["test"] if "test" in raw else [],
        write_predictions=write_predictions,
        loss=choice_loss,
        sources=files.paths(),
    )


def from_command_line(args, limits: SampleLimits):
    """The files `hf-roformer finetune multiple-choice` names, as `(load_task, inputs)`: their questions are read when
    the run asks."""
    files = ChoiceFiles(args.train_file, args.validation_file, args.test_file)
    return (lambda: multiple_choice_task_data(files, limits)), files.paths()


__all__ = [
    "ChoiceCollator",
    "ChoiceFiles",
    "ChoiceInputs",
    "choice_loss",
    "from_command_line",
    "multiple_choice_task_data",
    "predicted_choices",
]
