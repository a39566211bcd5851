"""Padding-free batches in transformers' convention: `DataCollatorWithFlattening` packs sequences into one row with
restarting `position_ids`; every sequence is processed as if it were alone."""

import pytest
import torch
from conftest import tiny_config
from transformers import DataCollatorWithFlattening

import hf_roformer


SEQUENCES = [[5, 6, 7, 8, 9], [11, 12, 13], [21, 22, 23, 24, 25, 26, 27]]


def packed_batch():
    features = [{"input_ids": sequence} for sequence in SEQUENCES]
    return DataCollatorWithFlattening(return_tensors="pt")(features)


def split_packed(tensor):
    """Per-sequence slices of a packed (1, total, ...) output."""
    pieces, start = [], 0
    for sequence in SEQUENCES:
        pieces.append(tensor[0, start : start + len(sequence)])
        start += len(sequence)
    return pieces


def assert_packed_row_equals_each_sequence_alone(model):
    """The packed row's hidden states, split back into its sequences, equal each sequence run alone."""
    batch = packed_batch()
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).last_hidden_state
        for piece, sequence in zip(split_packed(packed), SEQUENCES, strict=True):
            alone = model(input_ids=torch.tensor([sequence])).last_hidden_state[0]
            torch.testing.assert_close(piece, alone, atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex_attention"])
@pytest.mark.parametrize("is_decoder", [False, True])
def test_packed_row_equals_each_sequence_alone(backend, is_decoder):
    torch.manual_seed(0)
    config = tiny_config(is_decoder=is_decoder, use_cache=False, attn_implementation=backend)
    model = hf_roformer.HfRoFormerModel(config).eval()
    assert packed_batch()["position_ids"][0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3, 4, 5, 6]
    assert_packed_row_equals_each_sequence_alone(model)


def test_packed_dynamic_rope_uses_each_sequence_length():
    torch.manual_seed(0)
    rope = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4}
    model = hf_roformer.HfRoFormerModel(tiny_config(rope_parameters=rope)).eval()
    assert_packed_row_equals_each_sequence_alone(model)


def test_packed_causal_lm_loss_equals_the_padded_batch_loss():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True, use_cache=False)).eval()
    batch = packed_batch()
    width = max(map(len, SEQUENCES))
    input_ids = torch.zeros(len(SEQUENCES), width, dtype=torch.long)
    labels = torch.full_like(input_ids, -100)
    for row, sequence in enumerate(SEQUENCES):
        input_ids[row, : len(sequence)] = torch.tensor(sequence)
        labels[row, : len(sequence)] = torch.tensor(sequence)
    with torch.no_grad():
        packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], labels=batch["labels"]).loss
        padded = model(input_ids=input_ids, attention_mask=(labels != -100).long(), labels=labels).loss
    torch.testing.assert_close(packed, padded, atol=1e-6, rtol=0)
