"""Chinese whole-word masking for masked-language-model pre-training.

Words come from jieba (default mode, with its HMM for unseen words); every token of a selected word is predicted
together. Words are drawn in random order until 15% of the sequence's tokens are selected (a word that would overshoot
the budget is skipped, as in Google's BERT and Chinese-BERT-wwm); each selected token becomes [MASK] 80% of the time,
a random token 10% and stays itself 10%.

transformers' `DataCollatorForLanguageModeling(whole_word_mask=True)` is not used: it finds words from gaps between
character offsets, which Chinese text does not have, draws words (not tokens) with the masking probability, and drops
the 80/10/10 replacement. Each example is masked with its own generator, seeded by (seed, epoch, example index), so
the masks do not depend on when batches are fetched: a resumed run masks exactly as an uninterrupted one, and each
epoch sees new masks (`MaskingEpochCallback` tells the collator the epoch).
"""

from dataclasses import dataclass

import numpy as np
import torch
from transformers import TrainerCallback

from ....remote_code.encoding_hf_roformer import segmenter_module


IGNORE_INDEX = -100
# The "epoch" that seeds the masks of validation sets: fixed, and distinct from every training epoch.
VALIDATION_EPOCH = 2**32


def jieba_word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans `(start, end)` of the jieba words of `text`."""
    jieba = segmenter_module("jieba")  # quieted: its dictionary loading prints progress lines otherwise
    if jieba is None:
        raise ImportError("Chinese whole-word masking segments words with jieba: pip install jieba")
    return [(start, end) for _, start, end in jieba.tokenize(text)]


def token_word_ids(offsets: list[tuple[int, int]], word_spans: list[tuple[int, int]]) -> list[int]:
    """For each token (its character offsets), the index of the word holding its first character; -1 for tokens
    without characters (special tokens)."""
    word_of_char = {}
    for index, (start, end) in enumerate(word_spans):
        for position in range(start, end):
            word_of_char[position] = index
    return [word_of_char.get(start, -1) if end > start else -1 for start, end in offsets]


def example_generator(*key: int) -> torch.Generator:
    """A torch generator seeded from integers (seed, epoch, index), well mixed by numpy's `SeedSequence`."""
    return torch.Generator().manual_seed(int(np.random.SeedSequence(list(key)).generate_state(1, np.uint64)[0]))


def select_whole_words(
    word_ids: torch.Tensor, probability: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Bool mask of the tokens to predict in one sequence: whole words, ~`probability` of the word tokens."""
    selected = torch.zeros_like(word_ids, dtype=torch.bool)
    words = torch.unique(word_ids[word_ids >= 0])
    if len(words) == 0:
        return selected
    maskable = int((word_ids >= 0).sum())
    budget = max(1, round(maskable * probability))
    count = 0
    for word in words[torch.randperm(len(words), generator=generator)].tolist():
        positions = word_ids == word
        size = int(positions.sum())
        if count + size > budget:
            if count >= budget:
                break
            continue
        selected |= positions
        count += size
    return selected


@dataclass
class ChineseWholeWordMaskCollator:
    """Batches packed examples (`input_ids`, `word_ids`, `index`) for MLM: pads, selects whole words, replaces
    80/10/10, with a generator per example seeded by (`seed`, `epoch`, `index`).

    Examples that already hold `labels` (a pre-masked validation set) are only padded; examples without an `index`
    are masked with torch's global generator.
    """

    tokenizer: object
    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    seed: int = 0
    epoch: int = 0

    def __post_init__(self):
        if not 0 < self.mlm_probability < 1:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        if self.mask_replace_prob + self.random_replace_prob > 1:
            raise ValueError("mask_replace_prob + random_replace_prob must not exceed 1")
        special = set(self.tokenizer.all_special_ids)
        self.random_token_ids = torch.tensor([i for i in range(len(self.tokenizer)) if i not in special])

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        width = max(len(example["input_ids"]) for example in examples)
        pad = self.tokenizer.pad_token_id
        batch = {
            "input_ids": torch.full((len(examples), width), pad, dtype=torch.long),
            "attention_mask": torch.zeros(len(examples), width, dtype=torch.long),
            "labels": torch.full((len(examples), width), IGNORE_INDEX, dtype=torch.long),
        }
        for row, example in enumerate(examples):
            length = len(example["input_ids"])
            input_ids = torch.as_tensor(example["input_ids"], dtype=torch.long)
            if "labels" in example:
                labels = torch.as_tensor(example["labels"], dtype=torch.long)
            else:
                index = example.get("index")
                generator = None if index is None else example_generator(self.seed, self.epoch, int(index))
                word_ids = torch.as_tensor(example["word_ids"], dtype=torch.long)
                input_ids, labels = self.mask(input_ids, word_ids, generator)
            batch["input_ids"][row, :length] = input_ids
            batch["attention_mask"][row, :length] = 1
            batch["labels"][row, :length] = labels
        batch["token_type_ids"] = torch.zeros_like(batch["input_ids"])
        return batch

    def mask(
        self, input_ids: torch.Tensor, word_ids: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked inputs and labels (-100 where nothing is predicted) of one sequence."""
        selected = select_whole_words(word_ids, self.mlm_probability, generator)
        labels = torch.where(selected, input_ids, IGNORE_INDEX)
        draw = torch.rand(input_ids.shape, generator=generator)
        masked = input_ids.clone()
        to_mask = selected & (draw < self.mask_replace_prob)
        to_random = (
            selected & (draw >= self.mask_replace_prob) & (draw < self.mask_replace_prob + self.random_replace_prob)
        )
        masked[to_mask] = self.tokenizer.mask_token_id
        picks = torch.randint(len(self.random_token_ids), input_ids.shape, generator=generator)
        random_tokens = self.random_token_ids[picks]
        masked[to_random] = random_tokens[to_random]
        return masked, labels


class MaskingEpochCallback(TrainerCallback):
    """Tells the collator which epoch starts, so every epoch gets new masks (and a resumed epoch the same ones)."""

    def __init__(self, collator: ChineseWholeWordMaskCollator):
        self.collator = collator

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.collator.epoch = int(state.epoch or 0)
