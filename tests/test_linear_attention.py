"""RoPE with linear attention (paper eq. 19): equal to a naive O(N^2) evaluation of the formula, exact recurrent
decoding, relative positions, every head, rope scaling."""

import pytest
import torch
from conftest import assert_left_padded_generation_matches, rotation_matrix, tiny_config

import hf_roformer
from hf_roformer.remote_code.linear_attention_hf_roformer import causal_linear_attention, linear_attention_features
from hf_roformer.remote_code.releases_hf_roformer import output_cache
from hf_roformer.remote_code.rotary_hf_roformer import rope_inverse_frequencies, rotate_interleaved


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


FEATURES = {
    "elu": (lambda x: torch.nn.functional.elu(x) + 1, lambda x: torch.nn.functional.elu(x) + 1),
    "relu": (torch.relu, torch.relu),
    "softmax": (lambda x: x.softmax(-1), torch.exp),
}


def naive_eq19(q, k, v, positions, inv_freq, feature_map, causal, key_mask, order, eps=1e-6):
    """Eq. 19 term by term for one head, float64: sum_n (R_m phi(q_m))^T (R_n phi(k_n)) v_n / sum_n phi(q_m)^T phi(k_n),
    or, in the "before_feature_map" order, phi(R_m q_m)^T phi(R_n k_n) in both sums."""
    phi_q, phi_k = FEATURES[feature_map]
    rotations = [rotation_matrix(position * inv_freq) for position in positions]
    output = torch.zeros_like(v)
    for m in range(q.shape[0]):
        numerator, denominator = torch.zeros_like(v[0]), 0.0
        for n in range(k.shape[0]):
            if (causal and n > m) or not key_mask[n]:
                continue
            if order == "after_feature_map":
                weight = (rotations[m] @ phi_q(q[m])) @ (rotations[n] @ phi_k(k[n]))
                denominator += phi_q(q[m]) @ phi_k(k[n])
            else:
                weight = phi_q(rotations[m] @ q[m]) @ phi_k(rotations[n] @ k[n])
                denominator += weight
            numerator += weight * v[n]
        output[m] = numerator / max(denominator, eps)
    return output


def capture_attention_output(model):
    """Record what the first layer's linear self-attention returns."""
    captured = {}
    attention = model.encoder.layer[0].attention.self
    attention.register_forward_hook(lambda module, args, output: captured.update(output=output[0]))
    return captured


def projections(model, input_ids, token_type_ids=None):
    """Float64 per-head q, k, v of the first layer: `(N, heads, d)` each, batch row 0."""
    attention = model.encoder.layer[0].attention.self
    hidden = model.embeddings(input_ids, token_type_ids)[0].double()
    heads, dim = model.config.num_attention_heads, model.config.head_dim

    def project(linear):
        return (hidden @ linear.weight.double().T + linear.bias.double()).view(-1, heads, dim)

    return project(attention.query), project(attention.key), project(attention.value)


@pytest.mark.parametrize("feature_map", sorted(FEATURES))
@pytest.mark.parametrize("order", ["after_feature_map", "before_feature_map"])
@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_model_equals_naive_eq19(feature_map, order, is_decoder, padded):
    torch.manual_seed(0)
    config = tiny_config(
        num_hidden_layers=1,
        attention_type="linear",
        linear_feature_map=feature_map,
        linear_rotation_order=order,
        is_decoder=is_decoder,
        linear_chunk_size=3,
        use_cache=False,
    )
    model = hf_roformer.HfRoFormerModel(config).eval()
    captured = capture_attention_output(model)
    input_ids = torch.randint(1, 99, (1, 10))
    attention_mask = torch.ones_like(input_ids)
    if padded:
        attention_mask[0, 7:] = 0
    with torch.no_grad():
        model(input_ids, attention_mask=attention_mask)
        q, k, v = projections(model, input_ids)
    inv_freq = rope_inverse_frequencies(config)
    real = attention_mask[0].bool()
    expected = torch.stack(
        [
            naive_eq19(q[:, h], k[:, h], v[:, h], range(10), inv_freq, feature_map, is_decoder, real, order)
            for h in range(config.num_attention_heads)
        ],
        dim=1,
    ).reshape(10, -1)
    actual = captured["output"][0].double()
    torch.testing.assert_close(actual[real], expected[real], atol=1e-5, rtol=1e-5)


def test_weights_can_be_negative_and_the_denominator_is_unrotated():
    """The paper: eq. 19's weights are not a probability distribution; a rotated numerator can go negative."""
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 6, 8), torch.randn(1, 1, 6, 8)
    config = tiny_config()
    cos, sin = hf_roformer.HfRoFormerModel(config).rotary_emb(torch.arange(6)[None] * 37)
    features = linear_attention_features(
        q, k, lambda x: rotate_interleaved(x, cos, sin), "elu", "after_feature_map", None
    )
    weights = features.numerator_query[0, 0] @ features.numerator_key[0, 0].T
    assert (weights < 0).any()
    assert (features.denominator_query[0, 0] @ features.denominator_key[0, 0].T > 0).all()


@pytest.mark.parametrize("chunk_size", [1, 3, 16, 64])
def test_chunking_does_not_change_causal_outputs(chunk_size):
    torch.manual_seed(0)
    features = linear_attention_features(
        torch.randn(2, 3, 37, 8), torch.randn(2, 3, 37, 8), lambda x: x, "elu", "after_feature_map", None
    )
    value = torch.randn(2, 3, 37, 8)
    reference, reference_state = causal_linear_attention(features, value, 1e-6, chunk_size=37)
    output, state = causal_linear_attention(features, value, 1e-6, chunk_size=chunk_size)
    torch.testing.assert_close(output, reference, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(state[0], reference_state[0], atol=1e-4, rtol=1e-5)
    # continuing from a state equals running on the concatenation
    first, first_state = causal_linear_attention(
        features._replace(**{k: v[:, :, :20] for k, v in features._asdict().items()}),
        value[:, :, :20],
        1e-6,
        chunk_size,
    )
    rest, _ = causal_linear_attention(
        features._replace(**{k: v[:, :, 20:] for k, v in features._asdict().items()}),
        value[:, :, 20:],
        1e-6,
        chunk_size,
        first_state,
    )
    torch.testing.assert_close(torch.cat([first, rest], dim=2), reference, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("feature_map", sorted(FEATURES))
@pytest.mark.parametrize("rotary_value", [False, True])
def test_recurrent_generation_equals_full_forward(feature_map, rotary_value):
    torch.manual_seed(0)
    config = tiny_config(
        is_decoder=True, attention_type="linear", linear_feature_map=feature_map, rotary_value=rotary_value
    )
    model = hf_roformer.HfRoFormerForCausalLM(config).eval()
    prompt = torch.randint(1, 99, (1, 7))
    output = model.generate(
        prompt,
        max_new_tokens=10,
        min_new_tokens=10,
        do_sample=False,
        return_dict_in_generate=True,
        output_logits=True,
        pad_token_id=0,
    )
    assert isinstance(output_cache(output), hf_roformer.HfRoFormerLinearAttentionCache)
    assert output_cache(output).get_seq_length() == 16  # the last generated token is not fed back
    with torch.no_grad():
        full = model(output.sequences, use_cache=False).logits
    for step, logits in enumerate(output.logits):
        difference = (logits - full[:, 6 + step]).abs().max().item()
        assert difference <= 1e-5, f"step {step}: max |delta logits| = {difference}"


def test_left_padded_linear_generation_matches_each_prompt():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True, attention_type="linear")).eval()
    assert_left_padded_generation_matches(model, [torch.tensor([5, 6, 7, 8, 9]), torch.tensor([11, 12])], 6)


@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("shift", [1, 500, 20000])
def test_shifting_positions_leaves_outputs_unchanged(is_decoder, shift, batch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config(attention_type="linear", is_decoder=is_decoder, use_cache=False))
    model.eval()
    positions = torch.arange(batch["input_ids"].shape[1])[None]
    with torch.no_grad():
        base = model(**batch, position_ids=positions).last_hidden_state
        shifted = model(**batch, position_ids=positions + shift).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(shifted[real], base[real], atol=1e-4, rtol=0)


def test_padded_batch_equals_each_sequence_alone(batch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config(attention_type="linear")).eval()
    with torch.no_grad():
        padded = model(**batch).last_hidden_state
        alone = model(input_ids=batch["input_ids"][1:, :6], token_type_ids=batch["token_type_ids"][1:, :6])
    torch.testing.assert_close(padded[1, :6], alone.last_hidden_state[0], atol=1e-5, rtol=0)


HEADS = [
    "HfRoFormerModel",
    "HfRoFormerForMaskedLM",
    "HfRoFormerForCausalLM",
    "HfRoFormerForSequenceClassification",
    "HfRoFormerForTokenClassification",
    "HfRoFormerForMultipleChoice",
    "HfRoFormerForQuestionAnswering",
]


@pytest.mark.parametrize("head", HEADS)
def test_every_head_trains_and_round_trips(head, batch, tmp_path):
    torch.manual_seed(0)
    config = tiny_config(
        attention_type="linear",
        linear_feature_map="softmax",
        linear_rotation_order="before_feature_map",
        is_decoder=head == "HfRoFormerForCausalLM",
        num_labels=3,
    )
    model = getattr(hf_roformer, head)(config)
    inputs = dict(batch)
    if head == "HfRoFormerForMultipleChoice":
        inputs = {key: value[:, None].expand(-1, 2, -1) for key, value in batch.items()}
    output = model(**inputs)
    output[0].float().pow(2).mean().backward()
    assert model.base_model.encoder.layer[0].attention.self.query.weight.grad.abs().sum() > 0
    model.save_pretrained(tmp_path)
    reloaded = getattr(hf_roformer, head).from_pretrained(tmp_path)
    assert reloaded.config.attention_type == "linear"
    assert reloaded.config.linear_rotation_order == "before_feature_map"
    assert type(reloaded.base_model.encoder.layer[0].attention.self).__name__ == "HfRoFormerLinearSelfAttention"
    model.eval(), reloaded.eval()
    with torch.no_grad():
        assert torch.equal(reloaded(**inputs)[0], model(**inputs)[0])


@pytest.mark.parametrize(
    "rope_parameters",
    [
        {"rope_type": "linear", "factor": 2.0},
        {"rope_type": "ntk", "factor": 2.0},
        {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8},
    ],
)
def test_static_rope_scaling_in_a_linear_decoder_equals_naive(rope_parameters):
    torch.manual_seed(0)
    config = tiny_config(
        num_hidden_layers=1, attention_type="linear", is_decoder=True, use_cache=False, rope_parameters=rope_parameters
    )
    model = hf_roformer.HfRoFormerModel(config).eval()
    captured = capture_attention_output(model)
    input_ids = torch.randint(1, 99, (1, 9))
    with torch.no_grad():
        model(input_ids)
        q, k, v = projections(model, input_ids)
    inv_freq = rope_inverse_frequencies(config)
    expected = torch.stack(
        [
            naive_eq19(q[:, h], k[:, h], v[:, h], range(9), inv_freq, "elu", True, [1] * 9, "after_feature_map")
            for h in range(config.num_attention_heads)
        ],
        dim=1,
    ).reshape(9, -1)
    torch.testing.assert_close(captured["output"][0].double(), expected, atol=1e-5, rtol=1e-5)


def test_dynamic_rope_works_in_a_linear_encoder_and_is_refused_in_a_decoder():
    dynamic = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 8}
    encoder = hf_roformer.HfRoFormerModel(tiny_config(attention_type="linear", rope_parameters=dynamic)).eval()
    with torch.no_grad():
        assert torch.isfinite(encoder(torch.randint(1, 99, (2, 30))).last_hidden_state).all()
    with pytest.raises(ValueError, match="rope_type"):
        tiny_config(attention_type="linear", is_decoder=True, rope_parameters=dynamic)


def test_bfloat16_model_accumulates_in_float32():
    torch.manual_seed(0)
    config = tiny_config(attention_type="linear", is_decoder=True, use_cache=False)
    model = hf_roformer.HfRoFormerForCausalLM(config).eval()
    input_ids = torch.randint(1, 99, (2, 300))
    with torch.no_grad():
        reference = model(input_ids).logits
        low = model.to(torch.bfloat16)(input_ids).logits.float()
    assert low.dtype == torch.float32
    relative = (low - reference).norm() / reference.norm()
    assert relative < 2e-2


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"attention_type": "performer"}, "attention_type"),
        ({"linear_feature_map": "gelu"}, "linear_feature_map"),
        ({"linear_rotation_order": "eq19"}, "linear_rotation_order"),
        ({"linear_attention_eps": 0.0}, "linear_attention_eps"),
        ({"linear_chunk_size": 0}, "linear_chunk_size"),
    ],
)
def test_invalid_linear_attention_settings(overrides, field):
    with pytest.raises(ValueError, match=field):
        tiny_config(**overrides)
