"""The layout of a batch, which `HfRoFormerModel.forward` decides once from what the caller said (masks, sequence
boundaries, the cache, the config), never from data values such as positions: the pieces it is decided and built with.

A forward runs in one of these layouts:

- **rows**: rows of equal length; padding, causality, a UniLM pattern or a cache are expressed as an attention mask in
  the form the configured backend expects (`self_attention_mask`);
- **unpadded** (`config.padding_free`): the real tokens of a padded batch packed into one row after the embeddings,
  attended per sequence, and put back into rows after the last layer (`unpad_where_allowed`);
- **packed rows**: the caller already packed several sequences into one row and said where each starts, through the
  `cu_seq_lens_q/k` + `max_length_q/k` that `DataCollatorWithFlattening(return_flash_attn_kwargs=True)` adds, or the
  `seq_idx` of `DataCollatorWithFlattening(return_seq_idx=True)` (`packed_row_sequences`).

A packed row is attended within each sequence with a variable-length kernel where one runs (flash backends; SDPA on
CUDA in half precision), whose boundaries are the attention kwargs transformers names (`cu_seq_lens_q/k`,
`max_length_q/k`), and with a block-diagonal mask elsewhere (`packed_row_mask`). `position_ids` are rotation angles and
nothing else.

The default path (plain and padded batches, encoder and decoder) reads no device value on the host. Unpadding reads
one small tensor once per forward (the total and longest real lengths a variable-length kernel needs); `seq_idx` on a
variable-length kernel reads the sequence ids once.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import torch
from transformers.masking_utils import create_bidirectional_mask

from .config_rules_hf_roformer import is_length_dependent
from .input_checks_hf_roformer import traces_graph
from .padding_free_hf_roformer import UnpaddedBatch, unpad_batch
from .releases_hf_roformer import causal_mask


# `padding_free="auto"` unpads only where unpadding measured faster on an H200 (bf16, base size; `bench_speed_gpu.py`
# and `bench_peers_gpu.py`, benchmarks/results/speed_nvidia_h200.md and peers_nvidia_h200.md). Rows of at least
# 2,048 tokens unpad whatever their fill: 1.12-1.67x at 16 x 2,048 with 46-96% real tokens, 1.15-1.89x at 4 x 4,096
# with 56-99% (SDPA over a padded batch needs a mask, which keeps it off its flash kernel; `varlen_attn` runs flash).
AUTO_UNPAD_MIN_LENGTH = 2048
# Shorter rows unpad when the batch is large enough for the device, not the host, to bound the forward: 1.18x at
# 32 x 728 positions (64% real) and 1.23x at 64 x 474 (55%), but 0.94-0.98x at 16 rows of 256 to 1,024 (host-bound).
AUTO_UNPAD_MIN_POSITIONS = 20480
# ... and only where padding leaves something to save: at most this share of those positions real.
AUTO_UNPAD_MAX_REAL_FRACTION = 0.8
# Keyword arguments through which a caller declares packed rows (transformers' names).
PACKED_ROW_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")


def split_packed_row_boundaries(kwargs: dict) -> tuple[dict, dict]:
    """The forward's extra keyword arguments as (the packed-row boundaries the caller declared, everything else).

    The caller's dictionary is read, never modified, so that what a serving engine or a trainer passes reaches every
    attention call as it was given."""
    boundaries = {key: value for key, value in kwargs.items() if key in PACKED_ROW_KEYS}
    others = {key: value for key, value in kwargs.items() if key not in PACKED_ROW_KEYS}
    return boundaries, others


def rotates_keys_per_query(config) -> bool:
    """Decoders with a length-dependent rope type rotate keys per query (`PerQueryRotation`): no packing of their own
    and no variable-length kernel."""
    return config.is_decoder and is_length_dependent(config)


def unpad_where_allowed(
    config,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    cache,
    encoder_hidden_states: torch.Tensor | None,
    read_positions: tuple[int, ...] | str | None,
    attention_kwargs: dict,
    varlen_kernel_runs: bool,
) -> UnpaddedBatch | None:
    """How to pack this padded batch's real tokens into one row, or None where `config.padding_free` keeps the rows.

    Never with a cache, cross-attention, a UniLM mask, linear attention, per-query rotation, requested per-layer
    outputs, a mask other than the 2D padding mask of the current tokens, nor while a graph is recorded (the token
    count is data-dependent; `traces_graph`). "auto" unpads only where a variable-length kernel runs and pays at this
    batch size (`AUTO_UNPAD_MIN_LENGTH`, `AUTO_UNPAD_MIN_POSITIONS`), and, for rows shorter than
    `AUTO_UNPAD_MIN_LENGTH`, where at most `AUTO_UNPAD_MAX_REAL_FRACTION` of the positions are real.
    """
    mask = attention_mask
    if config.padding_free == "never" or mask is None or mask.dim() != 2:
        return None
    if (
        traces_graph()
        or cache is not None
        or encoder_hidden_states is not None
        or config.unilm
        or config.attention_type == "linear"
        or rotates_keys_per_query(config)
        or mask.shape[1] != hidden_states.shape[1]
    ):
        return None
    for name in ("attentions", "hidden_states"):
        if attention_kwargs.get(f"output_{name}", getattr(config, f"output_{name}", False)):
            return None
    rows, width = hidden_states.shape[:2]
    long_rows = width >= AUTO_UNPAD_MIN_LENGTH
    if config.padding_free == "always":
        return unpad_batch(mask, read_positions)
    if not (long_rows or rows * width >= AUTO_UNPAD_MIN_POSITIONS) or not varlen_kernel_runs:
        return None
    return unpad_batch(mask, read_positions, None if long_rows else AUTO_UNPAD_MAX_REAL_FRACTION)


def packed_row_sequences(
    boundaries: dict, hidden_states: torch.Tensor, varlen_kernel_runs: bool
) -> tuple[torch.Tensor, dict]:
    """The sequence of every token of a row the caller packed, `(1, tokens)`, and the variable-length kernel's
    arguments where one runs here (else `{}`), from `cu_seq_lens_q/k` (+ `max_length_q/k`) or `seq_idx`."""
    tokens, device = hidden_states.shape[1], hidden_states.device
    if "cu_seq_lens_q" in boundaries:
        cu_seq_lens = boundaries["cu_seq_lens_q"].to(device=device, dtype=torch.int32)
        max_length = boundaries.get("max_length_q")
        token_index = torch.arange(tokens, device=device, dtype=torch.int32)
        sequence_ids = torch.searchsorted(cu_seq_lens[1:], token_index, right=True).long()[None]
    else:
        sequence_ids = boundaries["seq_idx"].to(device).reshape(1, tokens).long()
        cu_seq_lens = max_length = None
        if varlen_kernel_runs:  # the one host read: a variable-length kernel needs the boundaries
            cu_seq_lens, max_length = _boundaries_from_sequence_ids(sequence_ids[0])
    if not varlen_kernel_runs:
        return sequence_ids, {}
    if max_length is None:
        max_length = int((cu_seq_lens[1:] - cu_seq_lens[:-1]).max())
    kwargs = {"cu_seq_lens_q": cu_seq_lens, "cu_seq_lens_k": cu_seq_lens}
    return sequence_ids, {**kwargs, "max_length_q": max_length, "max_length_k": max_length}


def check_packed_rows(
    config,
    hidden_states: torch.Tensor,
    boundaries: dict,
    *,
    attention_mask: torch.Tensor | None,
    cache,
    encoder_hidden_states: torch.Tensor | None,
    read_positions: tuple[int, ...] | str | None,
) -> None:
    """Refuse packed rows where they cannot mean what the caller wants, naming what to pass instead."""
    given = next(iter(boundaries))
    if hidden_states.shape[0] != 1:
        raise ValueError(
            f"Packed rows (`{given}`) come as one row of consecutive sequences, got a batch of "
            f"{hidden_states.shape[0]} rows; use DataCollatorWithFlattening, or pad the batch instead."
        )
    if ("cu_seq_lens_q" in boundaries) != ("cu_seq_lens_k" in boundaries):
        raise ValueError("Pass `cu_seq_lens_q` and `cu_seq_lens_k` together (self-attention: equal tensors).")
    conflicts = {
        "an attention_mask": attention_mask is not None,
        "a key/value cache": cache is not None,
        "encoder_hidden_states": encoder_hidden_states is not None,
        "a UniLM mask (config.unilm)": config.unilm,
        "linear attention": config.attention_type == "linear",
        "a head that reads one vector per row": read_positions not in (None, "all"),
    }
    for what, present in conflicts.items():
        if present:
            raise ValueError(
                f"Packed rows (`{given}`) cannot be combined with {what}; pass padded rows with an attention_mask "
                "instead."
            )


def _boundaries_from_sequence_ids(sequence_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """`cu_seq_lens` and the longest length from per-token sequence ids (consecutive runs), with one host read."""
    _, counts = torch.unique_consecutive(sequence_ids.cpu(), return_counts=True)
    cu_seq_lens = torch.nn.functional.pad(counts.cumsum(0), (1, 0)).to(torch.int32)
    return cu_seq_lens.to(sequence_ids.device), int(counts.max())


def packed_row_mask(config, hidden_states: torch.Tensor, sequence_ids: torch.Tensor):
    """The mask of one packed row `(1, tokens, hidden)`: each token attends inside its own sequence (causally in
    decoders), in the backend's form."""

    def same_sequence(batch_idx, head_idx, q_idx, kv_idx):
        return sequence_ids[batch_idx, q_idx] == sequence_ids[batch_idx, kv_idx]

    if config.is_decoder:
        return causal_mask(config, hidden_states, None, None, position_ids=None, and_mask_function=same_sequence)
    return create_bidirectional_mask(
        config=config, inputs_embeds=hidden_states, attention_mask=None, and_mask_function=same_sequence
    )


def unilm_mask_function(token_type_ids: torch.Tensor):
    """UniLM's sequence-to-sequence mask (RoFormer-Sim): with idx = cumsum(token_type_ids), position i may attend to
    j iff idx[j] <= idx[i]; the source (segment 0) sees itself, the target (segment 1) the source and its past."""
    segment_index = token_type_ids.cumsum(dim=-1)

    def allowed(batch_idx, head_idx, q_idx, kv_idx):
        return segment_index[batch_idx, kv_idx] <= segment_index[batch_idx, q_idx]

    return allowed


def self_attention_mask(
    config,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None,
    cache,
    token_type_ids: torch.Tensor | None,
):
    """The self-attention mask of rows in the backend's form (None where none is needed).

    Linear attention takes the 2D padding mask of the current tokens. UniLM models get their sequence-to-sequence
    mask on a forward without cache; decoding steps after it append target tokens, which see everything before them.
    Positions are never passed to transformers' mask builders, which would take restarting positions for packing.
    """
    mask = attention_mask
    if config.attention_type == "linear":
        return None if mask is None else mask[:, -hidden_states.shape[1] :]
    if config.unilm:
        if config._attn_implementation.startswith("flash"):
            raise ValueError("`unilm=True` needs an attention backend that takes masks: eager, sdpa or flex.")
        if cache is None or cache.get_seq_length() == 0:
            if token_type_ids is None:
                token_type_ids = torch.zeros(hidden_states.shape[:2], dtype=torch.long, device=hidden_states.device)
            return create_bidirectional_mask(
                config=config,
                inputs_embeds=hidden_states,
                attention_mask=mask,
                and_mask_function=unilm_mask_function(token_type_ids),
                allow_is_bidirectional_skip=False,
            )
        return causal_mask(config, hidden_states, mask, cache, position_ids=None, allow_is_causal_skip=False)
    if config.is_decoder:
        return causal_mask(config, hidden_states, mask, cache, position_ids=None)
    return create_bidirectional_mask(config=config, inputs_embeds=hidden_states, attention_mask=mask)


def cross_attention_mask(
    config, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor, encoder_attention_mask: torch.Tensor
):
    """The cross-attention mask over the encoder's padding, in the backend's form (None without a padding mask)."""
    if encoder_attention_mask is None:
        return None
    return create_bidirectional_mask(
        config=config,
        inputs_embeds=hidden_states,
        attention_mask=encoder_attention_mask,
        encoder_hidden_states=encoder_hidden_states,
    )


__all__ = [
    "AUTO_UNPAD_MIN_LENGTH",
    "AUTO_UNPAD_MIN_POSITIONS",
    "check_packed_rows",
    "cross_attention_mask",
    "packed_row_mask",
    "packed_row_sequences",
    "self_attention_mask",
    "split_packed_row_boundaries",
    "unpad_where_allowed",
]
