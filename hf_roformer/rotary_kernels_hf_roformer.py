"""Fused RoPE kernel (Triton) for RoFormer's interleaved layout: queries, keys and values in one launch.

One program handles one token of one sequence for a block of heads: it loads the token's cos/sin once, rotates the
feature pairs (x[2i], x[2i+1]) of every head of every given tensor in float32, and writes the model dtype. Inputs may be
strided views (the transposed output of the projections) and are read in place; outputs keep their layout. Per-token
cos/sin make arbitrary positions (packed sequences, cache offsets) and scaled frequencies work unchanged. The backward
pass is the inverse rotation, i.e. the same kernel with -sin.

The op is registered with `torch.library.custom_op`, so autograd and `torch.compile(fullgraph=True)` see one opaque
operator. Hub-bound: Triton is optional (imported in a `try`), so remote-code users without it still load the model.
"""

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
        seq_len,
        num_heads,
        half_dim,
        stride_b,
        stride_h,
        stride_s,
        stride_d,
        out_stride_b,
        out_stride_h,
        out_stride_s,
        out_stride_d,
        angle_stride_b,
        angle_stride_s,
        sign,
        BLOCK_H: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        row = tl.program_id(0)
        head_block = tl.program_id(1)
        which = tl.program_id(2)  # 0: query, 1: key, 2: value
        batch = row // seq_len
        position = row % seq_len
        pair = tl.arange(0, BLOCK_D)
        heads = head_block * BLOCK_H + tl.arange(0, BLOCK_H)
        pair_mask = pair < half_dim
        mask = (heads < num_heads)[:, None] & pair_mask[None, :]

        angle_offset = batch * angle_stride_b + position * angle_stride_s + pair
        cos = tl.load(cos_ptr + angle_offset, mask=pair_mask, other=1.0)[None, :]
        sin = tl.load(sin_ptr + angle_offset, mask=pair_mask, other=0.0)[None, :] * sign

        source = q_ptr
        target = q_out_ptr
        if which == 1:
            source = k_ptr
            target = k_out_ptr
        if which == 2:
            source = v_ptr
            target = v_out_ptr
        offsets = batch * stride_b + position * stride_s + heads[:, None] * stride_h + (2 * pair)[None, :] * stride_d
        even = tl.load(source + offsets, mask=mask, other=0.0).to(tl.float32)
        odd = tl.load(source + offsets + stride_d, mask=mask, other=0.0).to(tl.float32)
        out_offsets = (
            batch * out_stride_b
            + position * out_stride_s
            + heads[:, None] * out_stride_h
            + (2 * pair)[None, :] * out_stride_d
        )
        tl.store(target + out_offsets, (even * cos - odd * sin).to(target.dtype.element_ty), mask=mask)
        tl.store(target + out_offsets + out_stride_d, (odd * cos + even * sin).to(target.dtype.element_ty), mask=mask)


def _launch(tensors: list[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor, sign: float) -> list[torch.Tensor]:
    """Rotate every tensor `(batch, heads, seq, d)` (same shape and strides) by cos/sin `(1 or batch, seq, d/2)`."""
    first = tensors[0]
    batch, heads, seq_len, dim = first.shape
    outputs = [torch.empty_like(tensor) for tensor in tensors]
    cos, sin = cos.float().contiguous(), sin.float().contiguous()
    angle_stride_b = 0 if cos.shape[0] == 1 else cos.stride(0)
    block_h = min(triton.next_power_of_2(heads), 16)
    grid = (batch * seq_len, triton.cdiv(heads, block_h), len(tensors))
    pointers = tensors + [tensors[0]] * (3 - len(tensors))
    out_pointers = outputs + [outputs[0]] * (3 - len(outputs))
    _rotate_interleaved_kernel[grid](
        *pointers,
        *out_pointers,
        cos,
        sin,
        seq_len,
        heads,
        dim // 2,
        *first.stride(),
        *outputs[0].stride(),
        angle_stride_b,
        cos.stride(1),
        sign,
        BLOCK_H=block_h,
        BLOCK_D=triton.next_power_of_2(dim // 2),
    )
    return outputs


def _register_op():
    """Define the custom op once per process (the package and a remote-code copy may both import this file)."""
    try:
        return torch.ops.hf_roformer.rotate_interleaved.default
    except (AttributeError, RuntimeError):
        pass

    @torch.library.custom_op(OP_NAME, mutates_args=())
    def rotate_interleaved(
        tensors: list[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor, sign: float
    ) -> list[torch.Tensor]:
        return _launch(list(tensors), cos, sin, sign)

    @rotate_interleaved.register_fake
    def _(tensors, cos, sin, sign):
        return [torch.empty_like(tensor) for tensor in tensors]

    def setup_context(ctx, inputs, output):
        _, cos, sin, sign = inputs
        ctx.save_for_backward(cos, sin)
        ctx.sign = sign

    def backward(ctx, grads):
        cos, sin = ctx.saved_tensors
        grads = [grad.contiguous() if grad.stride(-1) != 1 else grad for grad in grads]
        return rotate_interleaved(grads, cos, sin, -ctx.sign), None, None, None

    rotate_interleaved.register_autograd(backward, setup_context=setup_context)
    return rotate_interleaved


_OP = _register_op() if TRITON_AVAILABLE else None


def kernel_applies(query: torch.Tensor) -> bool:
    """Whether the fused kernel serves this call: Triton present, enabled, and CUDA tensors."""
    return TRITON_AVAILABLE and KERNEL_ENABLED and query.is_cuda


def rotate_with_kernel(tensors: list[torch.Tensor], cos: torch.Tensor, sin: torch.Tensor) -> list[torch.Tensor]:
    """Rotate queries, keys (and values) `(batch, heads, seq, d)` with one kernel launch; differentiable."""
    if not TRITON_AVAILABLE:
        raise RuntimeError("The fused RoPE kernel needs Triton: pip install triton")
    shape, strides = tensors[0].shape, tensors[0].stride()
    if any(tensor.shape != shape or tensor.stride() != strides for tensor in tensors[1:]):
        tensors = [tensor.contiguous() for tensor in tensors]
    if tensors[0].stride(-1) != 1:
        tensors = [tensor.contiguous() for tensor in tensors]
    return list(_OP(tensors, cos, sin, 1.0))


__all__ = ["KERNEL_ENABLED", "TRITON_AVAILABLE", "kernel_applies", "rotate_with_kernel"]
