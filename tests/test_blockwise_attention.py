"""Attention dropout on CPU without L x L tensors: the blockwise attention equals SDPA's math path, its dropout masks
come from a seed and are the same in both passes, and training with it is exact under seeding and checkpointing."""

import pytest
import torch
from conftest import optimizer_steps, tiny_config
from torch.nn.attention import SDPBackend, sdpa_kernel

import hf_roformer
from hf_roformer.remote_code.blockwise_attention_hf_roformer import (
    BlockwiseDropoutAttention,
    blockwise_dropout_attention,
    dropout_keep_mask,
    keep_scale,
)


pytestmark = pytest.mark.releases("remote_code.blockwise_attention_hf_roformer")  # see setup.cfg


BATCH, HEADS, LENGTH, HEAD_DIM = 2, 3, 37, 8
BLOCK = 5  # several blocks and a shorter last one
SCALING = 0.3


def inputs(seed: int = 0, length: int = LENGTH, head_dim: int = HEAD_DIM) -> list[torch.Tensor]:
    """Float64 queries, keys and values that require gradients."""
    generator = torch.Generator().manual_seed(seed)
    shape = (BATCH, HEADS, length, head_dim)
    return [torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True) for _ in range(3)]


def masks() -> dict:
    """SDPA masks of each kind: padding (boolean, expanded over queries as transformers builds it), additive, causal
    given as a boolean mask with left padding (its first rows see no key), and SDPA's `is_causal`."""
    padding = torch.ones(BATCH, 1, 1, LENGTH, dtype=torch.bool)
    padding[1, ..., 30:] = False
    additive = torch.zeros(BATCH, 1, 1, LENGTH, dtype=torch.float64)
    additive[1, ..., 25:] = torch.finfo(torch.float64).min
    causal = torch.tril(torch.ones(LENGTH, LENGTH, dtype=torch.bool)).expand(BATCH, 1, -1, -1).clone()
    causal[1, ..., :4] = False
    return {
        "none": (None, False),
        "padding": (padding.expand(-1, -1, LENGTH, -1), False),
        "additive": (additive, False),
        "causal_left_padded": (causal, False),
        "is_causal": (None, True),
    }


def forward_and_gradients(attention, query, key, value, grad_output=None):
    """Output of `attention(query, key, value)` and the gradients of <output, grad_output> w.r.t. the inputs."""
    output = attention(query, key, value)
    if grad_output is None:
        grad_output = torch.randn(output.shape, generator=torch.Generator().manual_seed(9), dtype=output.dtype)
    return output, torch.autograd.grad(output, (query, key, value), grad_output)


@pytest.mark.parametrize("mask_kind", list(masks()))
def test_equals_sdpa_math_path_without_dropout(mask_kind):
    mask, is_causal = masks()[mask_kind]
    query, key, value = inputs()

    def reference(q, k, v):
        with sdpa_kernel(SDPBackend.MATH):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, scale=SCALING, is_causal=is_causal
            )

    def blockwise(q, k, v):
        return blockwise_dropout_attention(q, k, v, mask, SCALING, 0.0, is_causal=is_causal, block_size=BLOCK)

    expected, expected_grads = forward_and_gradients(reference, query, key, value)
    actual, actual_grads = forward_and_gradients(blockwise, query, key, value)
    torch.testing.assert_close(actual, expected, atol=1e-12, rtol=0)
    for name, got, want in zip("qkv", actual_grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0, msg=name)
    if mask_kind == "causal_left_padded":  # rows that see no key give 0, as SDPA's math path gives them
        assert actual[1, :, :4].abs().max() == 0 and all(grad.isfinite().all() for grad in actual_grads)


def test_dropout_is_reproducible_from_the_seed():
    query, key, value = inputs()

    def attention(seed):
        return lambda q, k, v: blockwise_dropout_attention(q, k, v, None, SCALING, 0.3, seed=seed, block_size=BLOCK)

    first, first_grads = forward_and_gradients(attention(7), query, key, value)
    again, again_grads = forward_and_gradients(attention(7), query, key, value)
    other, _ = forward_and_gradients(attention(8), query, key, value)
    assert torch.equal(first, again) and all(map(torch.equal, first_grads, again_grads))
    assert not torch.equal(first, other)


@pytest.mark.parametrize("mask_kind", ["none", "padding", "is_causal"])
def test_dropout_equals_attention_with_the_same_mask_applied_explicitly(mask_kind):
    """The reference applies each block's keep mask (from the seed) to the full softmax: forward and gradients agree,
    so the backward pass used the forward's masks."""
    mask, is_causal = masks()[mask_kind]
    query, key, value = inputs()
    dropout, seed = 0.3, 1234
    keep = torch.cat(
        [
            dropout_keep_mask((BATCH * HEADS, min(start + BLOCK, LENGTH) - start, LENGTH), dropout, seed, index)
            for index, start in enumerate(range(0, LENGTH, BLOCK))
        ],
        dim=1,
    ).view(BATCH, HEADS, LENGTH, LENGTH)

    def reference(q, k, v):
        scores = (q @ k.transpose(-1, -2)) * SCALING
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        if is_causal:
            scores = scores.masked_fill(torch.ones(LENGTH, LENGTH, dtype=torch.bool).triu(1), float("-inf"))
        return (scores.softmax(-1) * keep * keep_scale(dropout)) @ v

    def blockwise(q, k, v):
        return blockwise_dropout_attention(
            q, k, v, mask, SCALING, dropout, is_causal=is_causal, seed=seed, block_size=BLOCK
        )

    expected, expected_grads = forward_and_gradients(reference, query, key, value)
    actual, actual_grads = forward_and_gradients(blockwise, query, key, value)
    torch.testing.assert_close(actual, expected, atol=1e-12, rtol=0)
    for name, got, want in zip("qkv", actual_grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0, msg=name)


def test_backward_uses_the_mask_observed_in_the_forward_output():
    """With the identity as values, the output is the dropped probabilities themselves: the mask is read off the
    forward's output, independently of the helper that draws it, and the gradients equal a reference applying it."""
    query, key, _ = inputs(length=HEAD_DIM)
    value = torch.eye(HEAD_DIM, dtype=torch.float64).expand(BATCH, HEADS, -1, -1).clone().requires_grad_()
    dropout = 0.4

    def blockwise(q, k, v):
        return blockwise_dropout_attention(q, k, v, None, SCALING, dropout, seed=3, block_size=3)

    actual, actual_grads = forward_and_gradients(blockwise, query, key, value)
    kept = actual.detach() != 0
    assert 0 < kept.sum() < kept.numel()

    def reference(q, k, v):
        return (((q @ k.transpose(-1, -2)) * SCALING).softmax(-1) * kept * keep_scale(dropout)) @ v

    expected, expected_grads = forward_and_gradients(reference, query, key, value)
    torch.testing.assert_close(actual, expected, atol=1e-12, rtol=0)
    for name, got, want in zip("qkv", actual_grads, expected_grads, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0, msg=name)


def test_dropout_rate_and_scale():
    """Draws are 16-bit: the rate is the dropout rounded to 2^-16 and the scale its exact inverse kept fraction."""
    keep = dropout_keep_mask((1000, 1000), 0.1, seed=5, block_index=0)
    assert keep.dtype == torch.int16 and set(keep.unique().tolist()) == {0, 1}
    assert abs(keep.double().mean().item() - 0.9) < 2e-3  # 6.7 standard deviations of a million draws
    assert keep_scale(0.1) == 65536 / (65536 - 6554)
    assert keep_scale(0.0) == 1.0 and bool(dropout_keep_mask((64,), 0.0, seed=5, block_index=0).all())
    assert not torch.equal(keep, dropout_keep_mask((1000, 1000), 0.1, seed=5, block_index=1))


def test_bad_dropout_is_refused():
    query, key, value = inputs()
    with pytest.raises(ValueError, match=r"^`dropout` must lie in \[0, 1\), got 1.0.$"):
        blockwise_dropout_attention(query, key, value, None, SCALING, 1.0)


def graph_functions(tensor: torch.Tensor) -> set[str]:
    """Names of the autograd functions in the graph behind `tensor`."""
    names, stack, seen = set(), [tensor.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.add(type(node).__name__)
        stack.extend(parent for parent, _ in node.next_functions)
    return names


def dropout_model(**overrides) -> hf_roformer.HfRoFormerForMaskedLM:
    torch.manual_seed(0)
    config = tiny_config(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, **overrides)
    return hf_roformer.HfRoFormerForMaskedLM(config)


def masked_lm_loss(model, batch) -> torch.Tensor:
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    return model(**batch, labels=labels).loss


@pytest.mark.parametrize("is_decoder", [False, True])
def test_training_with_attention_dropout_on_cpu_attends_in_blocks(is_decoder, batch):
    model = dropout_model(is_decoder=is_decoder, use_cache=False).train()
    blockwise = BlockwiseDropoutAttention.__name__ + "Backward"
    assert blockwise in graph_functions(masked_lm_loss(model, batch))
    assert blockwise not in graph_functions(masked_lm_loss(model.eval(), batch))  # no dropout: SDPA
    model.set_attn_implementation("eager")
    assert blockwise not in graph_functions(masked_lm_loss(model.train(), batch))  # only in SDPA's place


def gradients_after_seeding(model, batch, seed: int = 11) -> tuple[torch.Tensor, dict]:
    model.zero_grad()
    torch.manual_seed(seed)
    loss = masked_lm_loss(model, batch)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_training_step_is_reproducible_from_the_global_seed(batch):
    model = dropout_model().train()
    loss, grads = gradients_after_seeding(model, batch)
    loss_again, grads_again = gradients_after_seeding(model, batch)
    other_loss, _ = gradients_after_seeding(model, batch, seed=12)
    assert torch.equal(loss, loss_again) and grads.keys() == grads_again.keys()
    assert all(torch.equal(grads[name], grads_again[name]) for name in grads)
    assert not torch.equal(loss, other_loss)


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_gradient_checkpointing_recomputes_the_same_dropout(use_reentrant, batch):
    """Checkpointing restores the RNG state before recomputing a layer, so the attention draws the same seed."""
    model = dropout_model().train()
    loss, expected = gradients_after_seeding(model, batch)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
    checkpointed_loss, actual = gradients_after_seeding(model, batch)
    assert torch.equal(checkpointed_loss, loss) and actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=1e-6, rtol=1e-5, msg=name)


def test_model_trains_with_attention_dropout(batch):
    model = dropout_model().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    torch.manual_seed(0)
    losses = optimizer_steps(lambda: masked_lm_loss(model, batch), optimizer, 25)
    assert sum(losses[-5:]) < 0.5 * sum(losses[:5])


def test_training_step_compiles_as_one_graph_with_attention_dropout(batch):
    """Compiled graphs keep SDPA (and store what the compiler plans): no graph break."""
    model = dropout_model().train()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    loss = masked_lm_loss(compiled, batch)
    loss.backward()
    assert loss.isfinite() and model.cls.predictions.decoder.weight.grad is not None


def test_mismatched_heads_are_refused():
    query, key, value = inputs()
    with pytest.raises(ValueError) as error:
        blockwise_dropout_attention(query, key[:, :1], value[:, :1], None, SCALING, 0.1)
    assert str(error.value) == (
        "`query`, `key` and `value` must share batch and heads, and keys and values their length, got shapes "
        "(2, 3, 37, 8), (2, 1, 37, 8) and (2, 1, 37, 8)."
    )


def test_torch_func_grad_equals_autograd_with_attention_dropout(batch):
    """`torch.func.grad` (per-sample gradients, differential privacy) differentiates through the blockwise attention
    and the feed-forward block as autograd does."""
    model = dropout_model().train()
    parameters = {name: parameter.detach() for name, parameter in model.named_parameters()}

    def loss(parameters):
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        return torch.func.functional_call(model, parameters, (), {**batch, "labels": labels}).loss

    torch.manual_seed(11)
    functional = torch.func.grad(loss)(parameters)
    _, expected = gradients_after_seeding(model, batch)
    assert expected.keys() <= functional.keys()
    for name in expected:
        torch.testing.assert_close(functional[name], expected[name], atol=1e-7, rtol=1e-6, msg=name)
