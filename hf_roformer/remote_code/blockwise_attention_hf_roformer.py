"""Softmax attention with dropout in blocks of queries: training on CPU without batch x heads x L x L tensors.

SDPA's CPU flash kernel has no dropout, so with attention dropout in training every layer falls back to SDPA's math
path, which keeps the full probabilities and their dropout mask for the backward pass (at 32 x 1,024 tokens and 4
heads: 512 MB each, per layer). Here the queries go through in blocks that each see every key, so a block's softmax
is exact and nothing larger than a block is ever held: the forward pass keeps what FlashAttention keeps (queries,
keys, values and the output; FlashAttention's log-sum-exp serves rows split across key blocks, which do not occur
here), and the backward pass recomputes each block's probabilities from them.

The dropout mask of a block is drawn from a generator seeded with a number taken once per call from PyTorch's default
generator, plus the block's index, and drawn again in the backward pass. So `torch.manual_seed`, the Trainer's seeding,
resumed runs and gradient checkpointing (which restores the RNG state before recomputing a layer) all see the same
masks. Each element draws 16 random bits (a quarter of a 64-bit draw: the generator is serial, and its draws are the
largest cost after the matrix products); the dropout probability is thus rounded to a multiple of 2^-16 (at most
7.6e-6 away) and the kept probabilities are scaled by the exact inverse of the kept fraction, so expectations are
exact.

Written in plain PyTorch operators: no library this package may depend on has a CPU attention kernel with dropout
(SDPA's has none; flash-attn and xformers are CUDA-only).

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import math

import torch
from torch.autograd.function import once_differentiable

from .releases_hf_roformer import softmax_into


# Scores held per block (batch x heads x query block x keys): 32 MB in float32; two such buffers live in the forward
# pass, three in the backward pass. Fewer, larger blocks mean fewer operator calls, each a parallel region whose
# threads wait for one another (on a loaded machine, for the scheduler); the cost per score hardly changes between
# 4M and 16M scores per block.
BLOCK_SCORES = 1 << 23
# Seeds are drawn below this bound (`torch.Generator.manual_seed` takes 64-bit values).
SEED_BOUND = 1 << 62
# Values of one element's random draw (16 bits).
DRAW_VALUES = 1 << 16


def query_block_size(batch: int, heads: int, num_keys: int, block_scores: int = BLOCK_SCORES) -> int:
    """Queries per block so that a block's scores hold about `block_scores` numbers (at least one query)."""
    return max(1, block_scores // max(1, batch * heads * num_keys))


def dropped_draws(dropout: float) -> int:
    """How many of the 2^16 values of a 16-bit draw drop an element: `dropout` rounded to a multiple of 2^-16."""
    return min(round(dropout * DRAW_VALUES), DRAW_VALUES - 1)


def keep_scale(dropout: float) -> float:
    """The factor kept probabilities are scaled by: 1 / (the kept fraction of draws)."""
    return DRAW_VALUES / (DRAW_VALUES - dropped_draws(dropout))


def dropout_keep_mask(
    shape: tuple[int, ...], dropout: float, seed: int, block_index: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """The 0/1 keep mask (int16) of one block: a pure function of the seed, the block's index and the shape, so that
    the forward and the backward pass draw the same mask. `out`, a reused buffer, holds the draws (it needs 2 bytes
    per element)."""
    count = math.prod(shape)
    words = -(-count // 4)  # each 64-bit draw gives four 16-bit ones
    if out is None:
        draws = torch.empty(words, dtype=torch.int64)
    else:
        draws = out.view(-1).view(torch.uint8)[: 8 * words].view(torch.int64)
    generator = torch.Generator(device="cpu")
    generator.manual_seed((seed + block_index) % SEED_BOUND)
    draws.random_(-(1 << 63), None, generator=generator)  # every 64-bit value
    lanes = draws.view(torch.int16)[:count].view(shape)
    return lanes.ge_(dropped_draws(dropout) - DRAW_VALUES // 2)


class _Blocks:
    """What both passes share: queries (scaled), keys and values as `(batch * heads, L, head_dim)` in the compute
    dtype, the query blocks, and flat buffers of one block's scores reused by every block (a fresh large tensor per
    block would cost page faults each time)."""

    def __init__(self, query, key, value, attention_mask, is_causal, scaling, block_size, buffers: int):
        dtype = torch.promote_types(query.dtype, torch.float32)  # float32 at least; float64 stays float64
        self.batch, self.heads, self.num_queries, _ = query.shape
        self.num_keys = key.shape[2]
        self.dtype = dtype
        self.scaled_query = (query.to(dtype) * scaling).reshape(-1, self.num_queries, query.shape[-1])
        self.key = key.to(dtype).reshape(-1, self.num_keys, key.shape[-1])
        self.value = value.to(dtype).reshape(-1, self.num_keys, value.shape[-1])
        self.is_causal = is_causal
        self.block_size = block_size
        self.attention_mask = self.keyless_rows = None
        if attention_mask is not None:
            if attention_mask.shape[-2] > 1 and attention_mask.stride(-2) == 0:
                attention_mask = attention_mask[..., :1, :]  # a padding mask expanded over queries: one row serves all
            self.attention_mask = attention_mask
            allowed = attention_mask if attention_mask.dtype == torch.bool else attention_mask > float("-inf")
            keyless = allowed.any(dim=-1, keepdim=True).logical_not_()
            if bool(keyless.any()):  # rows that see no key: weights 0, as SDPA's math path gives them
                self.keyless_rows = keyless
        size = self.scaled_query.shape[0] * min(block_size, self.num_queries) * self.num_keys
        self.buffers = [torch.empty(size, dtype=dtype, device=query.device) for _ in range(buffers)]

    def ranges(self):
        """(index, start, stop) of every query block."""
        for index, start in enumerate(range(0, self.num_queries, self.block_size)):
            yield index, start, min(start + self.block_size, self.num_queries)

    def buffer(self, which: int, start: int, stop: int) -> torch.Tensor:
        """Buffer `which` as a dense `(batch * heads, stop - start, keys)` tensor."""
        size = self.scaled_query.shape[0] * (stop - start) * self.num_keys
        return self.buffers[which][:size].view(-1, stop - start, self.num_keys)

    def probabilities(self, start: int, stop: int) -> torch.Tensor:
        """Softmax of the masked scores of queries start:stop, in buffer 1 (the scores pass through buffer 0)."""
        scores = torch.bmm(self.scaled_query[:, start:stop], self.key.transpose(1, 2), out=self.buffer(0, start, stop))
        grid = scores.view(self.batch, self.heads, stop - start, self.num_keys)
        if self.attention_mask is not None:
            mask = self.attention_mask
            rows = mask if mask.shape[-2] == 1 else mask[..., start:stop, :]
            if rows.dtype == torch.bool:
                grid.masked_fill_(rows.logical_not(), float("-inf"))
            else:
                grid.add_(rows)
        if self.is_causal:  # SDPA's `is_causal`: query i sees keys 0..i (upper-left aligned)
            query_index = torch.arange(start, stop, device=scores.device)[:, None]
            key_index = torch.arange(self.num_keys, device=scores.device)[None, :]
            scores.masked_fill_(key_index > query_index, float("-inf"))
        probabilities = softmax_into(scores, out=self.buffer(1, start, stop))
        if self.keyless_rows is not None:
            keyless = self.keyless_rows
            keyless = keyless if keyless.shape[-2] == 1 else keyless[..., start:stop, :]
            probabilities.view_as(grid).masked_fill_(keyless, 0.0)
        return probabilities

    def keep_mask(self, dropout: float, seed: int, index: int, start: int, stop: int) -> torch.Tensor:
        """The block's dropout keep mask (0/1), drawn into buffer 0 (free once the probabilities are computed)."""
        keep = self.buffer(0, start, stop)
        return dropout_keep_mask(keep.shape, dropout, seed, index, out=keep)


class BlockwiseDropoutAttention(torch.autograd.Function):
    """softmax(q k^T * scaling + mask) with dropout, times v; memory O(block) beyond the inputs and the output.

    Forward: per query block, the scores, their softmax, the block's keep mask, the output rows. Backward: per query
    block, the same probabilities again (each block holds whole rows, so the softmax is recomputed exactly from the
    saved queries and keys; FlashAttention's log-sum-exp is only needed when rows are split), the same keep mask from
    the seed, and FlashAttention's gradient formulas (dS = P * (dP - rowsum(dO * O))).
    """

    @staticmethod
    def forward(query, key, value, attention_mask, scaling, dropout, is_causal, seed, block_size):
        with torch.no_grad(), torch.autocast("cpu", enabled=False):  # no_grad: torch.func runs forward with grad on
            blocks = _Blocks(query, key, value, attention_mask, is_causal, scaling, block_size, buffers=2)
            batch, heads, num_queries, _ = query.shape
            # (batch, queries, heads, head_dim) in memory: the layout the caller's `transpose(1, 2)` reads for free
            output = torch.empty(batch, num_queries, heads, value.shape[-1], dtype=blocks.dtype, device=query.device)
            output = output.transpose(1, 2)
            for index, start, stop in blocks.ranges():
                probabilities = blocks.probabilities(start, stop)
                probabilities.mul_(blocks.keep_mask(dropout, seed, index, start, stop))
                rows = torch.bmm(probabilities, blocks.value)
                output[:, :, start:stop] = rows.view(batch, heads, stop - start, -1)
            output.mul_(keep_scale(dropout))
        return output.to(query.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        # a separate step, so that torch.func transforms can differentiate through the function
        query, key, value, attention_mask, scaling, dropout, is_causal, seed, block_size = inputs
        ctx.save_for_backward(query, key, value, output)
        ctx.attention_mask = attention_mask
        ctx.settings = (scaling, dropout, is_causal, seed, block_size)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        query, key, value, output = ctx.saved_tensors
        scaling, dropout, is_causal, seed, block_size = ctx.settings
        with torch.autocast("cpu", enabled=False):
            blocks = _Blocks(query, key, value, ctx.attention_mask, is_causal, scaling, block_size, buffers=3)
            grad_output, output = grad_output.to(blocks.dtype), output.to(blocks.dtype)
            # rowsum(dO * O) = sum_j P_ij dP_ij, the softmax backward's correction, dropout included
            correction = (grad_output * output).sum(dim=-1, keepdim=True).reshape(-1, blocks.num_queries, 1)
            grad_output = (grad_output * keep_scale(dropout)).reshape(-1, blocks.num_queries, value.shape[-1])
            grad_query = torch.empty_like(blocks.scaled_query)
            grad_key = torch.zeros_like(blocks.key)
            grad_value = torch.zeros_like(blocks.value)
            for index, start, stop in blocks.ranges():
                probabilities = blocks.probabilities(start, stop)
                keep = blocks.keep_mask(dropout, seed, index, start, stop)
                dropped = torch.mul(probabilities, keep, out=blocks.buffer(2, start, stop))  # P * Z
                grad_rows = grad_output[:, start:stop]
                grad_value.baddbmm_(dropped.transpose(1, 2), grad_rows)
                # dS = P * (Z * dPd - D) = (P * Z) * dPd - P * D, with dPd = dO v^T (into buffer 0: the mask is spent)
                grad_scores = torch.bmm(grad_rows, blocks.value.transpose(1, 2), out=blocks.buffer(0, start, stop))
                grad_scores.mul_(dropped).addcmul_(probabilities, correction[:, start:stop], value=-1.0)
                torch.bmm(grad_scores, blocks.key, out=grad_query[:, start:stop])
                grad_key.baddbmm_(grad_scores.transpose(1, 2), blocks.scaled_query[:, start:stop])
            grad_query.mul_(scaling)
        return (
            grad_query.view(query.shape).to(query.dtype),
            grad_key.view(key.shape).to(key.dtype),
            grad_value.view(value.shape).to(value.dtype),
            None, None, None, None, None, None,
        )  # fmt: skip


def blockwise_dropout_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float,
    is_causal: bool = False,
    seed: int | None = None,
    block_size: int | None = None,
) -> torch.Tensor:
    """Attention `(batch, heads, queries, head_dim)` of `(batch, heads, L, head_dim)` inputs with dropout on the
    probabilities, as `scaled_dot_product_attention(..., dropout_p=dropout)` computes it.

    `attention_mask` is SDPA's: boolean (True = attend) or additive, broadcastable to `(batch, heads, queries,
    keys)`; `is_causal` masks keys after each query (upper-left aligned, as SDPA). `seed` fixes the dropout masks
    (default: drawn from PyTorch's default generator); `block_size` is the number of queries per block (default:
    about `BLOCK_SCORES` scores per block).
    """
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must lie in [0, 1), got {dropout}.")
    if not query.shape[:2] == key.shape[:2] == value.shape[:2] or key.shape[2] != value.shape[2]:
        raise ValueError(
            f"`query`, `key` and `value` must share batch and heads, and keys and values their length, got shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}."
        )
    if seed is None:
        seed = int(torch.randint(SEED_BOUND, (), dtype=torch.int64))
    if block_size is None:
        block_size = query_block_size(query.shape[0], query.shape[1], key.shape[2])
    return BlockwiseDropoutAttention.apply(
        query, key, value, attention_mask, scaling, dropout, is_causal, seed, block_size
    )


def blockwise_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """SDPA's place when it would take its math path for dropout on CPU, in the attention interface's calling
    convention (causal as transformers' SDPA decides it); returns `(batch, queries, heads, head_dim)` and no weights."""
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = query.shape[2] > 1 and attention_mask is None and is_causal
    if is_causal and key.shape[2] > query.shape[2]:  # as transformers' SDPA: upper-left causality over the first keys
        key, value = key[:, :, : query.shape[2]], value[:, :, : query.shape[2]]
    output = blockwise_dropout_attention(query, key, value, attention_mask, scaling, dropout, is_causal)
    return output.transpose(1, 2), None


__all__ = [
    "BlockwiseDropoutAttention",
    "blockwise_attention_forward",
    "blockwise_dropout_attention",
    "dropout_keep_mask",
    "keep_scale",
]
