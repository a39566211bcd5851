"""Checked export: ONNX files (torch's dynamo and TorchScript exporters) and `torch.export` programs with dynamic batch
and sequence axes, from any example input, one sentence included.

An export traces one forward on an example; what the graph computes for other shapes is a promise of the tracer. The
functions here keep it: they trace with symbolic batch and sequence sizes (an example of one row or one token does
not fix the graph to it), run the result on other shapes (one row and several, short and past the trained length,
padded rows) and compare every output with the PyTorch model. A graph that differs beyond the tolerance raises
`ExportMismatchError` naming the shape, the output and the difference, and no file is written. The model is traced in
evaluation mode and every module is left in the mode it came in, also when an exporter fails (torch's TorchScript
exporter puts the module it is given, and every module inside it, back in that module's mode: a wrapper made for the
export, in training mode as every new module, would leave the model in training mode).

Not Hub-bound: imports onnxruntime and the exporters only when called (the `onnx` extra).
"""

import contextlib
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..remote_code.releases_hf_roformer import example_sizes_of_one_stay_symbolic
from ..utils.errors import ExportMismatchError, UsageError, unknown_name
from ..utils.extras import require_extra


# The inputs an exported graph takes, in this order (those the example holds): what a tokenizer returns.
GRAPH_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
EXPORTERS = ("dynamo", "torchscript")
# The lowest opset the graphs need (LayerNormalization is opset 17); the dynamo exporter writes 18 and converts down.
DEFAULT_OPSET = 17
DEFAULT_TOLERANCE = 1e-4  # float32


class GraphOutputs(torch.nn.Module):
    """A model as an exported graph sees it: the tensors of `input_names` (of `input_dtypes`) in, the tensors of its
    output (logits, hidden states, ...) out, as a tuple in the order of `output_names`; no cache."""

    def __init__(self, model: torch.nn.Module, inputs: dict[str, torch.Tensor]):
        super().__init__()
        self.model = model
        self.input_names = tuple(inputs)
        self.input_dtypes = tuple(tensor.dtype for tensor in inputs.values())
        self.output_names: tuple[str, ...] = ()

    def named_outputs(self, *tensors: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every tensor the model returns for `tensors` (given in the order of `input_names`), by name."""
        outputs = self.model(**dict(zip(self.input_names, tensors, strict=True)), use_cache=False, return_dict=True)
        return {name: value for name, value in outputs.items() if isinstance(value, torch.Tensor) and name != "loss"}

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The outputs of `output_names` for `tensors`."""
        outputs = self.named_outputs(*tensors)
        return tuple(outputs[name] for name in self.output_names)


@dataclass
class ExportReport:
    """What `export_onnx` wrote and checked: the file, the exporter and opset, the graph's input and output names, and
    the largest absolute difference from PyTorch over all outputs on each checked input shape."""

    path: Path
    exporter: str
    opset_version: int
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    differences: dict[tuple[int, int], float] = field(default_factory=dict)


def default_check_shapes(config) -> tuple[tuple[int, int], ...]:
    """(batch, length) shapes an export is checked on: one token, one short row, a batch of 4 x 128, and 2 rows 16
    tokens past the trained length `max_position_embeddings` (RoPE has no table: the graph must go on rotating)."""
    return (1, 1), (1, 5), (4, 128), (2, config.max_position_embeddings + 16)


def graph_inputs(example) -> dict[str, torch.Tensor]:
    """The example's tensors in graph order, after refusing what a graph with (batch, sequence) axes cannot take."""
    if not hasattr(example, "keys") or "input_ids" not in example:
        raise UsageError(
            "The example must be a mapping with `input_ids` (what a tokenizer returns with return_tensors='pt'), got "
            f"{type(example).__name__}."
        )
    unknown = sorted(set(example.keys()) - set(GRAPH_INPUTS))
    if unknown:
        raise UsageError(f"Exported graphs take {', '.join(GRAPH_INPUTS)}; the example also has {', '.join(unknown)}.")
    inputs = {name: example[name] for name in GRAPH_INPUTS if name in example}
    shape = None
    for name, tensor in inputs.items():
        if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2 or tensor.dtype.is_floating_point:
            described = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
            raise UsageError(f"`{name}` of the example must be a (batch, sequence) integer tensor, got {described}.")
        if shape is not None and tuple(tensor.shape) != shape:
            raise UsageError(f"`{name}` of the example has shape {tuple(tensor.shape)}, `input_ids` has {shape}.")
        shape = tuple(tensor.shape)
    if 0 in shape:
        raise UsageError(f"The example has shape {shape}; pass at least one row of at least one token.")
    return inputs


def check_inputs(graph: GraphOutputs, batch: int, length: int) -> tuple[torch.Tensor, ...]:
    """Random inputs of the graph for one checked shape, seeded by it: ids over the whole vocabulary, random segments,
    and the last row padded from half its length when there are several; of the example's dtypes, on the model's
    device."""
    config, device = graph.model.config, next(graph.model.parameters()).device
    generator = torch.Generator().manual_seed(batch * 100_003 + length)
    tensors = {
        "input_ids": torch.randint(0, config.vocab_size, (batch, length), generator=generator),
        "token_type_ids": torch.randint(0, config.type_vocab_size, (batch, length), generator=generator),
        "attention_mask": torch.ones(batch, length, dtype=torch.long),
    }
    if batch > 1:
        tensors["attention_mask"][-1, (length + 1) // 2 :] = 0
    dtypes = dict(zip(graph.input_names, graph.input_dtypes, strict=True))
    return tuple(tensors[name].to(device, dtypes[name]) for name in graph.input_names)


def compare_on_shapes(run_graph, graph: GraphOutputs, shapes, tolerance: float, refused: str) -> dict:
    """Run `run_graph(tensors) -> outputs` and the model on each shape; the largest difference of each, or
    `ExportMismatchError` at the first shape where an output differs beyond `tolerance` (or in shape), its message
    ending with `refused` (what was not done)."""
    graph.eval()  # the references are the model's outputs in evaluation mode, whatever an exporter did to it
    differences = {}
    for batch, length in shapes:
        tensors = check_inputs(graph, batch, length)
        with torch.no_grad():
            expected = graph(*tensors)
        try:
            actual = run_graph(tensors)
        except Exception as error:  # onnxruntime's or torch's refusal of sizes the graph was fixed to
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ExportMismatchError(
                f"The exported graph does not run at input shape ({batch}, {length}) ({reason}); {refused}.",
                shape=(batch, length),
                output=None,
                difference=float("inf"),
                tolerance=tolerance,
            ) from error
        worst = 0.0
        for name, reference, value in zip(graph.output_names, expected, actual, strict=True):
            value = torch.as_tensor(value).to(reference.device)
            difference = float("inf") if value.shape != reference.shape else (value - reference).abs().max().item()
            if not difference <= tolerance:
                raise ExportMismatchError(
                    f"The exported graph's `{name}` differs from PyTorch by {difference:.3g} at input shape "
                    f"({batch}, {length}), above the tolerance {tolerance:g}; {refused}.",
                    shape=(batch, length),
                    output=name,
                    difference=difference,
                    tolerance=tolerance,
                )
            worst = max(worst, difference)
        differences[(batch, length)] = worst
    return differences


def exportable_inputs(model: torch.nn.Module, example) -> dict[str, torch.Tensor]:
    """The example's tensors in graph order, after refusing a model or an example the checked export cannot take."""
    dtype = next(model.parameters()).dtype
    if dtype != torch.float32:
        raise UsageError(
            f"The model is {dtype}; exports are checked in float32 against a tolerance of 1e-4: export `model.float()`."
        )
    return graph_inputs(example)


def prepared_graph(model: torch.nn.Module, example) -> tuple[GraphOutputs, tuple[torch.Tensor, ...]]:
    """The model as a graph of the example's inputs, its outputs named from one forward on the example (the model in
    evaluation mode), and the example's tensors on the model's device."""
    inputs = exportable_inputs(model, example)
    tensors = tuple(tensor.to(next(model.parameters()).device) for tensor in inputs.values())
    # A new module is in training mode, and torch's TorchScript exporter puts the module it was given back in its mode
    # afterwards, the model below included: the wrapper is made in evaluation mode.
    graph = GraphOutputs(model, inputs).eval()
    with torch.no_grad():
        graph.output_names = tuple(graph.named_outputs(*tensors))
    return graph, tensors


@contextlib.contextmanager
def evaluated(model: torch.nn.Module):
    """Within the block `model` is in evaluation mode; after it every module is back in the mode it was in, whatever
    happens inside (an exporter that fails leaves the model as it set it)."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def dynamic_shapes(count: int) -> dict[str, tuple[dict, ...]]:
    """`torch.export` specifications of `GraphOutputs.forward(*tensors)`: the first axis of every input is the batch,
    the second the sequence."""
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    return {"tensors": tuple({0: batch, 1: sequence} for _ in range(count))}


def export_program(
    model: torch.nn.Module,
    example,
    *,
    check_shapes: tuple[tuple[int, int], ...] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> "torch.export.ExportedProgram":
    """`torch.export.export` of `model` with dynamic batch and sequence axes from `example` (a tokenizer's output;
    one row of one token works), checked: the program's outputs equal the model's within `tolerance` on
    `check_shapes` (default: `default_check_shapes`), else `ExportMismatchError`.

    The program takes the example's inputs positionally, in the order input_ids, attention_mask, token_type_ids (those
    the example has) and returns a tuple of the model's output tensors (`logits`, or `last_hidden_state` and
    `pooler_output`, or `start_logits` and `end_logits`).
    """
    with evaluated(model):
        graph, tensors = prepared_graph(model, example)
        with example_sizes_of_one_stay_symbolic():
            program = torch.export.export(graph, tensors, dynamic_shapes=dynamic_shapes(len(tensors)))
        module, shapes = program.module(), check_shapes or default_check_shapes(model.config)
        refused = "the program is not returned"
        compare_on_shapes(lambda inputs: module(*inputs), graph, shapes, tolerance, refused)
    return program


def export_onnx(
    model: torch.nn.Module,
    example,
    path: str | Path,
    *,
    exporter: str = "dynamo",
    opset_version: int = DEFAULT_OPSET,
    check_shapes: tuple[tuple[int, int], ...] | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    overwrite: bool = False,
) -> ExportReport:
    """Export `model` to the ONNX file `path` with dynamic batch and sequence axes from `example` (a tokenizer's
    output, `return_tensors="pt"`; one sentence works), and write it only once onnxruntime's outputs equal the
    model's within `tolerance` on `check_shapes` (default: `default_check_shapes`).

    `exporter` is "dynamo" (`torch.onnx.export(..., dynamo=True)`) or "torchscript" (`dynamo=False`, the exporter many
    tools still call). The graph's inputs are the example's (input_ids, attention_mask, token_type_ids), its outputs
    the model's output tensors by name (`logits`, ...). Raises `ExportMismatchError` (nothing written) when a shape
    differs, `UsageError` for a bad argument or an existing `path` without `overwrite`, and the exporter's own error
    when it fails; in every case the model is back in the mode it came in.
    """
    if exporter not in EXPORTERS:
        raise UsageError(unknown_name("exporter", exporter, list(EXPORTERS)))
    require_extra("onnx", "ONNX export")
    exportable_inputs(model, example)
    path = Path(path)
    if path.exists() and not overwrite:
        raise UsageError(f"{path} exists; pass overwrite=True to replace it, or another path.")
    path.parent.mkdir(parents=True, exist_ok=True)
    with evaluated(model), tempfile.TemporaryDirectory(prefix=f".{path.name}.", dir=path.parent) as scratch:
        graph, tensors = prepared_graph(model, example)
        written = Path(scratch) / path.name
        if exporter == "dynamo":
            write_with_dynamo(graph, tensors, written, opset_version)
        else:
            write_with_torchscript(graph, tensors, written, opset_version)
        shapes = check_shapes or default_check_shapes(model.config)
        differences = check_with_onnxruntime(graph, written, shapes, tolerance, f"nothing was written to {path}")
        files = sorted(Path(scratch).iterdir())  # the graph and, for models over 2 GB, its external weights
        taken = [str(path.parent / file.name) for file in files if (path.parent / file.name).exists()]
        if taken and not overwrite:
            raise UsageError(f"{', '.join(taken)} exist; pass overwrite=True to replace them, or another path.")
        for file in files:
            file.replace(path.parent / file.name)
    return ExportReport(path, exporter, opset_version, graph.input_names, graph.output_names, differences)


def write_with_dynamo(graph: GraphOutputs, tensors: tuple, path: Path, opset_version: int) -> None:
    """torch's dynamo exporter (`torch.export`, then translation to ONNX)."""
    program = torch.onnx.export(
        graph,
        tensors,
        dynamo=True,
        dynamic_shapes=dynamic_shapes(len(tensors)),
        input_names=list(graph.input_names),
        output_names=list(graph.output_names),
        opset_version=opset_version,
        verbose=False,
    )
    program.save(str(path))


def write_with_torchscript(graph: GraphOutputs, tensors: tuple, path: Path, opset_version: int) -> None:
    """torch's TorchScript exporter: it traces one forward and records sizes as graph values, so the axes named
    dynamic below follow the inputs. Its tracer warnings (Python values read from sizes) are checked by the
    comparison that follows rather than shown."""
    axes = output_axes(graph, tensors)
    dynamic_axes = {name: {0: "batch", 1: "sequence"} for name in graph.input_names}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(
            graph,
            tensors,
            str(path),
            dynamo=False,
            input_names=list(graph.input_names),
            output_names=list(graph.output_names),
            dynamic_axes={**dynamic_axes, **axes},
            opset_version=opset_version,
        )


def output_axes(graph: GraphOutputs, tensors: tuple) -> dict[str, dict[int, str]]:
    """Which axes of each output follow the batch and the sequence: found by running the graph with one more row and
    with one more token than the example."""
    batch, length = tensors[0].shape
    with torch.no_grad():
        base = graph(*tensors)
        more_rows = graph(*check_inputs(graph, batch + 1, length))
        more_tokens = graph(*check_inputs(graph, batch, length + 1))
    axes = {}
    for name, shape, rows, tokens in zip(graph.output_names, base, more_rows, more_tokens, strict=True):
        axes[name] = {}
        for axis, size in enumerate(shape.shape):
            if rows.shape[axis] != size:
                axes[name][axis] = "batch"
            elif tokens.shape[axis] != size:
                axes[name][axis] = "sequence"
    return axes


def check_with_onnxruntime(graph: GraphOutputs, path: Path, shapes, tolerance: float, refused: str) -> dict:
    """Run the ONNX file in onnxruntime (CPU) on `shapes` against the model (`compare_on_shapes`)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def run(tensors):
        feed = {name: tensor.cpu().numpy() for name, tensor in zip(graph.input_names, tensors, strict=True)}
        return session.run(list(graph.output_names), feed)

    return compare_on_shapes(run, graph, shapes, tolerance, refused)


__all__ = [
    "DEFAULT_OPSET",
    "ExportReport",
    "GraphOutputs",
    "default_check_shapes",
    "export_onnx",
    "export_program",
]
