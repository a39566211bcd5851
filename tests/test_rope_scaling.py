"""Rope scaling: frequencies equal transformers' and the formulas of the seed article and the YaRN paper, the
interleaved layout holds for scaled frequencies, dynamic types are exact with a cache, validation raises."""

import copy
import math

import pytest
import torch
from conftest import (
    assert_cached_generation_exact,
    assert_left_padded_generation_matches,
    rotation_matrix,
    tiny_config,
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import hf_roformer
from hf_roformer.remote_code.config_rules_hf_roformer import rope_attention_factor
from hf_roformer.remote_code.rotary_hf_roformer import rope_inverse_frequencies


pytestmark = [  # see setup.cfg
    pytest.mark.releases("remote_code.rotary_hf_roformer", "remote_code.configuration_hf_roformer"),
]


HEAD_DIMS = [8, 64, 128]
BASES = [10000.0, 500000.0]
FACTORS = [1.0, 2.0, 8.0]


def config_for(head_dim: int, rope_parameters: dict, max_position_embeddings: int = 64, **overrides):
    """A config with the given head dim (two heads) and rope parameters."""
    return hf_roformer.HfRoFormerConfig(
        vocab_size=99,
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=16,
        max_position_embeddings=max_position_embeddings,
        rope_parameters=rope_parameters,
        **overrides,
    )


def transformers_view(config, max_position_embeddings: int):
    """A copy of `config` whose `max_position_embeddings` is the original length, as transformers' dynamic NTK
    function reads it there."""
    view = copy.deepcopy(config)
    view.max_position_embeddings = max_position_embeddings
    return view


# -- frequencies ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("rope_type", ["linear", "yarn", "llama3"])
def test_shared_types_equal_transformers_functions(rope_type, head_dim, base, factor):
    parameters = {"rope_type": rope_type, "rope_theta": base, "factor": factor}
    if rope_type in ("yarn", "llama3"):
        parameters["original_max_position_embeddings"] = 32
    if rope_type == "llama3":
        parameters.update(low_freq_factor=1.0, high_freq_factor=4.0)
    config = config_for(head_dim, parameters)
    expected, expected_factor = ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("cpu"))
    actual = rope_inverse_frequencies(config)
    assert actual.dtype == torch.float64
    assert torch.equal(actual.float(), expected)
    assert rope_attention_factor(config) == expected_factor


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("lengths", [[1, 32, 64], [65, 100, 1000, 40000]])
def test_longrope_equals_transformers_per_length(head_dim, base, lengths):
    short = [1.0 + 0.1 * i for i in range(head_dim // 2)]
    long = [2.0 + 0.5 * i for i in range(head_dim // 2)]
    parameters = {
        "rope_type": "longrope",
        "rope_theta": base,
        "short_factor": short,
        "long_factor": long,
        "original_max_position_embeddings": 64,
    }
    config = config_for(head_dim, parameters, max_position_embeddings=256)
    actual = rope_inverse_frequencies(config, torch.tensor(lengths))
    for row, length in enumerate(lengths):
        expected, _ = ROPE_INIT_FUNCTIONS["longrope"](config, torch.device("cpu"), seq_len=length)
        assert torch.equal(actual[row].float(), expected), length
    assert rope_attention_factor(config) == pytest.approx(math.sqrt(1 + math.log(4) / math.log(64)))


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("factor", FACTORS)
def test_dynamic_equals_the_article_and_transformers(head_dim, base, factor):
    original = 32
    config = config_for(
        head_dim,
        {"rope_type": "dynamic", "rope_theta": base, "factor": factor, "original_max_position_embeddings": original},
    )
    lengths = [1, 16, 32, 33, 100, 5000]
    actual = rope_inverse_frequencies(config, torch.tensor(lengths))
    for row, length in enumerate(lengths):
        # the article: base * ((s * L' / L) - (s - 1))^(d / (d - 2)) for L' > L, the original base below
        scaled = base * ((factor * length / original) - (factor - 1)) ** (head_dim / (head_dim - 2))
        article_base = scaled if length > original else base
        article = torch.tensor([article_base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
        torch.testing.assert_close(actual[row], article, rtol=1e-12, atol=0)
        theirs, _ = ROPE_INIT_FUNCTIONS["dynamic"](transformers_view(config, original), torch.device("cpu"), length)
        torch.testing.assert_close(actual[row].float(), theirs, rtol=2e-6, atol=0)


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("factor", [2.0, 8.0])
def test_ntk_equals_the_article(head_dim, base, factor):
    config = config_for(head_dim, {"rope_type": "ntk", "rope_theta": base, "factor": factor})
    ntk_base = base * factor ** (head_dim / (head_dim - 2))
    expected = torch.tensor([ntk_base ** (-2 * i / head_dim) for i in range(head_dim // 2)], dtype=torch.float64)
    torch.testing.assert_close(rope_inverse_frequencies(config), expected, rtol=1e-12, atol=0)
    assert rope_attention_factor(config) == 1.0


def yarn_reference(head_dim, base, factor, original, beta_fast=32.0, beta_slow=1.0):
    """YaRN's NTK-by-parts frequencies and temperature, written from the YaRN paper and its reference code in float64:
    dimensions that rotate more than beta_fast times over the original length keep their frequency, those rotating
    less than beta_slow times are interpolated by 1/s, a linear ramp over dimension indices joins them, and
    sqrt(1/t) = 0.1 ln s + 1."""

    def correction_dimension(rotations):
        return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dimension(beta_fast)), 0)
    high = min(math.ceil(correction_dimension(beta_slow)), head_dim - 1)
    if low == high:
        high += 0.001
    frequencies = []
    for i in range(head_dim // 2):
        theta = base ** (-2 * i / head_dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)  # 0: keep theta (extrapolate), 1: theta / s
        frequencies.append(theta / factor * ramp + theta * (1 - ramp))
    temperature = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return torch.tensor(frequencies, dtype=torch.float64), temperature


@pytest.mark.parametrize("head_dim", HEAD_DIMS)
@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("factor", [2.0, 4.0, 16.0])
@pytest.mark.parametrize("original", [64, 512, 4096])
def test_yarn_equals_the_papers_formulas(head_dim, base, factor, original):
    parameters = {
        "rope_type": "yarn",
        "rope_theta": base,
        "factor": factor,
        "original_max_position_embeddings": original,
    }
    config = config_for(head_dim, parameters)
    expected, temperature = yarn_reference(head_dim, base, factor, original)
    torch.testing.assert_close(rope_inverse_frequencies(config), expected, rtol=2e-6, atol=0)
    assert rope_attention_factor(config) == pytest.approx(temperature, rel=1e-12)


# -- the model -----------------------------------------------------------------------------------------------------


SCALED = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "ntk": {"rope_type": "ntk", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 8},
}


@pytest.mark.parametrize("name", sorted(SCALED))
@pytest.mark.parametrize("rotary_value", [False, True])
def test_scaled_attention_equals_eq_34_reference(name, rotary_value):
    """Eager attention weights and outputs of a scaled model equal a direct computation with rotation matrices built
    from the scaled frequencies; YaRN's temperature multiplies the logits (squared factor), never the values."""
    torch.manual_seed(0)
    config = tiny_config(num_hidden_layers=1, rope_parameters=SCALED[name], rotary_value=rotary_value)
    model = hf_roformer.HfRoFormerModel(config).eval()
    model.set_attn_implementation("eager")
    length, heads, dim = 12, config.num_attention_heads, config.head_dim
    input_ids = torch.randint(1, 99, (1, length))
    attention = model.encoder.layer[0].attention.self
    captured = {}
    attention.register_forward_hook(lambda module, args, output: captured.update(output=output[0]))
    with torch.no_grad():
        weights = model(input_ids, output_attentions=True).attentions[0][0].double()
        hidden = model.embeddings(input_ids)[0].double()

        def project(linear):
            return (hidden @ linear.weight.double().T + linear.bias.double()).view(length, heads, dim)

        q, k, v = project(attention.query), project(attention.key), project(attention.value)
    lengths = torch.tensor(length) if name == "dynamic" else None
    inv_freq = rope_inverse_frequencies(config, lengths)
    logit_scale = rope_attention_factor(config) ** 2 / math.sqrt(dim)
    rotations = [rotation_matrix(position * inv_freq) for position in range(length)]
    scores = torch.empty(heads, length, length, dtype=torch.float64)
    for m in range(length):
        for n in range(length):
            scores[:, m, n] = ((q[m] @ rotations[m].T) * (k[n] @ rotations[n].T)).sum(-1) * logit_scale
    expected_weights = scores.softmax(-1)
    torch.testing.assert_close(weights, expected_weights, atol=1e-5, rtol=0)
    values = torch.stack([v[n] @ rotations[n].T for n in range(length)]) if rotary_value else v  # (len, heads, d)
    expected_output = torch.einsum("hmn,nhd->mhd", expected_weights, values).reshape(length, heads * dim)
    torch.testing.assert_close(captured["output"][0].double(), expected_output, atol=1e-5, rtol=0)


def test_yarn_temperature_is_applied_once():
    config = tiny_config(rope_parameters=SCALED["yarn"])
    attention = hf_roformer.HfRoFormerModel(config).encoder.layer[0].attention.self
    temperature = 0.1 * math.log(4.0) + 1
    assert attention.scaling == pytest.approx(temperature**2 / math.sqrt(config.head_dim))
    cos, sin = hf_roformer.HfRoFormerModel(config).rotary_emb(torch.arange(5)[None])
    torch.testing.assert_close(cos**2 + sin**2, torch.ones_like(cos))  # cos/sin are not scaled


def test_dynamic_encoder_uses_each_sequence_length():
    """Short inputs: exactly the default model. Long inputs: the default model with the article's base at that
    length. Padded rows use their own real length."""
    torch.manual_seed(0)
    original, factor = 8, 4.0
    dynamic_parameters = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": 8}
    # large weights, so that attention is far from uniform and the rotations visibly matter
    dynamic = hf_roformer.HfRoFormerModel(tiny_config(rope_parameters=dynamic_parameters, initializer_range=0.5)).eval()
    default = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    default.load_state_dict(dynamic.state_dict())
    short = torch.randint(1, 99, (1, original))
    long = torch.randint(1, 99, (1, 20))
    with torch.no_grad():
        assert torch.equal(dynamic(short).last_hidden_state, default(short).last_hidden_state)
        scaled_base = 10000.0 * ((factor * 20 / original) - (factor - 1)) ** (8 / 6)
        at_length = hf_roformer.HfRoFormerModel(tiny_config(rope_theta=scaled_base)).eval()
        at_length.load_state_dict(dynamic.state_dict())
        long_output = dynamic(long).last_hidden_state
        torch.testing.assert_close(long_output, at_length(long).last_hidden_state, atol=1e-5, rtol=0)
        assert (long_output - default(long).last_hidden_state).abs().max() > 1e-3
        padded_ids = torch.cat([long, torch.cat([short, torch.zeros(1, 12, dtype=torch.long)], 1)])
        mask = (padded_ids != 0).long()
        mask[0] = 1
        padded = dynamic(padded_ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(padded[0], long_output[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(padded[1, :original], default(short).last_hidden_state[0], atol=1e-5, rtol=0)


CAUSAL_TYPES = {
    **SCALED,
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0, 1.5, 2.0, 3.0],
        "long_factor": [2.0, 4.0, 8.0, 16.0],
        "original_max_position_embeddings": 8,
    },
}


@pytest.mark.parametrize("name", sorted(CAUSAL_TYPES))
@pytest.mark.parametrize("rotary_value", [False, True])
def test_cached_generation_across_the_original_length_is_exact(name, rotary_value):
    torch.manual_seed(0)
    config = tiny_config(
        is_decoder=True, rope_parameters=CAUSAL_TYPES[name], rotary_value=rotary_value, max_position_embeddings=8
    )
    model = hf_roformer.HfRoFormerForCausalLM(config).eval()
    assert_cached_generation_exact(model, torch.randint(1, 99, (1, 5)), steps=14)  # lengths 5 to 19, across 8


@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_length_dependent_left_padded_generation_matches_each_prompt(name):
    torch.manual_seed(0)
    config = tiny_config(is_decoder=True, rope_parameters=CAUSAL_TYPES[name], max_position_embeddings=8)
    model = hf_roformer.HfRoFormerForCausalLM(config).eval()
    assert_left_padded_generation_matches(model, [torch.tensor([5, 6, 7, 8, 9, 10]), torch.tensor([11, 12, 13])], 8)


def test_length_dependent_decoder_below_the_original_length_equals_default():
    torch.manual_seed(0)
    dynamic = hf_roformer.HfRoFormerForCausalLM(
        tiny_config(is_decoder=True, rope_parameters=SCALED["dynamic"], max_position_embeddings=8)
    ).eval()
    default = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    default.load_state_dict(dynamic.state_dict())
    input_ids = torch.randint(1, 99, (2, 8))
    with torch.no_grad():
        torch.testing.assert_close(dynamic(input_ids).logits, default(input_ids).logits, atol=1e-5, rtol=0)


# -- precision -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["default", *sorted(CAUSAL_TYPES)])
def test_angles_at_a_million_in_a_bf16_model(name):
    """cos/sin at position 1,000,000 equal a float64 evaluation of the frequencies the rope type defines."""
    parameters = {"rope_type": "default"} if name == "default" else CAUSAL_TYPES[name]
    model = hf_roformer.HfRoFormerModel(tiny_config(rope_parameters=parameters)).to(torch.bfloat16)
    position = 1_000_000
    lengths = torch.tensor([[position + 1]])
    cos, sin = model.rotary_emb(torch.tensor([[position]]), lengths=lengths)
    inv_freq = rope_inverse_frequencies(model.config, lengths)
    expected_cos = torch.tensor([math.cos(position * f) for f in inv_freq.flatten().tolist()], dtype=torch.float64)
    expected_sin = torch.tensor([math.sin(position * f) for f in inv_freq.flatten().tolist()], dtype=torch.float64)
    torch.testing.assert_close(cos.flatten().double(), expected_cos, atol=1e-6, rtol=0)
    torch.testing.assert_close(sin.flatten().double(), expected_sin, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", ["default", "ntk", "dynamic"])
def test_float64_types_are_exact_against_the_closed_form(name):
    """Types computed here in float64 match the closed-form frequencies evaluated in Python at position 10^6."""
    parameters = {"rope_type": "default"} if name == "default" else CAUSAL_TYPES[name]
    config = tiny_config(rope_parameters=parameters)
    base = 10000.0
    if name == "ntk":
        base = base * 4.0 ** (8 / 6)
    position = 1_000_000
    if name == "dynamic":
        base = base * ((4.0 * (position + 1) / 8) - 3.0) ** (8 / 6)
    model = hf_roformer.HfRoFormerModel(config).to(torch.bfloat16)
    cos, _ = model.rotary_emb(torch.tensor([[position]]), lengths=torch.tensor([[position + 1]]))
    expected = [math.cos(position * base ** (-2 * i / 8)) for i in range(4)]
    torch.testing.assert_close(cos.flatten().double(), torch.tensor(expected, dtype=torch.float64), atol=1e-6, rtol=0)


# -- configuration -------------------------------------------------------------------------------------------------


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8}
LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 4,
    "long_factor": [1.0] * 4,
    "original_max_position_embeddings": 8,
}
LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}
INVALID_ROPE_PARAMETERS = [
    ({"rope_type": "su"}, "rope_type"),
    ({"rope_type": "linear"}, "factor"),
    ({"rope_type": "dynamic", "factor": "two"}, "factor"),
    ({"rope_type": "ntk", "factor": 0.5}, "factor"),
    ({"rope_type": "yarn", "factor": 4.0}, "original_max_position_embeddings"),
    ({**YARN, "beta_fast": 1, "beta_slow": 2}, "beta_fast"),
    ({**YARN, "attention_factor": -1.0}, "attention_factor"),
    ({**LONGROPE, "short_factor": [1.0] * 3}, "short_factor"),
    ({**LONGROPE, "long_factor": [1.0] * 5}, "long_factor"),
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": 0.5}, "partial_rotary_factor"),
    ({"rope_type": "default", "rope_theta": -1.0}, "rope_theta"),
    # Every key a type reads: ranges, types, null, NaN/inf; and what the keys give together.
    ({"rope_type": "default", "rope_theta": 1.0}, "rope_theta"),
    ({"rope_type": "linear", "factor": float("inf")}, "factor"),
    ({"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": None}, "partial_rotary_factor"),
    ({"rope_type": "ntk", "factor": 1e300}, "factor"),
    (
        {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 0},
        "original_max_position_embeddings",
    ),
    ({**YARN, "beta_slow": -1.0}, "beta_slow"),
    ({**YARN, "beta_fast": float("nan")}, "beta_fast"),
    ({**YARN, "truncate": None}, "truncate"),
    ({**YARN, "truncate": "yes"}, "truncate"),
    ({**YARN, "mscale": -1.0}, "mscale"),
    ({**YARN, "mscale": 1e300, "mscale_all_dim": 1e-300}, "mscale"),
    ({**YARN, "attention_factor": 0.0}, "attention_factor"),
    ({**YARN, "attention_factor": 10.5}, "attention_factor"),
    ({**LONGROPE, "short_factor": [0.0] * 4}, "short_factor"),
    ({**LONGROPE, "long_factor": [1.0, 1.0, "a", 1.0]}, "long_factor"),
    ({**LONGROPE, "original_max_position_embeddings": 1}, "original_max_position_embeddings"),
    ({**LLAMA3, "low_freq_factor": "1"}, "low_freq_factor"),
    ({**LLAMA3, "high_freq_factor": 0.5}, "high_freq_factor"),
    ({"rope_type": "proportional", "partial_rotary_factor": 0.0}, "partial_rotary_factor"),
    ({"rope_type": "proportional", "partial_rotary_factor": None}, "partial_rotary_factor"),
    ({"rope_type": "proportional", "factor": None}, "factor"),
    ({"rope_type": "linear", "type": "dynamic", "factor": 2.0}, "type"),
]


@pytest.mark.parametrize(("parameters", "key"), INVALID_ROPE_PARAMETERS)
def test_invalid_rope_parameters_name_the_key(parameters, key):
    with pytest.raises(ValueError, match=rf"\['{key}'\]"):
        tiny_config(rope_parameters=parameters)


@pytest.mark.parametrize(
    ("rope_type", "head_dim", "accepted"),
    [("ntk", 2, False), ("dynamic", 2, False), ("ntk", 4, True), ("linear", 2, True)],
)
def test_ntk_types_need_a_head_dimension_of_four(rope_type, head_dim, accepted):
    """base * s^(d / (d - 2)) divides by zero at d = 2 (it was a `ZeroDivisionError` in the forward)."""
    parameters = {"rope_type": rope_type, "factor": 2.0}
    if accepted:
        assert config_for(head_dim, parameters).head_dim == head_dim
        return
    with pytest.raises(ValueError, match=rf"rope_type '{rope_type}' needs a head dimension of at least 4"):
        config_for(head_dim, parameters)


@pytest.mark.parametrize(
    ("rope_type", "key", "parameters"),
    [
        ("yarn", "beta_fast", YARN),
        ("yarn", "beta_slow", YARN),
        ("yarn", "attention_factor", YARN),
        ("yarn", "mscale", {**YARN, "mscale_all_dim": 1.0}),
        ("dynamic", "original_max_position_embeddings", {"rope_type": "dynamic", "factor": 2.0}),
        ("longrope", "factor", LONGROPE),
    ],
)
def test_null_where_the_reader_treats_it_as_absent(rope_type, key, parameters):
    """`null` in a config file is accepted exactly where transformers' (or our) reader treats it like a missing key:
    the frequencies and the attention factor are those without the key."""
    absent = config_for(8, dict(parameters))
    null = config_for(8, {**parameters, key: None})
    torch.testing.assert_close(rope_inverse_frequencies(null), rope_inverse_frequencies(absent), rtol=0, atol=0)
    assert rope_attention_factor(null) == rope_attention_factor(absent)


def test_keys_a_type_does_not_read_are_only_logged(caplog):
    config = config_for(8, {"rope_type": "linear", "factor": 2.0, "beta_fast": "unused"})
    assert config.rope_parameters["beta_fast"] == "unused"
    assert "`rope_parameters` keys ['beta_fast'] are not read by rope_type 'linear'." in caplog.text


def test_attention_factor_at_its_bound_is_accepted():
    assert rope_attention_factor(config_for(8, {**YARN, "attention_factor": 10.0})) == 10.0


def test_legacy_rope_scaling_round_trips_as_rope_parameters(tmp_path):
    config = tiny_config(rope_scaling={"type": "dynamic", "factor": 2.0}, rope_theta=20000.0)
    assert config.rope_parameters == {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 20000.0}
    config.save_pretrained(tmp_path)
    text = (tmp_path / "config.json").read_text()
    assert '"rope_parameters"' in text and '"rope_scaling"' not in text
    assert hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path).rope_parameters == config.rope_parameters


def test_rope_parameters_at_load_time(tmp_path):
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(rope_theta=20000.0))
    model.save_pretrained(tmp_path)
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    loaded = hf_roformer.HfRoFormerForMaskedLM.from_pretrained(tmp_path, rope_parameters=yarn)
    assert loaded.config.rope_parameters == {**yarn, "rope_theta": 20000.0}
    assert loaded.roformer.encoder.layer[0].attention.self.scaling == pytest.approx(
        (0.1 * math.log(4.0) + 1) ** 2 / math.sqrt(8)
    )
    without_length = {"rope_type": "yarn", "factor": 2.0}
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        hf_roformer.HfRoFormerForMaskedLM.from_pretrained(tmp_path, rope_parameters=without_length)
