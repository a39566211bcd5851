"""The attention's projections: LoRA adapters on the query and value modules train through their adapters and merge
back exactly, and the default forward compiles without a graph break."""

import pytest
import torch
from conftest import optimizer_steps, tiny_config

import hf_roformer


def padded_batch():
    input_ids = torch.randint(1, 99, (3, 11), generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def test_lora_on_query_and_value_trains_through_its_adapters():
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    base = hf_roformer.HfRoFormerForSequenceClassification(tiny_config(num_labels=2))
    config = peft.LoraConfig(task_type=peft.TaskType.SEQ_CLS, r=4, lora_alpha=8, target_modules=["query", "value"])
    model = peft.get_peft_model(base, config)
    batch = padded_batch()
    labels = torch.tensor([0, 1, 1])
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = optimizer_steps(lambda: model(**batch, labels=labels).loss, optimizer, 8)
    assert losses[-1] < 0.5 * losses[0]
    model.eval()
    with torch.no_grad():
        adapted = model(**batch).logits
        with model.disable_adapter():
            assert not torch.allclose(model(**batch).logits, adapted, atol=1e-3)
        merged = model.merge_and_unload()  # plain layers again, holding the merged weights
        torch.testing.assert_close(merged(**batch).logits, adapted, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_forward_has_no_graph_break(dtype):
    """Counted by dynamo's `explain` on the default path (SDPA, padded batch)."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval().to(dtype)
    batch = padded_batch()
    torch._dynamo.reset()
    with torch.no_grad():
        explanation = torch._dynamo.explain(model)(**batch)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


def test_compiled_forward_computes_the_rotation_angles_once():
    """Under torch.compile, cos/sin come from one call of `hf_roformer::rotation_cos_sin` shared by every layer (left
    as plain operations, the compiler evaluated them in each layer's rotation kernel, per head), and the compiled
    forward equals the eager one."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    assert model.config.num_hidden_layers > 1
    batch = padded_batch()
    graphs = []

    def recording_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend=recording_backend, fullgraph=True)(**batch).last_hidden_state
        eager = model(**batch).last_hidden_state
    calls = [
        node
        for graph in graphs
        for node in graph.graph.nodes
        if node.op == "call_function" and "rotation_cos_sin" in str(node.target)
    ]
    assert len(calls) == 1
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-5)
