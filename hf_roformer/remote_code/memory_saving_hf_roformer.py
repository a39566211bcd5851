"""Memory-saving mechanics of the layers, each behind one small named entry: a dropout with a one-byte mask,
activations computed in place in inference, the residual added in place where autograd allows it, and a projection
whose backward pass recomputes its input instead of storing it. Every one gives bitwise the same result as the plain
form; the layers read as the plain form plus one call.

Hub-bound: copied next to saved checkpoints; imports only `torch` and sibling Hub-bound files.
"""

from collections.abc import Callable
from contextlib import contextmanager

import torch
from torch import nn

from .input_checks_hf_roformer import traces_graph
from .releases_hf_roformer import is_view_of_another_tensor


# In-place forms of `ACT2FN` activations (the same kernels, writing into their input), for inference.
IN_PLACE_ACTIVATIONS = {
    "gelu": torch.ops.aten.gelu_,
    "relu": torch.relu_,
    "silu": torch.ops.aten.silu_,
    "swish": torch.ops.aten.silu_,
}


class HfRoFormerDropout(nn.Dropout):
    """`nn.Dropout` that keeps a one-byte mask for the backward pass on every device.

    On CPU, `nn.Dropout` in training multiplies by a float mask of the input's size and keeps it for the backward pass
    (4 bytes per element; CUDA takes the fused `native_dropout` with a boolean mask): at 32 x 1,024 tokens and hidden
    256, 32 MB per dropout, two per layer. `torch.native_dropout` keeps the boolean mask everywhere; the identity in
    evaluation, as `nn.Dropout`.
    """

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Zero elements with probability `p` and scale the rest by 1 / (1 - p) in training; identity otherwise."""
        if not self.training or self.p == 0.0:
            return hidden_states
        return torch.native_dropout(hidden_states, self.p, True)[0]


def activate_in_place_in_inference(activation: Callable, hidden_act: str, expanded: torch.Tensor) -> torch.Tensor:
    """`activation(expanded)`; in place where no gradient is recorded and the activation has an in-place form, so
    inference allocates no second intermediate-size tensor (the feed-forward block's peak). Never in a recorded graph
    (compiled, or traced by TorchScript: its trace check runs the forward again without gradients, and an in-place
    operator there would make the two graphs differ)."""
    in_place = IN_PLACE_ACTIVATIONS.get(hidden_act)
    if in_place is None or traces_graph() or (torch.is_grad_enabled() and expanded.requires_grad):
        return activation(expanded)
    return in_place(expanded)


def add_residual(projection: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """`projection + residual`, added in place into `projection` where that is safe.

    A projection (or its dropout) is a fresh tensor that nothing keeps for the backward pass: adding in place saves one
    hidden-size tensor per block. Not where the sum's dtype or shape differ, nor on a view that records gradients (the
    projection of 3D states without dropout), whose in-place update autograd would replay with copies in the backward
    pass; nor while TorchScript traces (the graph would depend on whether gradients are recorded)."""
    in_place = projection.dtype == residual.dtype and projection.shape == residual.shape and not torch.jit.is_tracing()
    if in_place and not (projection.requires_grad and is_view_of_another_tensor(projection)):
        return projection.add_(residual)
    return projection + residual


def records_activation_twice(states: torch.Tensor, gradient_checkpointing: bool) -> bool:
    """Whether a forward on `states` records a backward pass in which a feed-forward block's activation would be
    stored twice (by the activation and by the output projection), so `project_recomputing_input` pays off. Not under
    gradient checkpointing (which stores neither), in compiled graphs (whose compiler plans what to store), while
    TorchScript traces (the traced graph would depend on whether gradients are recorded, which its trace check
    changes) or under `torch.func` transforms (whose tensors have no storage to recognize the activation by)."""
    if not (torch.is_grad_enabled() and states.requires_grad) or gradient_checkpointing:
        return False
    if traces_graph():
        return False
    try:
        states.untyped_storage()
    except (NotImplementedError, RuntimeError):  # a torch.func wrapper
        return False
    return True


def project_recomputing_input(projection: nn.Module, inputs: torch.Tensor, recompute: Callable[[], torch.Tensor]):
    """`projection(inputs)`, whose backward pass gets `inputs` from `recompute()` rather than from memory (a
    quarter of a layer's stored activations for the feed-forward output projection; see
    `input_recomputed_in_backward`)."""
    with input_recomputed_in_backward(inputs, recompute):
        return projection(inputs)


@contextmanager
def input_recomputed_in_backward(inputs: torch.Tensor, recompute: Callable[[], torch.Tensor]):
    """Within the block (one projection), autograd stores `inputs` (contiguous), or a view of all of them, as nothing
    and its backward pass gets them from `recompute()`; every other saved tensor is stored as usual (an outer
    `saved_tensors_hooks`, such as `save_on_cpu`, does not see the tensors saved inside the block)."""
    # The hooks live as long as the graph: they hold a description of `inputs`, not `inputs` (which they would keep)
    marker, storage, count = object(), inputs.untyped_storage().data_ptr(), inputs.numel()
    dtype, offset = inputs.dtype, inputs.storage_offset()

    def pack(tensor: torch.Tensor):
        if tensor.numel() == count and tensor.dtype == dtype and tensor.untyped_storage().data_ptr() == storage:
            return marker, tensor.shape, tensor.stride(), tensor.storage_offset() - offset
        return tensor

    def unpack(packed):
        if isinstance(packed, tuple) and packed[0] is marker:
            return recompute().as_strided(*packed[1:])
        return packed

    if not inputs.is_contiguous():
        yield
        return
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        yield
