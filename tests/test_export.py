"""Export from any example input: `torch.export` and both of torch's ONNX exporters (dynamo and TorchScript) with
dynamic batch and sequence axes accept examples of 1 x 1, 1 x 16 and 3 x 7 tokens, and the graphs compute what the
eager model does on other shapes (one short row, 4 x 128 with padding, rows past `max_position_embeddings`), for the
encoder and the heads; the checked helpers refuse a graph that differs, keep existing files and restore the model's
mode.

Weights are drawn with `initializer_range=0.5`: a tiny model at the default 0.02 attends almost uniformly, so a wrong
rotation changes its outputs by less than the tolerance; at 0.5 attention is sharp and any rotation error shows.
"""

import numpy as np
import pytest
import torch
from conftest import randomize_norms, tiny_config

import hf_roformer
from hf_roformer.integrations.export import export_onnx, export_program
from hf_roformer.remote_code.releases_hf_roformer import example_sizes_of_one_stay_symbolic
from hf_roformer.utils.errors import ExportMismatchError, UsageError


pytestmark = pytest.mark.releases("integrations.export")  # see setup.cfg


onnxruntime = pytest.importorskip("onnxruntime")

TRAINED_LENGTH = 16
EXAMPLES = [(1, 1), (1, 16), (3, 7)]
# One short row, a padded batch of 4 x 128 and 2 rows at 2.5x the trained length (8x for 4 x 128).
SHAPES = [(1, 5), (4, 128), (2, 40)]
HEADS = {
    "encoder": hf_roformer.HfRoFormerModel,
    "sequence_classification": hf_roformer.HfRoFormerForSequenceClassification,
    "token_classification": hf_roformer.HfRoFormerForTokenClassification,
    "masked_lm": hf_roformer.HfRoFormerForMaskedLM,
}
SCALED_ROPE = {
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": TRAINED_LENGTH},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
}


def build(head, **overrides):
    """A one-layer tiny model of `head` (exporters take seconds per layer) with sharp attention, random norms and
    dropout (so that a model left in training mode shows), in evaluation mode."""
    torch.manual_seed(0)
    sizes = dict(num_hidden_layers=1, max_position_embeddings=TRAINED_LENGTH, num_labels=3, initializer_range=0.5)
    dropout = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    config = tiny_config(**{**sizes, **dropout, **overrides})
    model = head(config)
    randomize_norms(model)
    return model.eval()


def example(batch: int, length: int) -> dict:
    """What a tokenizer returns for `batch` sentences of `length` tokens."""
    generator = torch.Generator().manual_seed(length)
    return {
        "input_ids": torch.randint(1, 99, (batch, length), generator=generator),
        "attention_mask": torch.ones(batch, length, dtype=torch.long),
    }


def padded(batch: int, length: int) -> dict:
    """An example whose last row is padded from half its length (when there are several rows)."""
    inputs = example(batch, length)
    inputs["input_ids"] = torch.randint(0, 99, (batch, length), generator=torch.Generator().manual_seed(batch + length))
    if batch > 1:
        inputs["attention_mask"][-1, (length + 1) // 2 :] = 0
    return inputs


class Outputs(torch.nn.Module):
    """The model with tensor inputs and its output tensors out, as a user would wrap it for `torch.export`."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return outputs.logits if hasattr(outputs, "logits") else outputs.last_hidden_state


def eager(model, inputs: dict) -> dict[str, torch.Tensor]:
    """The model's output tensors by name."""
    with torch.no_grad():
        outputs = model(**inputs)
    return {name: value for name, value in outputs.items() if isinstance(value, torch.Tensor)}


def export_cases():
    """The encoder from every example; the heads with `-m slow` (by default the dynamo ONNX exporter below runs
    `torch.export` on every head from one token)."""
    for name in HEADS:
        for batch, length in EXAMPLES:
            marks = [pytest.mark.slow] if name != "encoder" else []
            yield pytest.param(name, batch, length, marks=marks, id=f"{name}-{batch}x{length}")


@pytest.mark.parametrize("name, batch, length", export_cases())
def test_torch_export_with_dynamic_axes_accepts_any_example(name, batch, length):
    model = build(HEADS[name])
    axes = {0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")}
    inputs = example(batch, length)
    with example_sizes_of_one_stay_symbolic():
        program = torch.export.export(
            Outputs(model), (inputs["input_ids"], inputs["attention_mask"]), dynamic_shapes=(axes, axes)
        )
    for shape in [*SHAPES, (1, 1), (3, 1)]:
        inputs = padded(*shape)
        with torch.no_grad():
            expected = Outputs(model)(**inputs)
        actual = program.module()(inputs["input_ids"], inputs["attention_mask"])
        torch.testing.assert_close(actual, expected, atol=1e-4, rtol=0, msg=lambda text, at=shape: f"{at}: {text}")
    # the rotation is real cos/sin: ONNX has no complex type, TorchScript's exporter no `aten::complex`
    graphs = [module.graph for module in program.graph_module.modules() if isinstance(module, torch.fx.GraphModule)]
    targets = {str(node.target) for graph in graphs for node in graph.nodes if node.op == "call_function"}
    assert any("cos" in target for target in targets) and not any("complex" in target for target in targets)


def assert_onnx_equals_eager(path, model, shapes=SHAPES):
    """onnxruntime runs the file at `shapes` within 1e-4 of PyTorch, output by output."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    for shape in shapes:
        inputs = padded(*shape)
        actual = session.run(names, {key: value.numpy() for key, value in inputs.items()})
        expected = eager(model, inputs)
        assert names == list(expected), (names, list(expected))
        for output, value in zip(names, actual, strict=True):
            torch.testing.assert_close(torch.from_numpy(value), expected[output], atol=1e-4, rtol=0, msg=output)


def onnx_cases():
    """Every head from every example with both exporters; the dynamo exporter takes seconds a graph, so the default
    run exports each head once with it (from one token: batch and length 1), the rest with `-m slow`."""
    for exporter in ("torchscript", "dynamo"):
        for name in HEADS:
            for size in EXAMPLES:
                slow = exporter == "dynamo" and size != (1, 1)
                marks = [pytest.mark.slow] if slow else []
                yield pytest.param(exporter, name, size, marks=marks, id=f"{exporter}-{name}-{size[0]}x{size[1]}")


@pytest.mark.parametrize("exporter, name, size", onnx_cases())
def test_both_onnx_exporters_from_any_example_equal_pytorch(exporter, name, size, tmp_path):
    model = build(HEADS[name])
    report = export_onnx(model, example(*size), tmp_path / "model.onnx", exporter=exporter, check_shapes=SHAPES)
    assert report.opset_version == 17 and report.input_names == ("input_ids", "attention_mask")
    assert max(report.differences.values()) <= 1e-4 and sorted(report.differences) == sorted(SHAPES)
    assert_onnx_equals_eager(tmp_path / "model.onnx", model)
    assert not model.training


@pytest.mark.parametrize(
    "rope, exporter",
    [
        ("yarn", "torchscript"),
        ("dynamic", "torchscript"),
        ("dynamic", "dynamo"),
        pytest.param("yarn", "dynamo", marks=pytest.mark.slow),
    ],
)
def test_scaled_rope_frequencies_export_with_both_exporters(rope, exporter, tmp_path):
    model = build(hf_roformer.HfRoFormerForMaskedLM, rope_parameters=SCALED_ROPE[rope])
    export_onnx(model, example(1, 1), tmp_path / "model.onnx", exporter=exporter, check_shapes=SHAPES)
    assert_onnx_equals_eager(tmp_path / "model.onnx", model)


@pytest.mark.parametrize(
    "head, overrides",
    [(hf_roformer.HfRoFormerForQuestionAnswering, {}), (hf_roformer.HfRoFormerForCausalLM, {"is_decoder": True})],
    ids=["question_answering", "causal_lm"],
)
def test_the_other_heads_export_from_one_token(head, overrides, tmp_path):
    model = build(head, **overrides)
    program = export_program(model, example(1, 1), check_shapes=SHAPES)
    report = export_onnx(model, example(1, 1), tmp_path / "model.onnx", exporter="torchscript", check_shapes=SHAPES)
    assert_onnx_equals_eager(tmp_path / "model.onnx", model)
    inputs = padded(3, 1)
    actual = program.module()(inputs["input_ids"], inputs["attention_mask"])
    for name, value in zip(report.output_names, actual, strict=True):
        torch.testing.assert_close(value, eager(model, inputs)[name], atol=1e-4, rtol=0)


class TracedDifferently(hf_roformer.HfRoFormerForSequenceClassification):
    """A model whose traced graph computes something else than its eager forward (by `shift`), or fails to trace."""

    shift = 1e-3

    def forward(self, *args, **kwargs):
        outputs = super().forward(*args, **kwargs)
        if torch.jit.is_tracing() or torch.compiler.is_compiling():
            if self.shift is None:
                raise RuntimeError("this model does not trace")
            outputs.logits = outputs.logits + self.shift
        return outputs


def test_a_graph_that_differs_is_refused_and_nothing_is_written(tmp_path):
    model = build(TracedDifferently)
    model.train()
    with pytest.raises(ExportMismatchError) as refused:
        export_onnx(model, example(1, 16), tmp_path / "model.onnx", exporter="torchscript")
    error = refused.value
    assert (error.shape, error.output, error.tolerance) == ((1, 1), "logits", 1e-4)
    assert error.difference == pytest.approx(1e-3, abs=2e-5)
    assert "(1, 1)" in str(error) and "logits" in str(error) and "nothing was written" in str(error)
    assert list(tmp_path.iterdir()) == []
    assert all(module.training for module in model.modules())
    with pytest.raises(ExportMismatchError, match="the program is not returned"):
        export_program(model, example(1, 16))
    assert all(module.training for module in model.modules())


@pytest.mark.parametrize("exporter", ["torchscript", pytest.param("dynamo", marks=pytest.mark.slow)])
def test_a_failing_exporter_leaves_every_module_in_the_mode_it_was_in(exporter, tmp_path):
    model = build(TracedDifferently)
    model.shift = None
    model.train()
    model.classifier.eval()
    modes = {name: module.training for name, module in model.named_modules()}
    with pytest.raises(Exception, match="this model does not trace"):
        export_onnx(model, example(1, 4), tmp_path / "model.onnx", exporter=exporter)
    assert {name: module.training for name, module in model.named_modules()} == modes
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_kept(tmp_path):
    model = build(hf_roformer.HfRoFormerModel)
    (tmp_path / "model.onnx").write_text("mine")
    with pytest.raises(UsageError, match="overwrite=True"):
        export_onnx(model, example(1, 4), tmp_path / "model.onnx", exporter="torchscript")
    assert (tmp_path / "model.onnx").read_text() == "mine"
    export_onnx(model, example(1, 4), tmp_path / "model.onnx", exporter="torchscript", overwrite=True)
    assert_onnx_equals_eager(tmp_path / "model.onnx", model, shapes=[(2, 3)])


def test_token_type_ids_become_an_input_of_the_graph(tmp_path):
    model = build(hf_roformer.HfRoFormerForSequenceClassification)
    inputs = {**example(1, 6), "token_type_ids": torch.tensor([[0, 0, 0, 1, 1, 1]])}
    report = export_onnx(model, inputs, tmp_path / "model.onnx", exporter="torchscript", check_shapes=[(1, 5), (4, 9)])
    assert report.input_names == ("input_ids", "attention_mask", "token_type_ids")
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    (logits,) = session.run(["logits"], {name: tensor.numpy() for name, tensor in inputs.items()})
    np.testing.assert_allclose(logits, eager(model, inputs)["logits"].numpy(), atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    "inputs, kwargs, message",
    [
        ({"input_ids": torch.ones(1, 4, dtype=torch.long)}, {"exporter": "jit"}, "unknown exporter 'jit'"),
        ({**example(1, 4), "labels": torch.ones(1, 4)}, {}, "also has labels"),
        ({"input_ids": torch.ones(1, 2, 4, dtype=torch.long)}, {}, r"\(batch, sequence\) integer tensor"),
        ({"input_ids": torch.ones(1, 0, dtype=torch.long)}, {}, "at least one row of at least one token"),
        ([[1, 2, 3]], {}, "mapping with `input_ids`"),
    ],
    ids=["exporter", "unknown_input", "rank", "empty", "not_a_mapping"],
)
def test_bad_arguments_are_refused_before_any_work(inputs, kwargs, message, tmp_path):
    model = build(hf_roformer.HfRoFormerModel)
    with pytest.raises(UsageError, match=message):
        export_onnx(model, inputs, tmp_path / "exports" / "model.onnx", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_a_half_precision_model_is_refused_naming_what_to_export(tmp_path):
    model = build(hf_roformer.HfRoFormerModel).to(torch.bfloat16)
    with pytest.raises(UsageError, match=r"torch.bfloat16.*model.float\(\)"):
        export_onnx(model, example(1, 4), tmp_path / "model.onnx")
    with pytest.raises(UsageError, match=r"torch.bfloat16"):
        export_program(model, example(1, 4))
    assert list(tmp_path.iterdir()) == []


def test_a_decoder_with_per_query_rotation_refuses_a_trace(tmp_path):
    """Decoders with a length-dependent rope type pick their key rotation from values: a trace would keep the
    example's pick (measured: logits off by 9.8 at 2 x 200), so they refuse instead."""
    model = build(hf_roformer.HfRoFormerForCausalLM, is_decoder=True, rope_parameters=SCALED_ROPE["dynamic"])
    with pytest.raises(NotImplementedError, match="rope_type 'dynamic'"):
        export_onnx(model, example(1, 1), tmp_path / "model.onnx", exporter="torchscript")
    assert not model.training and list(tmp_path.iterdir()) == []


def test_a_graph_that_does_not_run_at_a_checked_shape_is_refused():
    """A graph fixed to the example's sizes (the dynamo exporter falls back to that for eager attention from one
    token) fails in onnxruntime at the checks: that is a refusal naming the shape, not a crash."""
    from hf_roformer.integrations.export import compare_on_shapes, prepared_graph

    model = build(hf_roformer.HfRoFormerModel)
    graph, _ = prepared_graph(model, example(1, 1))

    def fixed_to_one_token(tensors):
        if tensors[0].shape != (1, 1):
            raise RuntimeError(f"Got invalid dimensions for input: input_ids\nExpected: 1, got {tensors[0].shape[1]}")
        return graph(*tensors)

    with pytest.raises(ExportMismatchError, match=r"does not run at input shape \(1, 5\) \(Got invalid") as refused:
        compare_on_shapes(fixed_to_one_token, graph, [(1, 1), (1, 5)], 1e-4, "nothing was written")
    assert (refused.value.shape, refused.value.output, refused.value.difference) == ((1, 5), None, float("inf"))
