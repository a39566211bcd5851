"""Padding-free attention for padded batches: unpad once after the embeddings, attend per sequence, repad at the end.

A padded batch spends attention work on padding, and under SDPA a padding mask rules out the flash kernel. Packing the
real tokens of every row into one row, with the cumulative sequence lengths, lets variable-length kernels attend within
each sequence and skip padding altogether: flash-attn's varlen kernel through transformers' flash backends, and
`torch.nn.attention.varlen.varlen_attn` (torch >= 2.10, CUDA) for SDPA. Backends without such a kernel (eager, flex,
SDPA on CPU) can run the packed row with a block-diagonal mask, which computes the same thing.

transformers' unpad/pad helpers are private to its flash-attention path, so the few lines of index bookkeeping live
here.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from typing import NamedTuple

import torch


try:
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # torch < 2.10 has no varlen attention; SDPA then keeps the padded path
    varlen_attn = None

VARLEN_DTYPES = (torch.float16, torch.bfloat16)


class UnpaddedBatch(NamedTuple):
    """Where the real tokens of a padded `(batch, seq)` batch went when packed into one `(1, tokens)` row."""

    indices: torch.Tensor  # (tokens,): index of each real token in the flattened batch * seq
    sequence_ids: torch.Tensor  # (1, tokens): the row each packed token came from
    cu_seq_lens: torch.Tensor  # (batch + 1,) int32: where each row's tokens start in the packed row
    max_length: int  # most real tokens in a row
    batch_size: int
    seq_length: int

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """`(batch or 1, seq, ...)` -> `(1, tokens, ...)`: the real tokens of every row, row after row."""
        tensor = tensor.expand(self.batch_size, self.seq_length, *tensor.shape[2:])
        return tensor.reshape(-1, *tensor.shape[2:]).index_select(0, self.indices).unsqueeze(0)

    def unpack(self, tensor: torch.Tensor) -> torch.Tensor:
        """`(1, tokens, ...)` -> `(batch, seq, ...)`, with zeros at the padding positions."""
        padded = tensor.new_zeros(self.batch_size * self.seq_length, *tensor.shape[2:])
        padded = padded.index_put((self.indices,), tensor[0])
        return padded.view(self.batch_size, self.seq_length, *tensor.shape[2:])

    def varlen_kwargs(self) -> dict:
        """The keyword arguments transformers' flash backends (and `varlen_attention_forward`) read to attend within
        each packed sequence."""
        return {
            "cu_seq_lens_q": self.cu_seq_lens,
            "cu_seq_lens_k": self.cu_seq_lens,
            "max_length_q": self.max_length,
            "max_length_k": self.max_length,
        }


def unpad_batch(
    attention_mask: torch.Tensor,
    read_positions: tuple[int, ...] | str | None = None,
    max_real_fraction: float | None = None,
) -> UnpaddedBatch | None:
    """Index bookkeeping to pack the real tokens of a `(batch, seq)` padding mask (1 = real, 0 = padding, on either
    side or in between), or None where packing cannot or should not happen: no padding; a caller that reads padding
    positions (`read_positions`: "all", or positions such as `(0,)` that are padding in some row); more real tokens
    than `max_real_fraction` of the batch.

    Reads one small tensor on the host (total and longest real length, and the read position's state): a
    variable-length kernel needs the longest length as a number, and the packed row's length is data-dependent.
    """
    if read_positions == "all":
        return None
    real = attention_mask.bool()
    batch, seq_length = real.shape
    lengths = real.sum(dim=-1)
    summary = [lengths.sum(), lengths.max()]
    if read_positions is not None:
        summary.append(real[:, list(read_positions)].all().long())
    total, longest, *read_is_real = torch.stack(summary).tolist()
    if total == batch * seq_length or not all(read_is_real):
        return None
    if max_real_fraction is not None and total > max_real_fraction * batch * seq_length:
        return None
    rows = torch.arange(batch, device=real.device)
    return UnpaddedBatch(
        indices=torch.nonzero_static(real.flatten(), size=total).squeeze(1),
        sequence_ids=torch.repeat_interleave(rows, lengths, output_size=total).unsqueeze(0),
        cu_seq_lens=torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0)),
        max_length=longest,
        batch_size=batch,
        seq_length=seq_length,
    )


def attention_dtype(hidden_states: torch.Tensor) -> torch.dtype:
    """The dtype attention will run in: the autocast dtype under CUDA autocast, else that of the hidden states."""
    if hidden_states.is_cuda and torch.is_autocast_enabled("cuda"):
        return torch.get_autocast_dtype("cuda")
    return hidden_states.dtype


def varlen_kernel_applies(attn_implementation: str, hidden_states: torch.Tensor, dropout: float) -> bool:
    """Whether the configured backend attends over a packed row with a variable-length kernel, so that unpadding
    pays: the flash backends, or SDPA where `varlen_attn` runs (CUDA, half precision, no attention dropout)."""
    if attn_implementation.startswith("flash_attention"):
        return True
    return (
        attn_implementation == "sdpa"
        and varlen_attn is not None
        and hidden_states.is_cuda
        and attention_dtype(hidden_states) in VARLEN_DTYPES
        and dropout == 0.0
    )


def varlen_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    *,
    cu_seq_lens_q: torch.Tensor,
    cu_seq_lens_k: torch.Tensor,
    max_length_q: int,
    max_length_k: int,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """SDPA's place on a packed `(1, heads, tokens, head_dim)` row: `varlen_attn` per sequence (causal when the module
    is), in the attention interface's calling convention; returns `(1, tokens, heads, head_dim)` and no weights."""
    if dropout:
        raise ValueError("varlen attention has no dropout; use padding_free='never' to train with attention dropout.")
    output = varlen_attn(
        query[0].transpose(0, 1),
        key[0].transpose(0, 1),
        value[0].transpose(0, 1),
        cu_seq_lens_q,
        cu_seq_lens_k,
        max_length_q,
        max_length_k,
        scale=scaling,
        window_size=(-1, 0) if module.is_causal else (-1, -1),
    )
    return output.unsqueeze(0), None
