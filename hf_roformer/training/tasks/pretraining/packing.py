"""Sequence packing for pre-training: documents are tokenized once, then cut into full-length blocks.

Each block is `[CLS]` followed by the next `max_length - 1` tokens of the stream `doc1 [SEP] doc2 [SEP] ...`, so no
length is wasted on padding and two documents never touch without a `[SEP]` between them (a long document continues in
the next block). Word ids (for whole-word masking) are numbered across the whole stream, so a word never merges with a
word of another document; special tokens have word id -1 and are never masked. The same encoded documents pack at any
length, which is what a multi-stage schedule needs.
"""

import datasets

from .whole_word_masking import jieba_word_spans, token_word_ids


def encode_documents(documents: list[str], tokenizer, batch_size: int = 1000) -> datasets.Dataset:
    """Token ids (no special tokens) and jieba word ids of every document, as a `datasets.Dataset`."""

    def encode(batch):
        encoded = tokenizer(batch["text"], add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        word_ids = [
            token_word_ids(offsets, jieba_word_spans(text))
            for text, offsets in zip(batch["text"], encoded["offset_mapping"], strict=True)
        ]
        return {"input_ids": encoded["input_ids"], "word_ids": word_ids}

    dataset = datasets.Dataset.from_dict({"text": documents})
    return dataset.map(encode, batched=True, batch_size=batch_size, remove_columns=["text"], desc="tokenizing")


def pack_documents(
    encoded: datasets.Dataset, max_length: int, cls_token_id: int, sep_token_id: int
) -> datasets.Dataset:
    """Blocks of `max_length` tokens (the last one may be shorter) with their word ids and their index (which seeds
    their masks)."""
    if max_length < 3:
        raise ValueError(f"max_length must be at least 3 ([CLS], a token, [SEP]), got {max_length}")
    stream_ids, stream_words, next_word = [], [], 0
    for input_ids, word_ids in zip(encoded["input_ids"], encoded["word_ids"], strict=True):
        stream_ids += [*input_ids, sep_token_id]
        stream_words += [word + next_word if word >= 0 else -1 for word in word_ids] + [-1]
        next_word += max(word_ids, default=-1) + 1
    body = max_length - 1
    blocks = {"input_ids": [], "word_ids": []}
    for start in range(0, len(stream_ids), body):
        blocks["input_ids"].append([cls_token_id, *stream_ids[start : start + body]])
        blocks["word_ids"].append([-1, *stream_words[start : start + body]])
    blocks["index"] = list(range(len(blocks["input_ids"])))
    return datasets.Dataset.from_dict(blocks)
