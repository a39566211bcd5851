"""`position_ids` are rotation angles and nothing else: RoPE sees only relative positions, so shifting every
position by a constant changes nothing, whatever the positions are (no layout is inferred from their values)."""

import pytest
import torch
from conftest import tiny_config

import hf_roformer


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


LENGTH = 12


def positions(kind: str) -> torch.Tensor:
    """`(2, LENGTH)` positions of one kind (the two rows differ where the kind allows it)."""
    ascending = torch.arange(LENGTH)
    rows = {
        "ascending": [ascending, ascending],
        "descending": [ascending.flip(0), ascending.flip(0) + 3],
        "all_zero": [torch.zeros(LENGTH, dtype=torch.long)] * 2,
        "random": [torch.randint(0, 1000, (LENGTH,), generator=torch.Generator().manual_seed(seed)) for seed in (1, 2)],
        "offset_1e6": [ascending + 10**6, ascending + 2 * 10**6],
    }[kind]
    return torch.stack(rows)


def encoder(backend: str) -> hf_roformer.HfRoFormerModel:
    """A tiny encoder with weights large enough that attention is far from uniform (positions visibly matter)."""
    torch.manual_seed(0)
    return hf_roformer.HfRoFormerModel(tiny_config(attn_implementation=backend, initializer_range=0.3)).eval()


def input_ids() -> torch.Tensor:
    return torch.randint(1, 99, (2, LENGTH), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("kind", ["ascending", "descending", "all_zero", "random", "offset_1e6"])
@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex_attention"])
def test_shifting_every_position_leaves_outputs_unchanged(backend, kind):
    model, ids, position_ids = encoder(backend), input_ids(), positions(kind)
    with torch.no_grad():
        reference = model(input_ids=ids, position_ids=position_ids).last_hidden_state
        shifted = model(input_ids=ids, position_ids=position_ids + 10).last_hidden_state
    torch.testing.assert_close(shifted, reference, atol=1e-4, rtol=0)


@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex_attention"])
def test_batch_wide_positions_broadcast_over_the_batch(backend):
    model, ids = encoder(backend), input_ids()
    row = positions("random")[:1]
    with torch.no_grad():
        broadcast = model(input_ids=ids, position_ids=row).last_hidden_state
        expanded = model(input_ids=ids, position_ids=row.expand(2, -1)).last_hidden_state
    torch.testing.assert_close(broadcast, expanded, atol=0, rtol=0)


def test_equal_positions_carry_no_order():
    """All-zero positions give every token the same rotation: the encoder then sees a set, so permuting the tokens
    permutes the outputs (and every token still attends to all others)."""
    model, ids = encoder("sdpa"), input_ids()
    permutation = torch.randperm(LENGTH, generator=torch.Generator().manual_seed(3))
    zeros = positions("all_zero")
    with torch.no_grad():
        outputs = model(input_ids=ids, position_ids=zeros).last_hidden_state
        permuted = model(input_ids=ids[:, permutation], position_ids=zeros).last_hidden_state
        ordered = model(input_ids=ids).last_hidden_state
    torch.testing.assert_close(permuted, outputs[:, permutation], atol=1e-5, rtol=0)
    assert (outputs - ordered).abs().max() > 1e-2  # positions do matter when they differ
