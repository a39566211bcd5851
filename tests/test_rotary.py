"""RoPE as the paper defines it: interleaved rotation (eq. 15/34), relative property (eq. 16), long-term decay
(appendix C), any length, and exact angles whatever the model dtype."""

import cmath
import math

import pytest
import torch
from conftest import rotation_matrix, tiny_config

import hf_roformer
from hf_roformer.apps.rope_analysis import long_term_decay_bound
from hf_roformer.remote_code.modeling_hf_roformer import HfRoFormerSelfAttention
from hf_roformer.remote_code.rotary_hf_roformer import (
    HfRoFormerRotaryEmbedding,
    TokenRotation,
    _rotate_pairs,
    apply_rotary_pos_emb,
    default_inverse_frequencies,
    in_halves,
    rotate_interleaved,
)


def paper_rotation(position: int, dim: int, base: float = 10000.0) -> torch.Tensor:
    """R^d_{Theta,m} of eq. 15 with theta_i = base^(-2i/d), for position m."""
    return rotation_matrix(
        torch.tensor([position * base ** (-2 * i / dim) for i in range(dim // 2)], dtype=torch.float64)
    )


def test_frequencies_are_the_papers():
    inv_freq = default_inverse_frequencies(64, 10000.0)
    expected = torch.tensor([10000.0 ** (-2 * i / 64) for i in range(32)], dtype=torch.float64)
    assert inv_freq.dtype == torch.float64
    torch.testing.assert_close(inv_freq, expected, atol=0, rtol=1e-15)


@pytest.mark.parametrize("dim", [8, 64])
def test_rotation_equals_block_diagonal_matrix(dim):
    """The efficient realization (eq. 34) equals multiplying by the sparse rotation matrix of eq. 15."""
    config = tiny_config(hidden_size=dim * 2, num_attention_heads=2)
    positions = torch.tensor([[0, 1, 5, 77, 1000, 65535]])
    cos, sin = HfRoFormerRotaryEmbedding(config)(positions)
    x = torch.randn(1, 2, positions.shape[1], dim, dtype=torch.float64)
    rotated = rotate_interleaved(x, cos, sin)
    for index, position in enumerate(positions[0].tolist()):
        expected = x[0, :, index] @ paper_rotation(position, dim).T
        torch.testing.assert_close(rotated[0, :, index], expected, atol=1e-6, rtol=0)


def test_rotary_value_rotates_values_and_only_when_given():
    config = tiny_config()
    cos, sin = HfRoFormerRotaryEmbedding(config)(torch.arange(5)[None])
    q, k, v = (torch.randn(1, 4, 5, 8) for _ in range(3))
    q2, k2, v2 = apply_rotary_pos_emb(q, k, cos, sin, value=v)
    torch.testing.assert_close(v2, rotate_interleaved(v, cos, sin))
    torch.testing.assert_close(q2, rotate_interleaved(q, cos, sin))
    assert apply_rotary_pos_emb(q, k, cos, sin)[2] is None


def test_attention_scores_depend_on_relative_position_as_eq_16():
    """Eager attention weights equal softmax(q_m^T R_{n-m} k_n / sqrt(d)) computed directly from the projections."""
    config = tiny_config(num_hidden_layers=1)
    model = hf_roformer.HfRoFormerModel(config).eval()
    model.set_attn_implementation("eager")
    input_ids = torch.randint(1, config.vocab_size, (1, 6))
    with torch.no_grad():
        weights = model(input_ids, output_attentions=True).attentions[0][0]
        hidden = model.embeddings(input_ids)[0].double()
        attention = model.encoder.layer[0].attention.self
        heads, dim = config.num_attention_heads, config.head_dim
        q = (hidden @ attention.query.weight.double().T + attention.query.bias.double()).view(6, heads, dim)
        k = (hidden @ attention.key.weight.double().T + attention.key.bias.double()).view(6, heads, dim)
    scores = torch.empty(heads, 6, 6, dtype=torch.float64)
    for m in range(6):
        for n in range(6):
            relative = paper_rotation(n - m, dim)
            scores[:, m, n] = torch.einsum("hd,de,he->h", q[m], relative, k[n]) / math.sqrt(dim)
    torch.testing.assert_close(weights.double(), scores.softmax(-1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("shift", [1, 1000, 12345])
@pytest.mark.parametrize("is_decoder", [False, True])
def test_shifting_all_positions_leaves_outputs_unchanged(shift, is_decoder, batch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config(is_decoder=is_decoder)).eval()
    positions = torch.arange(batch["input_ids"].shape[1])[None]
    with torch.no_grad():
        base = model(**batch, position_ids=positions).last_hidden_state
        shifted = model(**batch, position_ids=positions + shift).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(shifted[real], base[real], atol=1e-4, rtol=0)


def test_long_term_decay_bound():
    """Appendix C: the bound is (d/2 + 1)/2 at distance 0 and decays with relative distance."""
    distances = torch.arange(0, 1024)
    bound = long_term_decay_bound(distances, head_dim=128)
    assert bound[0].item() == pytest.approx((64 + 1) / 2)
    for distance in (3, 50, 700):  # independent evaluation of eq. 37's partial sums
        partial, total = 0j, 0.0
        for i in range(64):
            partial += cmath.exp(1j * distance * 10000 ** (-2 * i / 128))
            total += abs(partial)
        assert bound[distance].item() == pytest.approx(total / 64, rel=1e-12)
    window_means = [bound[start:stop].mean().item() for start, stop in ((0, 16), (16, 64), (64, 256), (256, 1024))]
    assert all(later < earlier for earlier, later in zip(window_means, window_means[1:], strict=False))
    assert bound[1:].max() < bound[0]


def test_runs_past_the_trained_length():
    """4096 tokens through a model trained at 64: no position table, no limit."""
    model = hf_roformer.HfRoFormerModel(tiny_config(max_position_embeddings=64)).eval()
    input_ids = torch.randint(1, 99, (1, 4096))
    with torch.no_grad():
        output = model(input_ids).last_hidden_state
    assert output.shape == (1, 4096, 32)
    assert torch.isfinite(output).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_angles_stay_exact_in_low_precision_models(dtype):
    model = hf_roformer.HfRoFormerModel(tiny_config()).to(dtype)
    position = 100_000
    cos, sin = model.rotary_emb(torch.tensor([[position]]))
    expected_cos = torch.tensor([math.cos(position * 10000 ** (-2 * i / 8)) for i in range(4)], dtype=torch.float64)
    expected_sin = torch.tensor([math.sin(position * 10000 ** (-2 * i / 8)) for i in range(4)], dtype=torch.float64)
    assert cos.dtype == torch.float32
    torch.testing.assert_close(cos[0, 0].double(), expected_cos, atol=1e-3, rtol=0)
    torch.testing.assert_close(sin[0, 0].double(), expected_sin, atol=1e-3, rtol=0)
    assert not any(buffer.is_floating_point() for buffer in model.buffers())


def test_kept_frequencies_follow_the_config_and_survive_casts():
    """Eager forwards keep a static rope type's frequencies between forwards; after the rope parameters change (in
    place too) a forward computes what a model built with them computes, and `model.to(bf16)` leaves them float64
    and out of the state dict."""
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    positions = torch.tensor([[0, 5, 100_000]])
    default = model.rotary_emb(positions)
    model.config.rope_parameters.update(rope_type="linear", factor=4.0)
    linear = model.rotary_emb(positions)
    built = hf_roformer.HfRoFormerModel(tiny_config(rope_parameters=dict(model.config.rope_parameters)))
    expected = built.rotary_emb(positions)
    assert not torch.equal(linear[1], default[1])
    for actual, wanted in zip(linear, expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=0, atol=0)
    model.to(torch.bfloat16)
    for actual, wanted in zip(model.rotary_emb(positions), expected, strict=True):
        torch.testing.assert_close(actual, wanted, rtol=0, atol=0)
    assert model.rotary_emb.kept_frequencies[1].dtype == torch.float64
    assert not any("frequencies" in name for name in model.state_dict())


def test_compiled_rotation_equals_eager():
    """The real-valued form used under torch.compile equals the complex form used in eager mode."""
    config = tiny_config()
    cos, sin = HfRoFormerRotaryEmbedding(config)(torch.tensor([[0, 3, 900, 40000]]))
    x = torch.randn(1, 4, 4, 8)
    compiled = torch.compile(rotate_interleaved, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x, cos, sin), rotate_interleaved(x, cos, sin), atol=1e-6, rtol=0)


@pytest.mark.parametrize("keys_cached, rotary_value", [(False, False), (True, False), (False, True)])
def test_a_torchscript_trace_reorders_features_only_where_products_alone_read_them(keys_cached, rotary_value):
    """In a TorchScript trace (OpenVINO's `convert_model`), attention that keeps no keys and rotates no values takes
    queries and keys with each head's even features first and rotates them in that layout: value for value the
    real-valued rotation of eq. 34, reordered, so every product q . k is the paper's. Keys a cache keeps, rotated
    values (which attention returns) and eager forwards keep the paper's layout."""
    torch.manual_seed(0)
    batch, seq, heads, head_dim = 2, 7, 3, 8
    cos, sin = HfRoFormerRotaryEmbedding(tiny_config())(torch.arange(seq)[None] * 37)
    projections = [torch.randn(batch, seq, heads * head_dim) for _ in range(3)]

    def rotate(query, key, value):
        rotation = TokenRotation(cos, sin)
        halves = rotation.rotates_in_halves(rotary_value, keys_cached=keys_cached)
        if halves:
            query, key = (in_halves(states, head_dim, dim=-1) for states in (query, key))
        return rotation.rotate_heads(head_dim, query, key, value, rotary_value, projected_in_halves=halves)

    assert not TokenRotation(cos, sin).rotates_in_halves(rotary_value, keys_cached)
    eager = rotate(*(p.clone() for p in projections))
    example = tuple(p.clone() for p in projections)  # the trace differs from the eager call by design: no check
    traced = torch.jit.trace(rotate, example, check_trace=False)(*(p.clone() for p in projections))
    if keys_cached or rotary_value:
        for traced_heads, eager_heads in zip(traced, eager, strict=True):
            torch.testing.assert_close(traced_heads, eager_heads, atol=1e-6, rtol=0)
        return
    reordered = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    for traced_heads, projection in zip(traced[:2], projections[:2], strict=True):
        pairs = _rotate_pairs(projection.unflatten(-1, (heads, head_dim)), cos[:, :, None], sin[:, :, None])
        assert torch.equal(traced_heads, pairs.transpose(1, 2)[..., reordered])
    torch.testing.assert_close(
        traced[0] @ traced[1].transpose(-1, -2), eager[0] @ eager[1].transpose(-1, -2), atol=1e-5, rtol=1e-6
    )
    assert torch.equal(traced[2], eager[2])


class WrappedLinear(torch.nn.Linear):
    """A projection that is no plain `nn.Linear` (as a LoRA or quantized layer is not)."""


@pytest.mark.parametrize("projection_class", [torch.nn.Linear, WrappedLinear])
def test_projections_in_halves_are_the_projections_reordered(projection_class):
    """Query and key in halves from their weights reordered (plain `nn.Linear`) or from the module's own output
    reordered (any other module) give the module's projection with each head's features reordered."""
    torch.manual_seed(0)
    config = tiny_config()
    attention = HfRoFormerSelfAttention(config)
    attention.query = projection_class(config.hidden_size, config.hidden_size)
    states = torch.randn(2, 5, config.hidden_size)
    query, key, value = attention.project_query_key_value(states, query_key_in_halves=True)
    head_dim = config.head_dim
    reordered = torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))
    for projected, module in ((query, attention.query), (key, attention.key)):
        expected = module(states).unflatten(-1, (-1, head_dim))[..., reordered].flatten(-2)
        torch.testing.assert_close(projected, expected, atol=1e-6, rtol=0)
    assert torch.equal(value, attention.value(states))
