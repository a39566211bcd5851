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

PADDING_FREE_MODES = ("auto", "always", "never")
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


def unpad_batch(attention_mask: torch.Tensor) -> UnpaddedBatch | None:
    """Index bookkeeping to pack the real tokens of a `(batch, seq)` padding mask (1 = real, 0 = padding, padding on
    either side or in between); None when there is no padding to remove."""
    real = attention_mask.bool()
    if bool(real.all()):
        return None
    lengths = real.sum(dim=-1, dtype=torch.int32)
    cu_seq_lens = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
    rows = torch.arange(real.shape[0], device=real.device).unsqueeze(1).expand_as(real)
    return UnpaddedBatch(
        indices=real.flatten().nonzero().squeeze(1),
        sequence_ids=rows[real].unsqueeze(0),
        cu_seq_lens=cu_seq_lens,
        max_length=int(lengths.max()),
        batch_size=real.shape[0],
        seq_length=real.shape[1],
    )


def packed_row_boundaries(position_ids: torch.Tensor) -> dict | None:
    """Variable-length kernel arguments for one row packing several sequences (positions restarting at 0, as
    `DataCollatorWithFlattening` makes them); None for anything else."""
    if position_ids.dim() != 2 or position_ids.shape[0] != 1 or position_ids.shape[1] < 2:
        return None
    starts = (position_ids[0] == 0).nonzero().squeeze(1)
    if starts.numel() < 2 or int(starts[0]) != 0:
        return None
    total = torch.tensor([position_ids.shape[1]], device=starts.device, dtype=starts.dtype)
    cu_seq_lens = torch.cat([starts, total]).to(torch.int32)
    max_length = int((cu_seq_lens[1:] - cu_seq_lens[:-1]).max())
    return {
        "cu_seq_lens_q": cu_seq_lens,
        "cu_seq_lens_k": cu_seq_lens,
        "max_length_q": max_length,
        "max_length_k": max_length,
    }


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
