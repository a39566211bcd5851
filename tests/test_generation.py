"""Causal decoding with the key/value cache is exact, and two RoFormers pair up as an encoder-decoder."""

import pytest
import torch
from conftest import assert_cached_generation_exact, assert_left_padded_generation_matches, tiny_config
from transformers import EncoderDecoderModel

import hf_roformer
from hf_roformer.remote_code.releases_hf_roformer import output_cache


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


@pytest.mark.parametrize("rotary_value", [False, True])
@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_cached_generation_equals_recomputation(rotary_value, backend):
    torch.manual_seed(0)
    config = tiny_config(is_decoder=True, rotary_value=rotary_value, attn_implementation=backend)
    model = hf_roformer.HfRoFormerForCausalLM(config).eval()
    assert_cached_generation_exact(model, torch.randint(1, config.vocab_size, (1, 5)), steps=12)


def test_cache_positions_continue_from_the_cache_length():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    input_ids = torch.randint(1, 99, (2, 10))
    with torch.no_grad():
        full = model(input_ids, use_cache=False).logits
        first = model(input_ids[:, :6], use_cache=True)
        rest = model(input_ids[:, 6:], cache=output_cache(first), use_cache=True)
    assert output_cache(first).get_seq_length() == 10
    torch.testing.assert_close(rest.logits, full[:, 6:], atol=1e-5, rtol=0)


def test_left_padded_batch_generates_as_each_prompt_alone():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    assert_left_padded_generation_matches(model, [torch.tensor([5, 6, 7, 8, 9]), torch.tensor([11, 12, 13])], 6)


def test_causal_lm_loss_is_shifted():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    input_ids = torch.randint(1, 99, (2, 8))
    with torch.no_grad():
        output = model(input_ids, labels=input_ids)
    expected = torch.nn.functional.cross_entropy(output.logits[:, :-1].reshape(-1, 99), input_ids[:, 1:].reshape(-1))
    torch.testing.assert_close(output.loss, expected)


def encoder_decoder(attn_implementation="sdpa"):
    """A RoFormer encoder and a RoFormer decoder with cross-attention, as in the paper's translation experiments."""
    torch.manual_seed(0)
    encoder = hf_roformer.HfRoFormerModel(tiny_config(attn_implementation=attn_implementation))
    decoder = hf_roformer.HfRoFormerForCausalLM(
        tiny_config(is_decoder=True, add_cross_attention=True, attn_implementation=attn_implementation)
    )
    model = EncoderDecoderModel(encoder=encoder, decoder=decoder).eval()
    model.config.decoder_start_token_id = 1
    model.config.pad_token_id = 0
    model.generation_config.decoder_start_token_id = 1
    model.generation_config.pad_token_id = 0
    return model


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_encoder_decoder_generation_with_cache_is_exact(backend):
    model = encoder_decoder(backend)
    source = torch.randint(2, 99, (2, 7))
    source_mask = torch.ones_like(source)
    source_mask[1, 5:] = 0
    output = model.generate(
        source,
        attention_mask=source_mask,
        max_new_tokens=6,
        min_new_tokens=6,
        do_sample=False,
        return_dict_in_generate=True,
        output_logits=True,
    )
    sequences = output.sequences
    with torch.no_grad():
        for step, step_logits in enumerate(output.logits):
            recomputed = model(
                input_ids=source,
                attention_mask=source_mask,
                decoder_input_ids=sequences[:, : step + 1],
                use_cache=False,
            ).logits[:, -1]
            torch.testing.assert_close(step_logits, recomputed, atol=1e-5, rtol=0)


def test_encoder_decoder_trains_and_round_trips(tmp_path):
    model = encoder_decoder()
    source = torch.randint(2, 99, (2, 7))
    labels = torch.randint(2, 99, (2, 5))
    output = model(input_ids=source, labels=labels)
    output.loss.backward()
    assert model.decoder.roformer.encoder.layer[0].crossattention.self.query.weight.grad.abs().sum() > 0
    model.save_pretrained(tmp_path)
    reloaded = EncoderDecoderModel.from_pretrained(tmp_path).eval()
    assert isinstance(reloaded.encoder, hf_roformer.HfRoFormerModel)
    assert isinstance(reloaded.decoder, hf_roformer.HfRoFormerForCausalLM)
    with torch.no_grad():
        torch.testing.assert_close(
            reloaded(input_ids=source, labels=labels).logits, model(input_ids=source, labels=labels).logits
        )


def test_cross_attention_decoder_generates_with_encoder_states_as_without_cache():
    """`generate` on a decoder given `encoder_hidden_states` (a plain self-attention cache is handed in) decodes
    greedily what uncached forwards decode."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True, add_cross_attention=True)).eval()
    encoder_states = torch.randn(2, 5, 32)
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    generated = model.generate(prompt, encoder_hidden_states=encoder_states, max_new_tokens=4, do_sample=False)
    expected = prompt
    with torch.no_grad():
        for _ in range(4):
            logits = model(expected, encoder_hidden_states=encoder_states, use_cache=False).logits
            expected = torch.cat([expected, logits[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(generated, expected)


@pytest.mark.parametrize("length", [1, 5, 7])
def test_feed_forward_chunks_give_the_unchunked_result_at_any_length(length):
    torch.manual_seed(0)
    chunked = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True, chunk_size_feed_forward=3)).eval()
    plain = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    plain.load_state_dict(chunked.state_dict())
    input_ids = torch.randint(1, 99, (2, length))
    with torch.no_grad():
        torch.testing.assert_close(chunked(input_ids).logits, plain(input_ids).logits, atol=1e-5, rtol=0)
    assert torch.equal(
        chunked.generate(input_ids, max_new_tokens=3, do_sample=False),
        plain.generate(input_ids, max_new_tokens=3, do_sample=False),
    )
