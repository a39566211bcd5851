"""Training paths: gradient checkpointing is exact, and the model compiles as one graph."""

import pytest
import torch
from conftest import optimizer_steps, tiny_config

import hf_roformer


def gradients(model, batch) -> dict:
    """Parameter gradients of the masked-LM loss on `batch`."""
    model.zero_grad()
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    model(**batch, labels=labels).loss.backward()
    return {name: parameter.grad.clone() for name, parameter in model.named_parameters() if parameter.grad is not None}


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_gradient_checkpointing_gives_the_same_gradients(use_reentrant, batch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config()).train()
    expected = gradients(model, batch)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
    assert all(layer.gradient_checkpointing for layer in model.roformer.encoder.layer)
    actual = gradients(model, batch)
    assert expected.keys() == actual.keys() and len(actual) > 10
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=1e-6, rtol=1e-5, msg=name)


def test_model_trains():
    """A few optimizer steps on a fixed batch drive the masked-LM loss down."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config()).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    input_ids = torch.randint(1, 99, (4, 16))
    losses = optimizer_steps(lambda: model(input_ids, labels=input_ids).loss, optimizer, 20)
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("is_decoder", [False, True])
def test_forward_traces_as_one_graph(is_decoder, batch):
    """`torch.compile(fullgraph=True)` raises on any graph break; the eager backend checks tracing quickly."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(is_decoder=is_decoder, use_cache=False)).eval()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        expected = model(**batch).logits
        torch.testing.assert_close(compiled(**batch).logits, expected)


def test_compiled_forward_with_inductor_matches(batch):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(
            compiled(**batch).last_hidden_state, model(**batch).last_hidden_state, atol=1e-5, rtol=0
        )


def test_bf16_model_compiles_with_frozen_weights(batch):
    """The CPU inference route of docs/speed.md: a bf16 model compiled with frozen weights (Inductor's `freezing`: the
    weights become constants, prepacked for oneDNN's products) is one graph and gives the eager bf16 model's
    outputs within bf16 rounding; the weights themselves stay as they were."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).to(torch.bfloat16).eval()
    weights = {name: parameter.clone() for name, parameter in model.named_parameters()}
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad(), torch._inductor.config.patch(freezing=True):
        actual = compiled(**batch).last_hidden_state
        expected = model(**batch).last_hidden_state
    assert actual.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(actual.float(), expected.float(), atol=0.03, rtol=0.01)  # measured: 0.016 at most
    assert all(torch.equal(parameter, weights[name]) for name, parameter in model.named_parameters())


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_training_step_compiles_as_one_graph(backend, batch):
    """Forward, loss and backward of a compiled model (one graph, no breaks) give the eager gradients."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(rotary_value=True)).train()
    expected = gradients(model, batch)
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    compiled.zero_grad()
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    compiled(**batch, labels=labels).loss.backward()
    actual = {name: parameter.grad for name, parameter in model.named_parameters() if parameter.grad is not None}
    assert actual.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_graph_inference_with_static_shapes():
    """`mode="reduce-overhead"` records CUDA graphs: replays with new inputs of the same shape stay exact."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for seed in range(4):
        input_ids = torch.randint(1, 99, (4, 64), device="cuda", generator=torch.Generator("cuda").manual_seed(seed))
        with torch.no_grad():
            torch.testing.assert_close(
                compiled(input_ids).last_hidden_state.clone(), model(input_ids).last_hidden_state, atol=1e-4, rtol=0
            )
