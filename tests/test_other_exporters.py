"""Exporters nobody here wrote, used as their users use them, on hf_roformer models: transformers' own exporters
(`transformers.exporters`, experimental since 5.24: ONNX, `torch.export`, OpenVINO and ExecuTorch programs through
`AutoHfExporter`, saved and loaded again), and TorchScript's tracer with its sanity check, the route
`openvino.convert_model(model, example_input=...)` takes (the tracer runs the forward twice, once without gradients:
the graph must not depend on that). Each export computes what the eager model does, also at shapes it was not
exported at and past the trained length."""

import pytest
import torch
from conftest import tiny_config

import hf_roformer


HEADS = {
    "encoder": hf_roformer.HfRoFormerModel,
    "sequence_classification": hf_roformer.HfRoFormerForSequenceClassification,
    "token_classification": hf_roformer.HfRoFormerForTokenClassification,
    "masked_lm": hf_roformer.HfRoFormerForMaskedLM,
}


def build(head):
    """A two-layer tiny model with sharp attention (a wrong rotation shows), in evaluation mode."""
    torch.manual_seed(0)
    return head(tiny_config(num_labels=3, initializer_range=0.5)).eval()


def inputs(batch: int, length: int, padded: bool = True) -> dict[str, torch.Tensor]:
    """Token ids and a mask whose last row is padded (when `padded` and there are several rows)."""
    generator = torch.Generator().manual_seed(batch * 100 + length)
    ids = torch.randint(5, 90, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    if padded and batch > 1:
        mask[-1, length // 2 :] = 0
    return {"input_ids": ids, "attention_mask": mask}


def first_output(outputs) -> torch.Tensor:
    """The main output of a model or an exported program (logits, else the last hidden state)."""
    if isinstance(outputs, dict) or hasattr(outputs, "keys"):
        for name in ("logits", "last_hidden_state"):
            if name in outputs.keys():
                return torch.as_tensor(outputs[name])
        return torch.as_tensor(next(iter(outputs.values())))
    if isinstance(outputs, tuple | list):
        return torch.as_tensor(outputs[0])
    return torch.as_tensor(outputs)


@pytest.mark.parametrize("head", ["encoder", "sequence_classification"])
@pytest.mark.parametrize("export_format", ["onnx", "dynamo", "openvino", "executorch"])
def test_transformers_exporters_export_what_the_model_computes(head, export_format, tmp_path):
    exporters = pytest.importorskip("transformers.exporters", reason="transformers' exporters arrived in 5.24")
    if export_format == "onnx":
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnxscript")
    if export_format in ("openvino", "executorch"):
        pytest.importorskip(export_format)
    model = build(HEADS[head])
    configs = {"onnx": exporters.OnnxConfig, "dynamo": exporters.DynamoConfig, "openvino": exporters.OpenVINOConfig}
    config = configs[export_format](dynamic=True) if export_format in configs else executorch_config(exporters)
    exported = exporters.AutoHfExporter.from_config(config).export(model, inputs(2, 12), config)
    exported.save_pretrained(tmp_path)
    # OpenVINO runs in its default precision, bfloat16 on CPUs with bfloat16 units: compared in float32.
    runner = {"config": {"INFERENCE_PRECISION_HINT": "f32"}} if export_format == "openvino" else {}
    exported = exported.to(**runner) if runner else exported
    # A torch.export program is pickled: transformers asks for trust_remote_code to load one (ONNX needs nothing).
    reloaded = exporters.ExportedModel.from_pretrained(tmp_path, trust_remote_code=export_format == "dynamo", **runner)
    with torch.no_grad():
        for shape in [(2, 12), (3, 20), (1, 5), (2, 80)]:  # 80 tokens: past the trained length (64)
            batch = inputs(*shape)
            expected = first_output(model(**batch))
            for program in (exported, reloaded):
                torch.testing.assert_close(first_output(program(**batch)), expected, atol=1e-5, rtol=1e-5)


def executorch_config(exporters):
    """transformers' ExecuTorch exporter (XNNPACK, CPU) with the batch and length bounded: its memory planner sizes
    every buffer from the bounds, and without them transformers caps each dynamic axis near the example's size (64
    here), which would refuse the test's 80 tokens."""
    batch, length = torch.export.Dim("batch", min=1, max=8), torch.export.Dim("length", min=2, max=128)
    axes = {0: batch, 1: length}
    return exporters.ExecutorchConfig(dynamic=True, dynamic_shapes={"input_ids": axes, "attention_mask": axes})


@pytest.mark.parametrize("head", ["encoder", "sequence_classification"])
def test_transformers_onnx_exporter_from_one_row_within_the_size_flag(head):
    """From a one-row example torch fixes the batch to 1 for any model (BERT too: its 0/1 specialization), and the
    graph refuses two rows; within `example_sizes_of_one_stay_symbolic` (torch's `backed_size_oblivious`, which
    `hf_roformer.export_onnx` sets) the same export takes any batch, past the trained length too."""
    exporters = pytest.importorskip("transformers.exporters", reason="transformers' exporters arrived in 5.24")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from hf_roformer.remote_code.releases_hf_roformer import example_sizes_of_one_stay_symbolic

    model = build(HEADS[head])
    config = exporters.OnnxConfig(dynamic=True)
    with example_sizes_of_one_stay_symbolic():
        exported = exporters.AutoHfExporter.from_config(config).export(model, inputs(1, 12), config)
    with torch.no_grad():
        for shape in [(3, 80), (1, 5)]:
            batch = inputs(*shape)
            torch.testing.assert_close(first_output(exported(**batch)), first_output(model(**batch)), atol=1e-5,
                                       rtol=1e-5)  # fmt: skip


@pytest.mark.parametrize("head", sorted(HEADS))
@pytest.mark.parametrize("gradients", [True, False], ids=["gradients recorded", "no_grad"])
def test_torchscript_traces_pass_their_sanity_check(head, gradients):
    """`torch.jit.trace(..., check_trace=True)`, as OpenVINO's converter calls it: before, the trace recorded the
    in-place, memory-saving path when gradients were off and the out-of-place one when on, and the check failed."""
    model = build(HEADS[head])
    example = inputs(2, 12)
    with torch.set_grad_enabled(gradients):
        traced = torch.jit.trace(model, example_kwarg_inputs=example, strict=False, check_trace=True)
        again = inputs(2, 12, padded=False)
        torch.testing.assert_close(first_output(traced(**again)), first_output(model(**again)), atol=1e-5, rtol=1e-5)


def test_openvino_converts_the_model_as_its_users_convert_one():
    """`openvino.convert_model(model, example_input=...)` and a compiled model equal to PyTorch (runs where OpenVINO
    is installed: it is no dependency of the package). Compiled in float32: on CPUs with bfloat16 units OpenVINO runs
    in bfloat16 unless told otherwise (differences of 1e-2)."""
    openvino = pytest.importorskip("openvino")
    model = build(hf_roformer.HfRoFormerForSequenceClassification)
    example = inputs(2, 12)
    converted = openvino.convert_model(model, example_input=example)
    compiled = openvino.compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    batch = inputs(2, 80)  # past the trained length (64), with padding
    result = compiled({name: tensor.numpy() for name, tensor in batch.items()})
    with torch.no_grad():
        expected = model(**batch).logits
    torch.testing.assert_close(torch.as_tensor(result[0]), expected, atol=1e-4, rtol=1e-4)


def test_openvino_runs_each_rotation_as_one_fused_operation():
    """The trace gives OpenVINO the rotation of queries and keys in the form it fuses into its RoPE operation: one per
    rotated tensor, two per layer, where the pairs' split and stack ran as separate reference kernels (docs/speed.md
    gives the model's throughput either way)."""
    openvino = pytest.importorskip("openvino")
    model = build(hf_roformer.HfRoFormerModel)
    converted = openvino.convert_model(model, example_input=inputs(2, 12))
    compiled = openvino.compile_model(converted, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    layer_types = [op.get_rt_info()["layerType"].astype(str) for op in compiled.get_runtime_model().get_ops()]
    assert layer_types.count("RoPE") == 2 * model.config.num_hidden_layers
