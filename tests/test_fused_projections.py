"""Query, key and value in one matrix multiply: the fused projection computes what the three modules do (outputs and
gradients), leaves the parameters and saved files as they were, steps aside for LoRA adapters and hooked layers, and
compiles without a graph break."""

import pytest
import torch
from conftest import tiny_config

import hf_roformer
from hf_roformer.remote_code.attention_hf_roformer import HfRoFormerSelfAttention


def padded_batch():
    input_ids = torch.randint(1, 99, (3, 11), generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def self_attentions(model):
    return [module for module in model.modules() if isinstance(module, HfRoFormerSelfAttention)]


def count_fused_calls(model, monkeypatch) -> list:
    """Record each fused projection (a call of `torch.nn.functional.linear` with three stacked weights)."""
    calls = []
    linear = torch.nn.functional.linear
    hidden = model.config.hidden_size

    def recording(inputs, weight, bias=None):
        if weight.shape[0] == 3 * hidden:
            calls.append(weight.shape)
        return linear(inputs, weight, bias)

    monkeypatch.setattr(torch.nn.functional, "linear", recording)
    return calls


def unfused(model):
    """Hooks on the query projections: the model then calls each projection module (the path for hooked layers)."""
    return [attention.query.register_forward_hook(lambda *args: None) for attention in self_attentions(model)]


@pytest.mark.parametrize("use_bias", [True, False])
def test_fused_and_unfused_projections_give_the_same_outputs_and_gradients(use_bias, monkeypatch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(use_bias=use_bias, rotary_value=True))
    batch = padded_batch()
    calls = count_fused_calls(model, monkeypatch)

    def run():
        model.zero_grad()
        logits = model(**batch).logits
        logits.pow(2).mean().backward()
        grads = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
        with torch.no_grad():
            return logits.detach(), model.eval()(**batch).logits, grads

    model.train()
    fused_train, fused_eval, fused_grads = run()
    assert len(calls) == 2 * model.config.num_hidden_layers  # training and evaluation forwards, each layer
    handles = unfused(model)
    model.train()
    plain_train, plain_eval, plain_grads = run()
    assert len(calls) == 2 * model.config.num_hidden_layers  # no fused call with the hooks in place
    for handle in handles:
        handle.remove()
    torch.testing.assert_close(fused_train, plain_train, atol=1e-5, rtol=0)
    torch.testing.assert_close(fused_eval, plain_eval, atol=1e-5, rtol=0)
    assert fused_grads.keys() == plain_grads.keys()
    for name in plain_grads:
        torch.testing.assert_close(fused_grads[name], plain_grads[name], atol=1e-5, rtol=1e-4, msg=name)


def test_fused_projection_saves_the_same_files(tmp_path):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    model.save_pretrained(tmp_path / "before")
    with torch.no_grad():
        model(**padded_batch())
    model.save_pretrained(tmp_path / "after")
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "after" / name).read_bytes() == (tmp_path / "before" / name).read_bytes(), name
    names = set(model.state_dict())
    assert {"encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.self.value.bias"} <= names
    assert not any("qkv" in name or "fused" in name for name in names)


def test_lora_on_query_and_value_trains_through_its_adapters(monkeypatch):
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    base = hf_roformer.HfRoFormerForSequenceClassification(tiny_config(num_labels=2))
    config = peft.LoraConfig(task_type=peft.TaskType.SEQ_CLS, r=4, lora_alpha=8, target_modules=["query", "value"])
    model = peft.get_peft_model(base, config)
    calls = count_fused_calls(base, monkeypatch)
    batch = padded_batch()
    labels = torch.tensor([0, 1, 1])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(8):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert calls == []  # the adapters are called, not bypassed by a fused product of the base weights
    assert losses[-1] < 0.5 * losses[0]
    model.eval()
    with torch.no_grad():
        adapted = model(**batch).logits
        with model.disable_adapter():
            assert not torch.allclose(model(**batch).logits, adapted, atol=1e-3)
        merged = model.merge_and_unload()  # plain layers again: the fused product of the merged weights
        torch.testing.assert_close(merged(**batch).logits, adapted, atol=1e-5, rtol=1e-5)
    assert len(calls) == merged.config.num_hidden_layers


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_forward_has_no_graph_break(dtype):
    """Counted by dynamo's `explain` on the default path (fused projections, SDPA, padded batch)."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval().to(dtype)
    batch = padded_batch()
    torch._dynamo.reset()
    with torch.no_grad():
        explanation = torch._dynamo.explain(model)(**batch)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
