"""Named entities (token classification) from one's own files, as transformers' `run_ner.py` trains them: CoNLL
columns, run_ner JSON lines or CLUENER JSON (`entity_files.py`), a softmax tagger over IOB2 labels or a GlobalPointer
head for nested entities; paragraphs read in windows, never cut (`entity_alignment.py`); entity-level metrics
(`entity_metrics.py`); predictions of the test split written in the input's own format.

The examples are paragraphs with their entities as character spans (`text`, `units`: where each token of the file
is in `text`, `label`: `[start, end, type]` rows); everything is scored and written per token of the file (a
character or a word), whatever the tokenizer makes of them.
"""

from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
from transformers import AutoModelForTokenClassification, DataCollatorForTokenClassification

from ....remote_code.global_pointer_hf_roformer import HfRoFormerForGlobalPointer, decoded_span_tensor
from ....utils.errors import DataError, UsageError
from ...run.fine_tuning_task import Head, SampleLimits, Task, limited
from .alignment import (
    Paragraph,
    Window,
    gather,
    plan_windows,
    predicted_spans,
    token_labels,
    tokenized,
)
from .files import CLUENER, CONLL, EntityFile, read_entity_file, token_spans
from .metrics import entity_scores, span_set_scores
from .tags import Span, first_overlap, iob2_labels


SOFTMAX, GLOBAL_POINTER = "softmax", "global_pointer"
HEADS = (SOFTMAX, GLOBAL_POINTER)
FEATURES = datasets.Features(
    {
        "text": datasets.Value("string"),
        "where": datasets.Value("string"),
        "units": datasets.Sequence(datasets.Sequence(datasets.Value("int64"))),
        "label": datasets.Sequence(datasets.Sequence(datasets.Value("int64"))),
    }
)


@dataclass(frozen=True)
class EntityFiles:
    """One's own named-entity files and how to read and score them (`run_ner.py`'s names)."""

    train_file: str
    validation_file: str
    test_file: str | None = None
    text_column_name: str | None = None
    label_column_name: str | None = None
    label_all_tokens: bool = False
    return_entity_level_metrics: bool = False
    head: str = SOFTMAX

    def paths(self) -> dict[str, object]:
        """The local paths these files are (for the output directory's checks)."""
        return {"training file": self.train_file, "validation file": self.validation_file, "test file": self.test_file}


class GlobalPointerClass:
    """The GlobalPointer head where the run expects an Auto class (`from_pretrained`, `from_config`)."""

    from_pretrained = HfRoFormerForGlobalPointer.from_pretrained

    @staticmethod
    def from_config(config, trust_remote_code: bool = False):
        """A GlobalPointer model of `config` with random weights."""
        return HfRoFormerForGlobalPointer(config)


def entity_head(kind: str, entity_types: list[str]) -> Head:
    """The softmax tagger (IOB2 labels of `entity_types`) or the GlobalPointer head (one score table per type)."""
    if kind == GLOBAL_POINTER:
        names = tuple(entity_types)
        auto_class, prefixes, name = GlobalPointerClass, ("span_projection.", "type_bias."), "GlobalPointer"
    else:
        names = iob2_labels(entity_types)
        auto_class, prefixes, name = AutoModelForTokenClassification, ("classifier.",), "token-classification"
    config = {
        "num_labels": len(names),
        "id2label": dict(enumerate(names)),
        "label2id": {n: i for i, n in enumerate(names)},
    }
    return Head(auto_class, config, prefixes, name, "token-classification", names)


class EntityInputs:
    """Paragraphs as windows of tokens with their labels (see `entity_alignment.py`); what each split's windows are
    is kept for its metrics and predictions."""

    def __init__(self, head: str, types: list[str], label_ids: dict[str, int], label_all_tokens: bool):
        self.head, self.types, self.label_ids, self.label_all_tokens = head, types, label_ids, label_all_tokens
        # Each split's paragraphs and windows, by the split's identity (the task's `raw` keeps every split alive).
        self.encodings: dict[int, tuple[list[Paragraph], list[Window]]] = {}
        self.training_data: datasets.Dataset | None = None  # the training split, tokenized apart at entity edges

    def check(self, tokenizer, max_length: int, raw: datasets.DatasetDict) -> None:
        """A window holds at least one token besides the special tokens."""
        if max_length < 3:
            raise UsageError(f"--max_seq_length {max_length} leaves no room for a token besides [CLS] and [SEP]")

    def encode(self, data: datasets.Dataset, tokenizer, max_length: int, pad_to_max_length: bool) -> datasets.Dataset:
        """The windows of every paragraph with their labels; `truncated` is always False (nothing is cut)."""
        training = data is self.training_data
        labels = data["label"] if training else [[] for _ in range(len(data))]
        paragraphs = [
            tokenized(tokenizer, text, [tuple(unit) for unit in units], {edge for s, e, _ in label for edge in (s, e)})
            for text, units, label in zip(data["text"], data["units"], labels, strict=True)
        ]
        windows = [
            window
            for index, paragraph in enumerate(paragraphs)
            for window in plan_windows(index, len(paragraph.ids), max_length - 2)
        ]
        self.encodings[id(data)] = (paragraphs, windows)
        labelled = "label" in data.column_names
        if labelled:
            check_every_entity_has_a_token(data, paragraphs, self.types)
        rows: dict[str, list] = {"input_ids": [], "attention_mask": [], "token_type_ids": [], "truncated": []}
        if labelled:
            rows["labels"] = []
            spans = [[Span(start, end, kind) for start, end, kind in label] for label in data["label"]]
        for window in windows:
            paragraph = paragraphs[window.paragraph]
            ids = [tokenizer.cls_token_id, *paragraph.ids[window.start : window.stop], tokenizer.sep_token_id]
            padding = max_length - len(ids) if pad_to_max_length else 0
            rows["input_ids"].append(ids + [tokenizer.pad_token_id] * padding)
            rows["attention_mask"].append([1] * len(ids) + [0] * padding)
            rows["token_type_ids"].append([0] * (len(ids) + padding))
            rows["truncated"].append(False)
            if not labelled:
                continue
            if self.head == GLOBAL_POINTER:
                rows["labels"].append(window_spans(paragraph, spans[window.paragraph], window) or [[-1, -1, -1]])
            else:
                names = [Span(s, e, self.types[kind]) for s, e, kind in spans[window.paragraph]]
                labels = token_labels(paragraph, names, self.label_ids, self.label_all_tokens)
                rows["labels"].append([-100, *labels[window.start : window.stop], -100] + [-100] * padding)
        return datasets.Dataset.from_dict(rows)

    def collator(self, tokenizer, config, max_length: int):
        """Batches padded to their longest window (labels with -100, or -1 span rows for GlobalPointer)."""
        if self.head == GLOBAL_POINTER:
            return SpanCollator(tokenizer)
        return DataCollatorForTokenClassification(tokenizer)


def check_every_entity_has_a_token(data: datasets.Dataset, paragraphs: list[Paragraph], types: list[str]) -> None:
    """Refuse an entity none of whose characters the tokenizer keeps (spaces, control characters): it would vanish
    from the labels. The `DataError` names the file, the line, the entity and its type."""
    for where, text, label, paragraph in zip(data["where"], data["text"], data["label"], paragraphs, strict=True):
        for start, end, kind in label:
            if not any(first < end and last > start for first, last in paragraph.offsets):
                raise DataError(
                    f"{where}: the {types[kind]} entity {text[start:end]!r} is made of characters the tokenizer "
                    "drops, so no token can carry it; remove it or its tag"
                )


def window_spans(paragraph: Paragraph, spans: list[Span], window: Window) -> list[list[int]]:
    """GlobalPointer labels of a window: `[type, start, end]` (positions in the window, `end` inclusive) of each
    entity whose tokens all lie in it."""
    rows = []
    for start, end, kind in spans:
        touched = [i for i, (first, last) in enumerate(paragraph.offsets) if first < end and last > start]
        if touched and window.start <= touched[0] and touched[-1] < window.stop:
            rows.append([kind, touched[0] - window.start + 1, touched[-1] - window.start + 1])
    return rows


class SpanCollator:
    """Pads windows (the tokenizer's padding) and their `(entities, 3)` span labels (-1 rows)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, features: list[dict]):
        import torch

        labels = [feature.pop("labels") for feature in features] if "labels" in features[0] else None
        batch = self.tokenizer.pad(features, return_tensors="pt")
        if labels is not None:
            width = max(len(rows) for rows in labels)
            padded = [list(rows) + [[-1, -1, -1]] * (width - len(rows)) for rows in labels]
            batch["labels"] = torch.tensor(padded, dtype=torch.long)
        return batch


def read_entity_splits(files: EntityFiles) -> dict[str, EntityFile]:
    """The files read and checked: training and validation labelled, every type of the others seen in training."""
    overlaps = files.head == GLOBAL_POINTER
    paths = {"train": files.train_file, "validation": files.validation_file, "test": files.test_file}
    read = {
        split: read_entity_file(path, files.text_column_name, files.label_column_name, overlaps)
        for split, path in paths.items()
        if path is not None
    }
    for split in ("train", "validation"):
        if not read[split].labelled:
            raise DataError(f"{read[split].path}: no entity labels; the {split} file needs them")
    known = set(read["train"].entity_types())
    for entity_file in read.values():
        for sentence in entity_file.sentences:
            unknown = [span.type for span in sentence.spans or [] if span.type not in known]
            if unknown:
                raise DataError(
                    f"{entity_file.path}:{sentence.line}: the entity type {unknown[0]!r} is not in the training file "
                    f"(types: {', '.join(sorted(known))})"
                )
    return read


def paragraphs_of(entity_file: EntityFile, types: list[str]) -> datasets.Dataset:
    """The sentences of a file as examples: text, where each of its tokens is, entities as `[start, end, type]`."""
    records: dict[str, list] = {"text": [], "where": [], "units": [], "label": []}
    for sentence in entity_file.sentences:
        records["text"].append(sentence.text)
        records["where"].append(f"{entity_file.path}:{sentence.line}")
        records["units"].append([list(pair) for pair in sentence.offsets])
        records["label"].append([[s, e, types.index(kind)] for s, e, kind in sentence.character_spans()])
    data = datasets.Dataset.from_dict(records, features=FEATURES)
    return data if entity_file.labelled else data.remove_columns("label")


def token_classification_task_data(files: EntityFiles, limits: SampleLimits) -> Task:
    """Named entities from one's own files (splits cut to `limits`), the head `files.head`; predictions of the test
    file in its own format."""
    if files.head not in HEADS:
        raise UsageError(f"--head {files.head!r}: expected one of {', '.join(HEADS)}")
    read = read_entity_splits(files)
    types = sorted(read["train"].entity_types())
    raw = limited(datasets.DatasetDict({split: paragraphs_of(f, types) for split, f in read.items()}), ["test"], limits)
    head = entity_head(files.head, types)
    inputs = EntityInputs(files.head, types, head.config["label2id"], files.label_all_tokens)
    inputs.training_data = raw["train"]
    nested = files.head == GLOBAL_POINTER

    def file_spans(split: str, outputs) -> list[list[Span]]:
        """The predicted entities of each sentence of a split, as spans of the file's tokens."""
        paragraphs, windows = inputs.encodings[id(raw[split])]
        sentences = read[split].sentences[: len(raw[split])]
        if nested:
            found = window_predictions(paragraphs, windows, outputs, types)
        else:
            values = [
                np.asarray(row)[: 2 + w.stop - w.start].argmax(-1) for row, w in zip(outputs, windows, strict=True)
            ]
            names = head.label_names
            found = [
                predicted_spans(paragraph, [names[int(i)] for i in ids])
                for paragraph, ids in zip(paragraphs, gather(windows, values, len(paragraphs)), strict=True)
            ]
        return [token_spans(spans, sentence.offsets) for spans, sentence in zip(found, sentences, strict=True)]

    def metrics_for(split):
        sentences = read[split].sentences[: len(raw[split])]
        gold = [sentence.spans for sentence in sentences]

        def compute(prediction):
            predicted = file_spans(split, prediction.predictions)
            if nested:
                return span_set_scores(gold, predicted, files.return_entity_level_metrics)
            lengths = [len(sentence.tokens) for sentence in sentences]
            return entity_scores(gold, predicted, lengths, files.return_entity_level_metrics)

        return compute

    def write_predictions(split, outputs, output_dir):
        entity_file = read[split]
        spans = file_spans(split, outputs)
        if entity_file.format != CLUENER:  # tags hold no overlapping entities: the first of each overlap is kept
            spans = [without_overlaps(row) for row in spans]
        suffix = entity_file.path.suffix if entity_file.format == CONLL else ".json"
        name = f"{split}_predictions{suffix}"
        entity_file.write(Path(output_dir) / name, spans)
        return [name]

    train_file = read["train"]
    return Task(
        description=f"{train_file.path.name} ({train_file.format}, {', '.join(types)}; {head.name} head)",
        raw=raw,
        head=head,
        inputs=inputs,
        evaluation=[("validation", "eval")],
        metrics_for=metrics_for,
        card=dict(dataset=train_file.path.name, dataset_tags="json" if train_file.format != CONLL else "conll"),
        tests=["test"] if "test" in raw else [],
        write_predictions=write_predictions,
        sources=files.paths(),
        preprocess_logits=(lambda logits, labels: decoded_span_tensor(logits)) if nested else None,
        notes=[entity_counts(split, read[split]) for split in read if read[split].labelled],
    )


def entity_counts(split: str, entity_file: EntityFile) -> str:
    """The run summary's line of what was read of a split: `train: 120 sentences, entities PER 30, LOC 20`."""
    counts: dict[str, int] = {}
    for sentence in entity_file.sentences:
        for span in sentence.spans or []:
            counts[span.type] = counts.get(span.type, 0) + 1
    shown = ", ".join(f"{kind} {count:,}" for kind, count in counts.items()) or "none"
    return f"{split}: {len(entity_file.sentences):,} sentences, entities {shown}"


def window_predictions(
    paragraphs: list[Paragraph], windows: list[Window], outputs, types: list[str]
) -> list[list[Span]]:
    """Character spans of each paragraph from the decoded GlobalPointer spans of its windows, each span taken from the
    window that keeps its first token."""
    found: list[set[Span]] = [set() for _ in paragraphs]
    for window, rows in zip(windows, outputs, strict=True):
        paragraph = paragraphs[window.paragraph]
        for kind, start, end in np.asarray(rows).tolist():
            if kind < 0 or start < 1 or end > window.stop - window.start:
                continue
            first, last = window.start + start - 1, window.start + end - 1
            if window.keep_start <= first < window.keep_stop:
                found[window.paragraph].add(Span(paragraph.offsets[first][0], paragraph.offsets[last][1], types[kind]))
    return [sorted(spans) for spans in found]


def without_overlaps(spans: list[Span]) -> list[Span]:
    """The spans in order of start, each dropped when it overlaps one kept before it."""
    kept: list[Span] = []
    for span in sorted(spans):
        if first_overlap([*kept, span]) is None:
            kept.append(span)
    return kept


def from_command_line(args, limits: SampleLimits):
    """The files, keys and head `hf-roformer finetune token-classification` names, as `(load_task, inputs)`: their
    paragraphs are read when the run asks."""
    entity_files = EntityFiles(
        args.train_file, args.validation_file, args.test_file, args.text_column_name, args.label_column_name,
        bool(args.label_all_tokens), bool(args.return_entity_level_metrics), args.head,
    )  # fmt: skip
    return (lambda: token_classification_task_data(entity_files, limits)), entity_files.paths()


__all__ = [
    "GLOBAL_POINTER",
    "HEADS",
    "SOFTMAX",
    "EntityFiles",
    "EntityInputs",
    "from_command_line",
    "token_classification_task_data",
]
