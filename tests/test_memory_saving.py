"""What training stores and inference allocates: one-byte dropout masks, the activation recomputed for the output
projection, and in-place inference steps; each gives exactly the results of the plain computation."""

import pytest
import torch
from conftest import tiny_config

import hf_roformer
from hf_roformer.remote_code.modeling_hf_roformer import HfRoFormerDropout, HfRoFormerLayer
from hf_roformer.remote_code.rotary_hf_roformer import HfRoFormerRotaryEmbedding, TokenRotation


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


def test_hidden_dropout_keeps_a_boolean_mask():
    dropout = HfRoFormerDropout(0.25).train()
    inputs = torch.randn(4, 16, 8, requires_grad=True)
    saved = []

    def pack(tensor):
        saved.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        torch.manual_seed(0)
        output = dropout(inputs)
    assert [(tensor.dtype, tensor.shape) for tensor in saved] == [(torch.bool, inputs.shape)]
    kept = saved[0]
    assert 0 < kept.sum() < kept.numel()
    assert torch.equal(output, inputs * kept * (1 / 0.75))
    (grad,) = torch.autograd.grad(output.sum(), inputs)
    assert torch.equal(grad, kept * (1 / 0.75))
    assert dropout.eval()(inputs) is inputs


class CountingActivation(torch.nn.Module):
    """GELU that counts its calls."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, hidden_states):
        self.calls += 1
        return torch.nn.functional.gelu(hidden_states)


def gradients(model, batch, stores_activation_once=None, monkeypatch=None) -> dict:
    if stores_activation_once is not None:
        monkeypatch.setattr(HfRoFormerLayer, "stores_activation_once", lambda self, states: stores_activation_once)
    model.zero_grad()
    torch.manual_seed(0)
    model(**batch, labels=batch["input_ids"]).loss.backward()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}


def test_output_projection_gets_the_activation_recomputed(batch, monkeypatch):
    """The output projection's backward recomputes the activation (one more call per layer) instead of storing it,
    and the gradients are bitwise those of storing it."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(hidden_dropout_prob=0.1)).train()
    activations = [CountingActivation() for _ in model.roformer.encoder.layer]
    for layer, activation in zip(model.roformer.encoder.layer, activations, strict=True):
        layer.intermediate.intermediate_act_fn = activation
    recomputed = gradients(model, batch)
    assert [activation.calls for activation in activations] == [2, 2]  # forward, then backward
    stored = gradients(model, batch, stores_activation_once=False, monkeypatch=monkeypatch)
    assert [activation.calls for activation in activations] == [3, 3]
    assert recomputed.keys() == stored.keys() and len(stored) > 10
    assert all(torch.equal(recomputed[name], stored[name]) for name in stored)


def test_no_recomputation_under_gradient_checkpointing(batch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config()).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    layer = model.roformer.encoder.layer[0]
    assert not layer.stores_activation_once(torch.ones(1, requires_grad=True))
    model.gradient_checkpointing_disable()
    assert layer.stores_activation_once(torch.ones(1, requires_grad=True))
    with torch.no_grad():
        assert not layer.stores_activation_once(torch.ones(1, requires_grad=True))


@pytest.mark.parametrize(
    "overrides",
    [{}, {"hidden_act": "relu"}, {"hidden_act": "silu", "rotary_value": True}, {"is_decoder": True}],
    ids=["gelu", "relu", "silu-rotary_value", "decoder"],
)
def test_inference_in_place_equals_the_recorded_path(overrides, batch):
    """Without gradients the rotation, the residual sums and the activation run in place; with gradients recorded
    they allocate: both give the same bits."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config(use_cache=False, **overrides)).eval()
    with torch.no_grad():
        in_place = model(**batch).last_hidden_state
    recorded = model(**batch).last_hidden_state
    assert recorded.requires_grad
    assert torch.equal(in_place, recorded.detach())


@pytest.mark.parametrize("in_place", [False, True])
def test_rotating_projections_equals_rotating_split_heads(in_place):
    config = tiny_config()
    cos, sin = HfRoFormerRotaryEmbedding(config)(torch.tensor([[0, 3, 1, 700, 5]]))
    rotation = TokenRotation(cos, sin)
    projections = [torch.randn(2, 5, config.hidden_size) for _ in range(2)]
    heads = [projection.view(2, 5, -1, config.head_dim).transpose(1, 2) for projection in projections]
    expected = rotation.rotate(*heads)
    actual = rotation.rotate_projections(config.head_dim, *[p.clone() for p in projections], in_place=in_place)
    for got, want in zip(actual, expected, strict=True):
        assert got.shape == want.shape == (2, config.num_attention_heads, 5, config.head_dim)
        assert torch.equal(got, want)
