"""Sequence classification, the head of every task that classifies (or scores) a text or a pair of texts: GLUE, one's
own text files, CAIL2019-SCM, the demo's reviews. Examples carry `text_a` (and `text_b`) and `label`; they are encoded
with truncation, and batches are padded to their longest."""

import datasets
import numpy as np
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from ..run.fine_tuning_task import Head
from ..run.lengths import check_sequence_length


class SentenceInputs:
    """Single texts or pairs (`text_a`, `text_b`) encoded with truncation at `max_length` tokens."""

    def check(self, tokenizer, max_length: int, raw: datasets.DatasetDict) -> None:
        """Pairs need room for a token of each text besides the special tokens."""
        if any("text_b" in data.column_names for data in raw.values()):
            check_sequence_length(tokenizer, max_length, pairs=True)

    def encode(self, data: datasets.Dataset, tokenizer, max_length: int, pad_to_max_length: bool) -> datasets.Dataset:
        """Input ids (and segment ids) for `text_a` (and `text_b`), truncated to `max_length`, and `truncated`: whether
        a text was cut (decided on the encodings that reach `max_length`, which alone are encoded again uncut)."""

        def encode(batch):
            pair = batch["text_b"] if "text_b" in batch else None
            padding = "max_length" if pad_to_max_length else False
            encoded = tokenizer(batch["text_a"], pair, truncation=True, max_length=max_length, padding=padding)
            at_limit = [i for i, mask in enumerate(encoded["attention_mask"]) if sum(mask) >= max_length]
            truncated = [False] * len(encoded["input_ids"])
            if at_limit:
                texts = [batch["text_a"][i] for i in at_limit]
                pairs = [pair[i] for i in at_limit] if pair is not None else None
                uncut = tokenizer(texts, pairs, truncation=False, verbose=False)["input_ids"]
                for i, ids in zip(at_limit, uncut, strict=True):
                    truncated[i] = len(ids) > max_length
            encoded["truncated"] = truncated
            return encoded

        columns = [column for column in ("text_a", "text_b", "index") if column in data.column_names]
        return data.map(encode, batched=True, remove_columns=columns, desc="Tokenizing")

    def collator(self, tokenizer, config, max_length: int):
        """Batches padded to their longest example."""
        return DataCollatorWithPadding(tokenizer)


def classification_head(names: tuple[str, ...] | None, **config) -> Head:
    """A sequence-classification head: one class per name, or a regression (`names` None), with `config` on top."""
    if names is None:
        labels = {"num_labels": 1, "problem_type": "regression"}
    else:
        labels = {
            "num_labels": len(names),
            "id2label": dict(enumerate(names)),
            "label2id": {label: i for i, label in enumerate(names)},
        }
    return Head(
        auto_class=AutoModelForSequenceClassification,
        config={**labels, **config},
        weight_prefixes=("classifier.",),
        name="classification",
        pipeline_tag="text-classification",
        label_names=names,
    )


def predicted(logits: np.ndarray, regression: bool) -> np.ndarray:
    """Scores (regression) or class ids from the model's outputs."""
    return logits.squeeze(-1) if regression else logits.argmax(-1)


__all__ = ["SentenceInputs", "classification_head", "predicted"]
