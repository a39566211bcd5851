"""The batch plan: how one forward lays out its batch, decided once, at the top of the forward, from what the caller
said (masks, sequence boundaries, the cache, the config), never from data values such as positions.

A forward runs in one of these layouts:

- **padded**: rows of equal length; padding, causality, a UniLM pattern or a cache are expressed as an attention mask
  in the form the configured backend expects;
- **unpadded** (`config.padding_free`): the real tokens of a padded batch packed into one row after the embeddings,
  attended per sequence, and put back into rows after the last layer;
- **packed rows**: the caller already packed several sequences into one row and said where each starts, through the
  `cu_seq_lens_q/k` + `max_length_q/k` that `DataCollatorWithFlattening(return_flash_attn_kwargs=True)` adds, or the
  `seq_idx` of `DataCollatorWithFlattening(return_seq_idx=True)`.

Packed layouts attend within each sequence with a variable-length kernel where one runs (flash backends; SDPA on CUDA
in half precision) and with a block-diagonal mask elsewhere. `position_ids` are rotation angles and nothing else.

The default path (plain and padded batches, encoder and decoder) reads no device value on the host. Unpadding reads
one small tensor once per forward (the total and longest real lengths a variable-length kernel needs); `seq_idx` on a
variable-length kernel reads the sequence ids once.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from dataclasses import dataclass, field

import torch
from transformers.masking_utils import create_bidirectional_mask

from .input_checks_hf_roformer import traces_graph
from .padding_free_hf_roformer import UnpaddedBatch, unpad_batch, varlen_kernel_applies
from .releases_hf_roformer import causal_mask
from .rotary_hf_roformer import PerQueryRotation, TokenRotation


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


@dataclass
class BatchPlan:
    """What every layer and head of one forward reads about the batch layout.

    `attention_mask` is the self-attention mask in the configured backend's form (None where the backend needs none,
    e.g. a variable-length kernel, which reads the sequence boundaries in `attention_kwargs`); `rotation` the
    rotation of every token as the layers apply it; `unpadded` how a padded batch was packed into one row.
    `layer_kwargs` are the keyword arguments every layer receives and passes on to attention: the caller's, unchanged,
    less the packed-row boundaries that this plan has turned into `attention_mask` or `attention_kwargs`.
    """

    attention_mask: object
    rotation: TokenRotation | PerQueryRotation
    attention_kwargs: dict = field(default_factory=dict)
    unpadded: UnpaddedBatch | None = None
    encoder_attention_mask: object = None
    layer_kwargs: dict = field(default_factory=dict)

    def pack(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Hidden states in the layout the layers run in (the real tokens as one row when unpadded)."""
        return hidden_states if self.unpadded is None else self.unpadded.pack(hidden_states)

    def unpack(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Hidden states back in the caller's layout (rows, with zeros at padding, when unpadded)."""
        return hidden_states if self.unpadded is None else self.unpadded.unpack(hidden_states)


@dataclass
class ForwardInputs:
    """What one forward was given that decides its layout (the plan's inputs, gathered to pass them around once)."""

    config: object
    hidden_states: torch.Tensor  # the embeddings, (batch, seq, hidden)
    rotary_emb: object
    attention_mask: torch.Tensor | None
    position_ids: torch.Tensor
    token_type_ids: torch.Tensor | None
    cache: object
    past_length: int
    encoder_hidden_states: torch.Tensor | None
    encoder_attention_mask: torch.Tensor | None
    read_positions: tuple[int, ...] | str | None
    training: bool
    attention_kwargs: dict

    @property
    def per_query_rotation(self) -> bool:
        """Decoders with a length-dependent rope type rotate keys per query (`PerQueryRotation`)."""
        return self.rotary_emb.depends_on_length and self.config.is_decoder

    def varlen_kernel_runs(self) -> bool:
        """Whether the configured backend attends over a packed row with a variable-length kernel here."""
        dropout = self.config.attention_probs_dropout_prob if self.training else 0.0
        return varlen_kernel_applies(self.config._attn_implementation, self.hidden_states, dropout)


def plan_batch(
    config,
    hidden_states: torch.Tensor,
    rotary_emb,
    *,
    attention_mask: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
    cache=None,
    encoder_hidden_states: torch.Tensor | None = None,
    encoder_attention_mask: torch.Tensor | None = None,
    read_positions: tuple[int, ...] | str | None = None,
    training: bool = False,
    attention_kwargs: dict | None = None,
) -> BatchPlan:
    """Decide the layout of one forward and prepare what its layers read.

    `attention_kwargs` are the forward's extra keyword arguments. They are read, never modified: the plan's
    `layer_kwargs` are what the layers receive (all of them but the sequence-boundary keys of packed rows, which the
    plan turns into a mask or a variable-length kernel's arguments), so that what a serving engine or a trainer
    passes reaches every attention call as it was given. `read_positions` says which positions of the output the
    caller reads besides the real tokens (a tuple such as `(0,)` or `(-1,)`: those positions of every row, which may
    be padding; "all": every position), so that padding-free layouts are used only where they give the caller exactly
    the padded result.
    """
    attention_kwargs = {} if attention_kwargs is None else attention_kwargs
    past_length = cache.get_seq_length() if cache is not None else 0
    if position_ids is None:
        seq_length = hidden_states.shape[1]
        position_ids = torch.arange(past_length, past_length + seq_length, device=hidden_states.device)[None]
    inputs = ForwardInputs(
        config=config,
        hidden_states=hidden_states,
        rotary_emb=rotary_emb,
        attention_mask=attention_mask,
        position_ids=position_ids,
        token_type_ids=token_type_ids,
        cache=cache,
        past_length=past_length,
        encoder_hidden_states=encoder_hidden_states,
        encoder_attention_mask=encoder_attention_mask,
        read_positions=read_positions,
        training=training,
        attention_kwargs=attention_kwargs,
    )
    boundaries = {key: value for key, value in attention_kwargs.items() if key in PACKED_ROW_KEYS}
    layer_kwargs = {key: value for key, value in attention_kwargs.items() if key not in PACKED_ROW_KEYS}
    if boundaries:
        plan = _plan_packed_rows(inputs, boundaries)
    else:
        plan = _plan_padded(inputs)
    plan.layer_kwargs = layer_kwargs
    return plan


def _plan_padded(inputs: ForwardInputs) -> BatchPlan:
    """Rows of equal length, kept as they are or, where `config.padding_free` lets them, unpadded."""
    rotation = _padded_rotation(inputs)
    if isinstance(rotation, TokenRotation) and _may_unpad(inputs):
        long_rows = inputs.hidden_states.shape[1] >= AUTO_UNPAD_MIN_LENGTH
        auto_limit = AUTO_UNPAD_MAX_REAL_FRACTION if inputs.config.padding_free == "auto" and not long_rows else None
        unpadded = unpad_batch(inputs.attention_mask, inputs.read_positions, auto_limit)
        if unpadded is not None:
            return _plan_unpadded(inputs, unpadded, rotation)
    return BatchPlan(
        attention_mask=_padded_attention_mask(inputs),
        rotation=rotation,
        encoder_attention_mask=_encoder_attention_mask(inputs),
    )


def _padded_rotation(inputs: ForwardInputs) -> TokenRotation | PerQueryRotation:
    """The rotations of a padded batch: per token, or per query for length-dependent rope types in decoders (so cached
    decoding equals a full forward). Encoders give length-dependent types each row's number of real tokens."""
    mask, positions, rotary_emb = inputs.attention_mask, inputs.position_ids, inputs.rotary_emb
    padding_mask = mask if mask is not None and mask.dim() == 2 else None
    if not rotary_emb.depends_on_length:
        return TokenRotation(*rotary_emb(positions))
    if inputs.per_query_rotation:
        return rotary_emb.per_query(positions, inputs.past_length, padding_mask)
    if padding_mask is None:
        lengths = torch.full((1, 1), positions.shape[-1], device=positions.device)
    else:
        lengths = padding_mask[:, -positions.shape[-1] :].sum(dim=-1, keepdim=True)
    return TokenRotation(*rotary_emb(positions, lengths=lengths))


def _may_unpad(inputs: ForwardInputs) -> bool:
    """Whether `config.padding_free` lets this padded batch be unpadded: a 2D padding mask over the current tokens,
    no cache, cross-attention, UniLM mask, linear attention or per-layer outputs, not in a recorded graph (the token
    count is data-dependent; `traces_graph`), and for "auto" a variable-length kernel that pays at this batch size
    (`AUTO_UNPAD_MIN_LENGTH`, `AUTO_UNPAD_MIN_POSITIONS`)."""
    config, mask = inputs.config, inputs.attention_mask
    if config.padding_free == "never" or mask is None or mask.dim() != 2:
        return False
    if (
        traces_graph()
        or inputs.cache is not None
        or inputs.encoder_hidden_states is not None
        or config.unilm
        or config.attention_type == "linear"
        or mask.shape[1] != inputs.hidden_states.shape[1]
    ):
        return False
    for name in ("attentions", "hidden_states"):
        if inputs.attention_kwargs.get(f"output_{name}", getattr(config, f"output_{name}", False)):
            return False
    if config.padding_free == "always":
        return True
    rows, width = inputs.hidden_states.shape[:2]
    pays = width >= AUTO_UNPAD_MIN_LENGTH or rows * width >= AUTO_UNPAD_MIN_POSITIONS
    return pays and inputs.varlen_kernel_runs()


def _plan_unpadded(inputs: ForwardInputs, unpadded: UnpaddedBatch, rotation: TokenRotation) -> BatchPlan:
    """A padded batch as one row of its real tokens: boundaries for a variable-length kernel, else a mask keeping each
    token inside its sequence."""
    rotation = TokenRotation(unpadded.pack(rotation.cos), unpadded.pack(rotation.sin))
    if inputs.varlen_kernel_runs():
        return BatchPlan(None, rotation, unpadded.varlen_kwargs(), unpadded)
    mask = _same_sequence_mask(inputs, unpadded.indices.shape[0], unpadded.sequence_ids)
    return BatchPlan(mask, rotation, {}, unpadded)


def _plan_packed_rows(inputs: ForwardInputs, boundaries: dict) -> BatchPlan:
    """One row of consecutive sequences whose boundaries the caller gave (`cu_seq_lens_q/k` or `seq_idx`)."""
    _check_packed_rows(inputs, boundaries)
    tokens, device = inputs.hidden_states.shape[1], inputs.hidden_states.device
    varlen = inputs.varlen_kernel_runs() and not inputs.per_query_rotation
    if "cu_seq_lens_q" in boundaries:
        cu_seq_lens = boundaries["cu_seq_lens_q"].to(device=device, dtype=torch.int32)
        max_length = boundaries.get("max_length_q")
        token_index = torch.arange(tokens, device=device, dtype=torch.int32)
        sequence_ids = torch.searchsorted(cu_seq_lens[1:], token_index, right=True).long()[None]
    else:
        sequence_ids = boundaries["seq_idx"].to(device).reshape(1, tokens).long()
        cu_seq_lens = max_length = None
        if varlen:  # the one host read: a variable-length kernel needs the boundaries
            cu_seq_lens, max_length = _boundaries_from_sequence_ids(sequence_ids[0])
    rotation = _packed_rotation(inputs, sequence_ids)
    if not varlen:
        return BatchPlan(_same_sequence_mask(inputs, tokens, sequence_ids), rotation)
    if max_length is None:
        max_length = int((cu_seq_lens[1:] - cu_seq_lens[:-1]).max())
    kwargs = {"cu_seq_lens_q": cu_seq_lens, "cu_seq_lens_k": cu_seq_lens}
    return BatchPlan(None, rotation, {**kwargs, "max_length_q": max_length, "max_length_k": max_length})


def _packed_rotation(inputs: ForwardInputs, sequence_ids: torch.Tensor) -> TokenRotation | PerQueryRotation:
    """Rotations of a packed row: the caller's positions; length-dependent types see each sequence's own length
    (decoders: the prefix each query sees, keys restricted to its own sequence)."""
    positions, rotary_emb = inputs.position_ids.expand(1, sequence_ids.shape[1]), inputs.rotary_emb
    if not rotary_emb.depends_on_length:
        return TokenRotation(*rotary_emb(positions))
    if inputs.per_query_rotation:
        same_sequence = sequence_ids[0, :, None] == sequence_ids[0, None, :]
        return rotary_emb.per_query(positions, 0, None, allowed_keys=same_sequence[None])
    ones = torch.ones_like(sequence_ids[0])
    counts = torch.zeros_like(sequence_ids[0]).index_add_(0, sequence_ids[0], ones)
    return TokenRotation(*rotary_emb(positions, lengths=counts[sequence_ids]))


def _check_packed_rows(inputs: ForwardInputs, boundaries: dict) -> None:
    """Refuse packed rows where they cannot mean what the caller wants, naming what to pass instead."""
    given = next(iter(boundaries))
    if inputs.hidden_states.shape[0] != 1:
        raise ValueError(
            f"Packed rows (`{given}`) come as one row of consecutive sequences, got a batch of "
            f"{inputs.hidden_states.shape[0]} rows; use DataCollatorWithFlattening, or pad the batch instead."
        )
    if ("cu_seq_lens_q" in boundaries) != ("cu_seq_lens_k" in boundaries):
        raise ValueError("Pass `cu_seq_lens_q` and `cu_seq_lens_k` together (self-attention: equal tensors).")
    conflicts = {
        "an attention_mask": inputs.attention_mask is not None,
        "a key/value cache": inputs.cache is not None,
        "encoder_hidden_states": inputs.encoder_hidden_states is not None,
        "a UniLM mask (config.unilm)": inputs.config.unilm,
        "linear attention": inputs.config.attention_type == "linear",
        "a head that reads one vector per row": inputs.read_positions not in (None, "all"),
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


def _same_sequence_mask(inputs: ForwardInputs, tokens: int, sequence_ids: torch.Tensor):
    """The mask of one packed row of `tokens` tokens: each attends inside its own sequence (causally in decoders).

    transformers' mask builders read only the batch size, length, dtype and device of `inputs_embeds`, so an empty
    `(1, tokens, 0)` tensor stands for the packed row, which does not exist yet when the plan is made.
    """

    def same_sequence(batch_idx, head_idx, q_idx, kv_idx):
        return sequence_ids[batch_idx, q_idx] == sequence_ids[batch_idx, kv_idx]

    row = inputs.hidden_states.new_empty(1, tokens, 0)
    if inputs.config.is_decoder:
        return causal_mask(inputs.config, row, None, None, position_ids=None, and_mask_function=same_sequence)
    return create_bidirectional_mask(
        config=inputs.config, inputs_embeds=row, attention_mask=None, and_mask_function=same_sequence
    )


def unilm_mask_function(token_type_ids: torch.Tensor):
    """UniLM's sequence-to-sequence mask (RoFormer-Sim): with idx = cumsum(token_type_ids), position i may attend to
    j iff idx[j] <= idx[i]; the source (segment 0) sees itself, the target (segment 1) the source and its past."""
    segment_index = token_type_ids.cumsum(dim=-1)

    def allowed(batch_idx, head_idx, q_idx, kv_idx):
        return segment_index[batch_idx, kv_idx] <= segment_index[batch_idx, q_idx]

    return allowed


def _padded_attention_mask(inputs: ForwardInputs):
    """The self-attention mask of a padded batch in the backend's form (None where none is needed).

    Linear attention takes the 2D padding mask of the current tokens. UniLM models get their sequence-to-sequence
    mask on a forward without cache; decoding steps after it append target tokens, which see everything before them.
    Positions are never passed to transformers' mask builders, which would take restarting positions for packing.
    """
    config, states, mask, cache = inputs.config, inputs.hidden_states, inputs.attention_mask, inputs.cache
    if config.attention_type == "linear":
        return None if mask is None else mask[:, -states.shape[1] :]
    if config.unilm:
        if config._attn_implementation.startswith("flash"):
            raise ValueError("`unilm=True` needs an attention backend that takes masks: eager, sdpa or flex.")
        if inputs.past_length == 0:
            token_type_ids = inputs.token_type_ids
            if token_type_ids is None:
                token_type_ids = torch.zeros(states.shape[:2], dtype=torch.long, device=states.device)
            return create_bidirectional_mask(
                config=config,
                inputs_embeds=states,
                attention_mask=mask,
                and_mask_function=unilm_mask_function(token_type_ids),
                allow_is_bidirectional_skip=False,
            )
        return causal_mask(config, states, mask, cache, position_ids=None, allow_is_causal_skip=False)
    if config.is_decoder:
        return causal_mask(config, states, mask, cache, position_ids=None)
    return create_bidirectional_mask(config=config, inputs_embeds=states, attention_mask=mask)


def _encoder_attention_mask(inputs: ForwardInputs):
    """The cross-attention mask over the encoder's padding, in the backend's form."""
    if inputs.encoder_attention_mask is None:
        return None
    return create_bidirectional_mask(
        config=inputs.config,
        inputs_embeds=inputs.hidden_states,
        attention_mask=inputs.encoder_attention_mask,
        encoder_hidden_states=inputs.encoder_hidden_states,
    )


__all__ = ["AUTO_UNPAD_MIN_LENGTH", "AUTO_UNPAD_MIN_POSITIONS", "BatchPlan", "plan_batch"]
