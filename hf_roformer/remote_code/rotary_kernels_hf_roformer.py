"""Fused RoPE kernel (Triton) for RoFormer's interleaved layout: queries, keys and values in one launch.

One program handles a tile of tokens x heads x features of one tensor: it reads whole heads with contiguous loads,
splits them into the pairs (x[2i], x[2i+1]) in registers, rotates them in float32 and writes the model dtype with
contiguous stores. Inputs may be strided views (the transposed output of the projections) and are read in place.
Per-token cos/sin make arbitrary positions (packed sequences, cache offsets) and scaled frequencies work unchanged.
The backward pass is the inverse rotation, i.e. the same kernel with -sin.

Eager calls go through an `autograd.Function` (little per-call overhead); under `torch.compile` and `torch.export` the
kernel is a `torch.library.triton_op`: one operator to `fullgraph=True` and to exported programs, whose kernel Inductor
launches from its own generated code like the kernels it writes (as an opaque `custom_op` it was a Python call per
layer from the compiled code: on an H200 at 8 x 512 the compiled model ran at 0.63x compiled BERT's speed, 0.80x as a
`triton_op`; docs/speed.md). Hub-bound: Triton is optional (imported in a `try`), so remote-code users without it
still load the model.
"""

import functools
import os

import torch


try:
    import triton
    import triton.language as tl

    TRITON_AVAILABLE = True
except ImportError:  # CPU-only installs: the PyTorch path is used
    TRITON_AVAILABLE = False

# Set HF_ROFORMER_ROPE_KERNEL=0 to keep the PyTorch path on CUDA (for comparisons).
KERNEL_ENABLED = os.environ.get("HF_ROFORMER_ROPE_KERNEL", "1") != "0"
OP_NAME = "hf_roformer::rotate_interleaved"


if TRITON_AVAILABLE:

    @triton.jit
    def _rotate_interleaved_kernel(
        q_ptr,
        k_ptr,
        v_ptr,
        q_out_ptr,
        k_out_ptr,
        v_out_ptr,
        cos_ptr,
        sin_ptr,
        tokens,
        seq_len,
        num_heads,
        head_dim,
        stride_b,
        stride_s,
        stride_h,
        out_stride_b,
        out_stride_s,
        out_stride_h,
        angle_stride_b,
        angle_stride_s,
        sign,
        BLOCK_S: tl.constexpr,
        BLOCK_H: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        which = tl.program_id(2)  # 0: query, 1: key, 2: value
        token = (tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)).to(tl.int64)
        heads = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
        feature = tl.arange(0, BLOCK_D)
        pair = tl.arange(0, BLOCK_D // 2)
        batch = token // seq_len
        position = token % seq_len
        token_mask = token < tokens
        mask = token_mask[:, None, None] & (heads < num_heads)[None, :, None] & (feature < head_dim)[None, None, :]

        angle_rows = batch * angle_stride_b + position * angle_stride_s
        angle_mask = token_mask[:, None, None] & (2 * pair < head_dim)[None, None, :]
        angle_offsets = angle_rows[:, None, None] + pair[None, None, :]
        cos = tl.load(cos_ptr + angle_offsets, mask=angle_mask, other=1.0)
        sin = tl.load(sin_ptr + angle_offsets, mask=angle_mask, other=0.0) * sign

        source = q_ptr
        target = q_out_ptr
        if which == 1:
            source = k_ptr
            target = k_out_ptr
        if which == 2:
            source = v_ptr
            target = v_out_ptr
        rows = (batch * stride_b + position * stride_s)[:, None, None] + (heads * stride_h)[None, :, None]
        # Contiguous (vectorized) load of whole heads, then split into the pairs' even and odd features in registers.
        x = tl.load(source + rows + feature[None, None, :], mask=mask, other=0.0).to(tl.float32)
        even, odd = tl.split(tl.reshape(x, (BLOCK_S, BLOCK_H, BLOCK_D // 2, 2)))
        rotated = tl.join(even * cos - odd * sin, odd * cos + even * sin)
        rotated = tl.reshape(rotated, (BLOCK_S, BLOCK_H, BLOCK_D)).to(target.dtype.element_ty)
        out_rows = (batch * out_stride_b + position * out_stride_s)[:, None, None]
        out_rows = out_rows + (heads * out_stride_h)[None, :, None]
        tl.store(target + out_rows + feature[None, None, :], rotated, mask=mask)


def _launch_config(tokens, heads: int, dim: int, count: int) -> tuple[tuple, dict]:
    """Grid and tile of one launch (cached per shape in eager mode: every layer of a forward launches the same one).

    A tile is tokens x heads x features: whole heads (no masked lanes when the head count has a power-of-two factor),
    about 4,096 elements, so each program moves enough bytes to keep the memory system busy. `tokens` may be symbolic
    in a compiled graph with dynamic shapes."""
    block_d = triton.next_power_of_2(dim)
    block_h = min(heads & -heads, 16, max(1, 4096 // block_d))  # the largest power of two dividing `heads`
    block_s = max(1, 4096 // (block_h * block_d))
    grid = ((tokens + block_s - 1) // block_s, triton.cdiv(heads, block_h), count)
    return grid, {"BLOCK_S": block_s, "BLOCK_H": block_h, "BLOCK_D": block_d}


_cached_launch_config = functools.lru_cache(maxsize=256)(_launch_config)


def _kernel_layout(tensors) -> list[torch.Tensor]:
    """The tensors as the kernel reads them: one shared shape and strides with unit feature stride (copied only when
    they differ or the features are strided)."""
    first = tensors[0]
    if first.stride(-1) != 1 or any(t.shape != first.shape or t.stride() != first.stride() for t in tensors[1:]):
        return [tensor.contiguous() for tensor in tensors]
    return list(tensors)


def _launch(
    tensors: list[torch.Tensor],
    cos: torch.Tensor,
    sin: torch.Tensor,
    sign: float,
    in_place: bool = False,
    traced: bool = False,
) -> list[torch.Tensor]:
    """Rotate every tensor `(batch, heads, seq, d)` (same shape and strides, unit feature stride) by cos/sin
    `(1 or batch, seq, d/2)`; outputs are dense, in the inputs' order of dimensions, or the inputs themselves when
    `in_place` (each program reads its whole tile before writing it, and tiles do not overlap). `traced`: the body of
    the operator a graph records, which launches the kernel through `wrap_triton` and may see symbolic sizes."""
    first = tensors[0]
    batch, heads, seq_len, dim = first.shape
    outputs = tensors if in_place else [torch.empty_like(tensor) for tensor in tensors]
    if cos.dtype != torch.float32 or not cos.is_contiguous():
        cos, sin = cos.float().contiguous(), sin.float().contiguous()
    angle_stride_b = 0 if cos.shape[0] == 1 else cos.stride(0)
    tokens = batch * seq_len
    configure = _launch_config if traced else _cached_launch_config
    grid, blocks = configure(tokens, heads, dim, len(tensors))
    # The kernel takes three inputs and three outputs; unused slots (no values) are never read or written. A graph
    # gets empty tensors there rather than repeats: it copies every tensor a kernel may write separately, so a repeated
    # output would come back as an unwritten copy.
    spare = [first.new_empty(0), first.new_empty(0)] if traced else [first, outputs[0]]
    pointers = tensors + [spare[0]] * (3 - len(tensors))
    out_pointers = outputs + [spare[1]] * (3 - len(outputs))
    stride_b, stride_h, stride_s, _ = first.stride()
    out_stride_b, out_stride_h, out_stride_s, _ = outputs[0].stride()
    kernel = torch.library.wrap_triton(_rotate_interleaved_kernel) if traced else _rotate_interleaved_kernel
    kernel[grid](
        *pointers,
        *out_pointers,
        cos,
        sin,
        tokens,
        seq_len,
        heads,
        dim,
        stride_b,
        stride_s,
        stride_h,
        out_stride_b,
        out_stride_s,
        out_stride_h,
        angle_stride_b,
        cos.stride(1),
        sign,
        **blocks,
    )
    return outputs


class _RotateInterleaved(torch.autograd.Function):
    """The eager-mode entry: the same kernel as the operator, with far less per-call dispatch overhead (the operator
    is what `torch.compile` and `torch.export` see)."""

    @staticmethod
    def forward(ctx, cos, sin, *tensors):
        ctx.save_for_backward(cos, sin)
        return tuple(_launch(list(tensors), cos, sin, 1.0))

    @staticmethod
    def backward(ctx, *grads):
        cos, sin = ctx.saved_tensors
        return (None, None, *_launch(_kernel_layout(grads), cos, sin, -1.0))


def _register_op():
    """Define the operator once per process (the package and a remote-code copy may both import this file)."""
    try:
        return torch.ops.hf_roformer.rotate_interleaved.default
    except (AttributeError, RuntimeError):
        pass

    @torch.library.triton_op(OP_NAME, mutates_args=())
    def rotate_interleaved(
        tensors: list[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor, sign: float
    ) -> list[torch.Tensor]:
        return _launch(list(tensors), cos, sin, sign, traced=True)

    def setup_context(ctx, inputs, output):
        _, cos, sin, sign = inputs
        ctx.save_for_backward(cos, sin)
        ctx.sign = sign

    def backward(ctx, grads):
        cos, sin = ctx.saved_tensors
        return rotate_interleaved(_kernel_layout(grads), cos, sin, -ctx.sign), None, None, None

    rotate_interleaved.register_autograd(backward, setup_context=setup_context)
    return rotate_interleaved


_OP = _register_op() if TRITON_AVAILABLE else None


def rotate_with_kernel(
    tensors: list[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor, in_place: bool = False
) -> list[torch.Tensor]:
    """Rotate queries, keys (and values) `(batch, heads, seq, d)` with one kernel launch; differentiable.

    `in_place=True` lets inference overwrite the inputs (fresh projections nobody else reads) instead of allocating
    outputs; autograd and compiled graphs always get new tensors."""
    if not TRITON_AVAILABLE:
        raise RuntimeError("The fused RoPE kernel needs Triton: pip install triton")
    tensors = _kernel_layout(tensors)
    if torch.compiler.is_compiling():
        return list(_OP(tensors, cos, sin, 1.0))
    if torch.is_grad_enabled() and any(tensor.requires_grad for tensor in tensors):
        return list(_RotateInterleaved.apply(cos, sin, *tensors))
    return _launch(tensors, cos, sin, 1.0, in_place=in_place)


__all__ = ["KERNEL_ENABLED", "TRITON_AVAILABLE", "rotate_with_kernel"]
