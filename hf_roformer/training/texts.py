"""Texts to token ids for sequence classification: `text_a` (and `text_b`) encoded with truncation, and which texts the
length limit cut (for the run's summary)."""

import datasets


def tokenize(dataset: datasets.Dataset, tokenizer, max_length: int, pad_to_max_length: bool = False):
    """Add input ids (and segment ids) for `text_a` (and `text_b`), truncated to `max_length`, and `truncated`: whether
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

    columns = [column for column in ("text_a", "text_b", "index") if column in dataset.column_names]
    return dataset.map(encode, batched=True, remove_columns=columns, desc="Tokenizing")


__all__ = ["tokenize"]
