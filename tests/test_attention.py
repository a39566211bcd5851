"""Attention backends agree, padding is exact, and attention weights are returned by the eager backend."""

import pytest
import torch
from conftest import tiny_config

import hf_roformer


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


BACKENDS = ["eager", "sdpa", "flex_attention"]


def outputs_per_backend(model, inputs) -> dict:
    """Last hidden states of `model` under each attention backend, for the same inputs."""
    results = {}
    with torch.no_grad():
        for backend in BACKENDS:
            model.set_attn_implementation(backend)
            results[backend] = model(**inputs).last_hidden_state
    return results


@pytest.mark.parametrize("is_decoder", [False, True])
def test_backends_agree_on_a_padded_batch(is_decoder, batch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config(is_decoder=is_decoder, use_cache=False)).eval()
    results = outputs_per_backend(model, batch)
    real = batch["attention_mask"].bool()
    for backend in BACKENDS[1:]:
        torch.testing.assert_close(results[backend][real], results["eager"][real], atol=1e-5, rtol=0, msg=backend)


def test_default_backend_is_sdpa_and_modules_declare_causality():
    encoder = hf_roformer.HfRoFormerModel(tiny_config())
    decoder = hf_roformer.HfRoFormerModel(tiny_config(is_decoder=True, add_cross_attention=True))
    assert encoder.config._attn_implementation == "sdpa"
    assert all(layer.attention.self.is_causal is False for layer in encoder.encoder.layer)
    assert all(layer.attention.self.is_causal is True for layer in decoder.encoder.layer)
    assert all(layer.crossattention.self.is_causal is False for layer in decoder.encoder.layer)


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
@pytest.mark.parametrize("is_decoder", [False, True])
def test_padded_batch_equals_each_sequence_alone(backend, is_decoder, batch):
    torch.manual_seed(0)
    config = tiny_config(is_decoder=is_decoder, use_cache=False, attn_implementation=backend)
    model = hf_roformer.HfRoFormerModel(config).eval()
    with torch.no_grad():
        padded = model(**batch).last_hidden_state
        for row in range(batch["input_ids"].shape[0]):
            length = int(batch["attention_mask"][row].sum())
            alone = model(
                input_ids=batch["input_ids"][row : row + 1, :length],
                token_type_ids=batch["token_type_ids"][row : row + 1, :length],
            ).last_hidden_state
            torch.testing.assert_close(padded[row, :length], alone[0], atol=1e-5, rtol=0)


def test_left_padding_equals_the_sequence_alone():
    """With positions counted from the first real token (as `generate` does), left padding changes nothing."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config(is_decoder=True, use_cache=False)).eval()
    input_ids = torch.tensor([[0, 0, 0, 5, 6, 7, 8]])
    attention_mask = (input_ids != 0).long()
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        padded = model(input_ids, attention_mask=attention_mask, position_ids=position_ids).last_hidden_state
        alone = model(input_ids[:, 3:]).last_hidden_state
    torch.testing.assert_close(padded[:, 3:], alone, atol=1e-5, rtol=0)


def test_eager_returns_attention_weights(batch):
    config = tiny_config(attn_implementation="eager")
    model = hf_roformer.HfRoFormerModel(config).eval()
    with torch.no_grad():
        outputs = model(**batch, output_attentions=True, output_hidden_states=True)
    assert len(outputs.attentions) == config.num_hidden_layers
    assert len(outputs.hidden_states) == config.num_hidden_layers + 1
    weights = outputs.attentions[0]
    assert weights.shape == (2, config.num_attention_heads, 9, 9)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, config.num_attention_heads, 9))
    assert weights[1, :, :, 6:].abs().max() == 0  # padded keys get no attention
    torch.testing.assert_close(outputs.hidden_states[-1], outputs.last_hidden_state)


def test_decoder_cross_attention_weights(batch):
    config = tiny_config(is_decoder=True, add_cross_attention=True, attn_implementation="eager", use_cache=False)
    model = hf_roformer.HfRoFormerModel(config).eval()
    encoder_states = torch.randn(2, 5, config.hidden_size)
    encoder_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    with torch.no_grad():
        outputs = model(
            **batch, encoder_hidden_states=encoder_states, encoder_attention_mask=encoder_mask, output_attentions=True
        )
    cross = outputs.cross_attentions[0]
    assert cross.shape == (2, config.num_attention_heads, 9, 5)
    assert cross[1, :, :, 3:].abs().max() == 0
    self_weights = outputs.attentions[0]
    assert torch.triu(self_weights[0], diagonal=1).abs().max() == 0  # causal
