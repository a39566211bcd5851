"""Query, key and value as one matrix product at inference, on request: `model.fuse_qkv_projections()`.

Each attention layer projects its input three times. Where the host bounds a forward (a GPU at short and medium
lengths, where every kernel launch costs host time), one product of the three weights joined saves two launches per
layer: with the same joined weights an H200 at base size ran 1.10-1.13x the three products' throughput from 32 x 128
to 4 x 2,048 tokens, and the same at 1 x 8,192 (benchmarks/results/fused_projection_nvidia_h200.md).

The joined weights are a copy kept beside the three projections (non-persistent buffers), which stay the model's
parameters: checkpoint names, `save_pretrained` output, LoRA targets and tensor-parallel plans are the unfused model's.
The copy costs the memory of the three weights once more. It is rebuilt from the parameters when they have changed
since it was made (an optimizer step, `load_state_dict`, `.to()`), and the three products run wherever the joined
one would not stand for them: while gradients are recorded (the copy has none), in recorded graphs (compiled,
exported: the graph keeps the parameters), and when a projection is no longer a plain `nn.Linear` (a LoRA adapter
attached after fusing, a quantized layer).

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from typing import NamedTuple

import torch
from torch import nn

from .releases_hf_roformer import child_modules, own_buffers, own_parameters, tensor_version, traces_graph


PROJECTIONS = ("query", "key", "value")


def joinable_problem(module: nn.Module) -> str | None:
    """Why `module`'s query, key and value projections cannot be joined (None if they can): each must be a plain
    `nn.Linear` with its weights in ordinary tensors on one device, in one dtype."""
    projections = [getattr(module, name) for name in PROJECTIONS]
    for name, projection in zip(PROJECTIONS, projections, strict=True):
        if type(projection) is not nn.Linear:
            return f"`{name}` is a {type(projection).__name__}, not a plain nn.Linear"
        for tensor in (projection.weight, projection.bias):
            if tensor is not None and type(tensor.data) is not torch.Tensor:
                return f"`{name}` holds a {type(tensor.data).__name__} (sharded or wrapped weights)"
            if tensor is not None and tensor.is_meta:
                return f"`{name}` has no weights yet (meta device)"
    layouts = {(p.weight.dtype, p.weight.device, p.bias is None) for p in projections}
    if len(layouts) > 1:
        return "the projections differ in dtype, device or bias"
    return None


def join_projections(module: nn.Module) -> None:
    """Keep `module`'s query, key and value weights (and biases) concatenated, as non-persistent buffers, with what
    they were made from (`JoinedSource`)."""
    projections = [getattr(module, name) for name in PROJECTIONS]
    with torch.inference_mode(False), torch.no_grad():
        weight = torch.cat([projection.weight for projection in projections])
        bias = None if projections[0].bias is None else torch.cat([projection.bias for projection in projections])
    module.register_buffer("joined_qkv_weight", weight, persistent=False)
    module.register_buffer("joined_qkv_bias", bias, persistent=False)
    sizes = [projection.out_features for projection in projections]
    module.joined_qkv_source = JoinedSource(sizes, source_state(projection_parameters(module)))


class JoinedSource(NamedTuple):
    """The three projections' widths, and the state of the parameters joined weights were made from."""

    sizes: list[int]
    state: tuple


def projection_parameters(module: nn.Module) -> tuple[torch.Tensor, ...] | None:
    """The weights and biases of `module`'s three projections as they are now, or None where one of them is not a
    plain `nn.Linear` (replaced by an adapter or a quantized layer). Read from the modules' own dicts: this runs per
    layer and forward, and attribute lookups through `nn.Module` would cost about what the joined product saves."""
    children = child_modules(module)
    projections = children["query"], children["key"], children["value"]
    if not (type(projections[0]) is type(projections[1]) is type(projections[2]) is nn.Linear):
        return None
    parameters = [own_parameters(projection) for projection in projections]
    if parameters[0]["bias"] is None:
        return tuple(own["weight"] for own in parameters)
    return tuple(own[name] for own in parameters for name in ("weight", "bias"))


def source_state(parameters: tuple[torch.Tensor, ...]) -> tuple:
    """What changes when a parameter's values may have: its memory (`.to()`, `.data =`, a new parameter), its version
    counter (in-place writes: optimizer steps, `load_state_dict`), and the dtype and device of the first (so that
    memory given back and reused by a tensor of another dtype or device is not taken for the same)."""
    first = parameters[0]
    return (first.dtype, first.device, *[value for tensor in parameters for value in state_of(tensor)])


def state_of(tensor: torch.Tensor) -> tuple[int, int]:
    """A tensor's memory address and version counter."""
    return tensor.data_ptr(), tensor_version(tensor)


def split_projections(module: nn.Module) -> None:
    """Drop the joined weights: `module` projects with its three layers again."""
    for name in ("joined_qkv_weight", "joined_qkv_bias", "joined_qkv_source"):
        if hasattr(module, name):
            delattr(module, name)


def is_joined(module: nn.Module) -> bool:
    """Whether `module` keeps joined query/key/value weights."""
    return getattr(module, "joined_qkv_source", None) is not None


def joined_projection(module: nn.Module, hidden_states: torch.Tensor) -> tuple[torch.Tensor, ...] | None:
    """The query, key and value projections of `hidden_states` as one product of the joined weights (views of one
    `(batch, seq, 3 x hidden)` result), or None where the three products must run: not joined, in a recorded graph,
    a projection replaced since, or gradients recorded for the weights. Joined weights older than the parameters are
    rebuilt first. The checks cost a few microseconds of host time (about 6 on a 2-core AMD EPYC), less than the two
    launches they save."""
    source = module.__dict__.get("joined_qkv_source")
    if source is None or traces_graph():
        return None
    parameters = projection_parameters(module)
    if parameters is None:
        return None
    if torch.is_grad_enabled() and any(parameter.requires_grad for parameter in parameters):
        return None
    if source_state(parameters) != source.state:
        join_projections(module)
        source = module.joined_qkv_source
    buffers = own_buffers(module)
    output = nn.functional.linear(hidden_states, buffers["joined_qkv_weight"], buffers["joined_qkv_bias"])
    return output.split(source.sizes, dim=-1)


class JoinedProjectionsMixin:
    """`fuse_qkv_projections()` and `unfuse_qkv_projections()` for a model whose attention layers (of the classes
    `projected_attention_classes` names) project queries, keys and values with three `nn.Linear` layers."""

    projected_attention_classes: tuple[type, ...] = ()

    def fuse_qkv_projections(self) -> None:
        """Run each self-attention layer's query, key and value projections as one matrix product at inference (as
        diffusers' `fuse_qkv_projections`): two kernel launches less per layer, which pays where the host bounds the
        forward (on an H200, 1.10-1.13x from 32 x 128 to 4 x 2,048 tokens; docs/speed.md), at the cost of a copy of
        those weights.

        The three layers stay the model's parameters (saved files, LoRA targets and tensor-parallel plans do not
        change), and the forward gives the unfused outputs within rounding: the copy follows the parameters when they
        change, and the three products run while gradients are recorded, in compiled graphs and once a layer is
        replaced (a LoRA adapter attached afterwards). Raises `ValueError` naming the layer, changing nothing, where
        one is not a plain `nn.Linear` (adapters or quantization already applied, sharded weights): fuse first. Hooks
        registered on the three layers do not run while their product is joined. `unfuse_qkv_projections()` drops the
        copy."""
        modules = {
            name: module
            for name, module in self.named_modules()
            if isinstance(module, self.projected_attention_classes)
        }
        for name, module in modules.items():
            problem = joinable_problem(module)
            if problem is not None:
                raise ValueError(f"Cannot fuse the projections of `{name}`: {problem}.")
        for module in modules.values():
            join_projections(module)

    def unfuse_qkv_projections(self) -> None:
        """Undo `fuse_qkv_projections()`: drop the joined weights; each layer projects with its three layers."""
        for module in self.modules():
            split_projections(module)


__all__ = [
    "JoinedProjectionsMixin",
    "is_joined",
    "join_projections",
    "joinable_problem",
    "joined_projection",
    "split_projections",
]
