"""Bad input fails early with a `ValueError` that names the problem."""

import pytest
import torch
from conftest import tiny_config

import hf_roformer


@pytest.fixture(scope="module")
def model():
    return hf_roformer.HfRoFormerForMaskedLM(tiny_config()).eval()


def test_both_ids_and_embeddings(model):
    input_ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="exactly one of `input_ids` and `inputs_embeds`"):
        model(input_ids=input_ids, inputs_embeds=torch.randn(1, 3, 32))
    with pytest.raises(ValueError, match="exactly one of `input_ids` and `inputs_embeds`"):
        model(attention_mask=torch.ones(1, 3))


@pytest.mark.parametrize("bad_id", [99, 100000, -1])
def test_token_id_outside_the_vocabulary(model, bad_id):
    with pytest.raises(ValueError, match=rf"`input_ids` contains {bad_id}.*`vocab_size`=99"):
        model(torch.tensor([[1, bad_id, 3]]))


def test_segment_id_outside_the_type_vocabulary(model):
    with pytest.raises(ValueError, match=r"`token_type_ids` contains 2.*`type_vocab_size`=2"):
        model(torch.tensor([[1, 2, 3]]), token_type_ids=torch.tensor([[0, 1, 2]]))


def test_encoder_states_without_cross_attention():
    decoder = hf_roformer.HfRoFormerModel(tiny_config(is_decoder=True))
    with pytest.raises(ValueError, match="add_cross_attention=True"):
        decoder(torch.tensor([[1, 2]]), encoder_hidden_states=torch.randn(1, 4, 32))
