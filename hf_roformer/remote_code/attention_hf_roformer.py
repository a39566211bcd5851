"""Attention variants of the layers: softmax self-attention with rotated queries and keys, linear attention (paper
eq. 19) and decoder-to-encoder cross-attention, all with the query/key/value projections under their checkpoint names.

Softmax attention runs through transformers' attention interface (eager, sdpa, flash, flex, or an engine's own);
where the configured backend cannot serve a batch, the model's forward picks, once, one of the functions registered
here in its place (`self_attention_implementation`: the variable-length kernel over a packed row, blockwise attention
for attention dropout on CPU, SDPA with the mask as given in recorded graphs, per-query rotation).

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from collections.abc import Callable

import torch
from torch import nn
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface

from .blockwise_attention_hf_roformer import blockwise_attention_applies, blockwise_attention_forward
from .config_rules_hf_roformer import rope_attention_factor
from .configuration_hf_roformer import HfRoFormerConfig
from .input_checks_hf_roformer import traces_graph
from .joined_projection_hf_roformer import joined_projection
from .linear_attention_hf_roformer import (
    bidirectional_linear_attention,
    causal_linear_attention,
    linear_attention_features,
)
from .padding_free_hf_roformer import varlen_attention_forward
from .rotary_hf_roformer import PerQueryRotation, TokenRotation, in_halves, per_query_rotary_attention


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain softmax attention in PyTorch ops; the reference backend and the one that can return attention weights."""
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value).transpose(1, 2).contiguous()
    return attn_output, attn_weights


def masked_sdpa_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """SDPA with the mask as given and no causal flag: what transformers' `sdpa_attention_forward` computes for a module
    that is not causal or gets a mask, for recorded graphs. That function tests `query.shape[2] > 1` first, which fixes
    the sequence length of an exported graph to the example's side of 1 (and fails with a `SymBool` at length 1)."""
    output = nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=False
    )
    return output.transpose(1, 2).contiguous(), None


def per_query_rotary_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    *,
    query_rotations: PerQueryRotation,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention for length-dependent rope in a decoder whose queries' frequencies differ: each query rotates the
    unrotated (cached) keys with its own, which no attention backend does; `query_rotations.allowed` is the mask."""
    return per_query_rotary_attention(
        query,
        key,
        value,
        query_rotations,
        scaling,
        dropout=dropout,
        training=module.training,
        rotary_value=module.rotary_value,
    )


# The attention functions that run in the place of the configured backend where it cannot serve a batch, registered
# with transformers' attention interface under these names (`self_attention_implementation` picks one per forward).
VARLEN_SDPA = "hf_roformer_varlen_sdpa"  # SDPA's place on a packed row: `torch.nn.attention.varlen`
BLOCKWISE_SDPA = "hf_roformer_blockwise_sdpa"  # SDPA's place with attention dropout on CPU
MASKED_SDPA = "hf_roformer_masked_sdpa"  # SDPA's place in recorded graphs
PER_QUERY_ROTARY = "hf_roformer_per_query_rotary"  # any backend's place where each query rotates the keys itself
AttentionInterface.register(VARLEN_SDPA, varlen_attention_forward)
AttentionInterface.register(BLOCKWISE_SDPA, blockwise_attention_forward)
AttentionInterface.register(MASKED_SDPA, masked_sdpa_forward)
AttentionInterface.register(PER_QUERY_ROTARY, per_query_rotary_attention_forward)


def self_attention_implementation(
    config: HfRoFormerConfig,
    hidden_states: torch.Tensor,
    attention_mask: torch.Tensor | None,
    position_embeddings: TokenRotation | PerQueryRotation,
    attention_kwargs: dict,
    dropout: float,
) -> str:
    """The attention function self-attention runs in this forward, chosen once for every layer: the config's backend,
    or what serves the batch in its place.

    Any backend: `PER_QUERY_ROTARY` where the queries of a length-dependent rope type's decoder do not share one
    frequency set. Under `sdpa`: `VARLEN_SDPA` over a packed row with a variable-length kernel's boundaries;
    `BLOCKWISE_SDPA` for attention dropout on CPU, which would send SDPA to its math path (batch x heads x L x L
    probabilities and dropout mask kept per layer); `MASKED_SDPA` in recorded graphs that need a mask (transformers'
    `sdpa_attention_forward` tests the query length, which fixes an exported length to the example's side of 1)."""
    if isinstance(position_embeddings, PerQueryRotation) and not position_embeddings.shared_by_queries:
        return PER_QUERY_ROTARY
    implementation = config._attn_implementation
    if implementation != "sdpa":
        return implementation
    if "cu_seq_lens_q" in attention_kwargs:
        return VARLEN_SDPA
    if blockwise_attention_applies(hidden_states, dropout):
        return BLOCKWISE_SDPA
    causal = config.is_decoder and not config.unilm
    if traces_graph() and (attention_mask is not None or not causal):
        return MASKED_SDPA
    return implementation


def self_attention_cache(cache: Cache | None) -> Cache | None:
    """The cache self-attention writes to (the self-attention half of an encoder-decoder cache)."""
    if isinstance(cache, EncoderDecoderCache):
        return cache.self_attention_cache
    return cache


class HfRoFormerAttentionBase(nn.Module):
    """Query, key and value projections under their checkpoint names, shared by the self-, linear- and cross-attention
    modules.

    Modules that run softmax attention call the configured backend from their own `forward`, through transformers'
    attention interface, with `scaling=self.scaling`, once: serving engines that plug their attention into
    transformers models (vLLM's Transformers backend) find the modules to serve that way, by `layer_idx`. Heads are
    split with `-1`, so a tensor-parallel rank holding some of the heads runs the same code.
    """

    def __init__(self, config: HfRoFormerConfig, layer_idx: int | None, is_causal: bool):
        super().__init__()
        self.config = config
        self.head_dim = config.head_dim
        self.scaling = self.head_dim**-0.5
        self.query = nn.Linear(config.hidden_size, config.hidden_size, bias=config.use_bias)
        self.key = nn.Linear(config.hidden_size, config.hidden_size, bias=config.use_bias)
        self.value = nn.Linear(config.hidden_size, config.hidden_size, bias=config.use_bias)
        self.dropout_prob = config.attention_probs_dropout_prob
        # Explicit: SDPA treats a module without `is_causal` as causal whenever the mask is None.
        self.is_causal = is_causal
        self.layer_idx = layer_idx

    def project_query_key_value(
        self, hidden_states: torch.Tensor, query_key_in_halves: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The query, key and value projections of `(batch, seq, hidden)` states, each `(batch, seq, hidden)`: each
        module called, as LoRA adapters, quantized or tensor-parallel layers and offloading hooks expect; one product
        of weights joined beforehand where `fuse_qkv_projections()` asked for it and it gives the same
        (`joined_projection_hf_roformer`). (Joining the weights anew in every forward gained nothing:
        benchmarks/bench_fused_projection.py.)

        `query_key_in_halves` (a TorchScript trace: `TokenRotation.rotates_in_halves`): query and key with each
        head's features reordered (`in_halves`), projected by their reordered weights where they are plain
        `nn.Linear` layers (OpenVINO folds the reordered weights into constants: no work at run time), else
        reordered after their own modules."""
        if query_key_in_halves:
            query, key = (self.project_in_halves(projection, hidden_states) for projection in (self.query, self.key))
            return query, key, self.value(hidden_states)
        joined = joined_projection(self, hidden_states)
        if joined is not None:
            return joined
        return self.query(hidden_states), self.key(hidden_states), self.value(hidden_states)

    def project_in_halves(self, projection: nn.Module, states: torch.Tensor) -> torch.Tensor:
        """`projection(states)` with each head's features reordered (`in_halves`)."""
        if type(projection) is not nn.Linear:
            return in_halves(projection(states), self.head_dim, dim=-1)
        bias = None if projection.bias is None else in_halves(projection.bias, self.head_dim, dim=0)
        return nn.functional.linear(states, in_halves(projection.weight, self.head_dim, dim=0), bias)

    def split_heads(self, projection: nn.Linear, states: torch.Tensor) -> torch.Tensor:
        """Project `(batch, seq, hidden)` states and split them into heads: `(batch, heads, seq, head_dim)`."""
        return projection(states).view(*states.shape[:-1], -1, self.head_dim).transpose(1, 2)

    @property
    def attention_dropout(self) -> float:
        """The dropout probability on attention weights in this mode (0 in evaluation)."""
        return self.dropout_prob if self.training else 0.0


class HfRoFormerSelfAttention(HfRoFormerAttentionBase):
    """Multi-head self-attention with queries and keys (and values, with `rotary_value`) rotated by their positions."""

    def __init__(self, config: HfRoFormerConfig, layer_idx: int | None = None):
        super().__init__(config, layer_idx, is_causal=config.is_decoder and not config.unilm)
        # A rope type's attention factor (YaRN's temperature) multiplies the logits q.k once, here; never the values.
        self.scaling *= rope_attention_factor(config) ** 2
        self.rotary_value = config.rotary_value

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_embeddings: TokenRotation | PerQueryRotation | None = None,
        cache: Cache | None = None,
        attention_implementation: str | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend over the sequence (and the cached keys/values of earlier steps); returns output and weights.

        `position_embeddings` are the forward's rotations; `attention_implementation` the attention function the
        model's forward chose for this batch (`self_attention_implementation`; default: the config's backend).
        `kwargs` reach the attention function unchanged (a variable-length kernel's `cu_seq_lens_q/k`, an engine's
        per-batch state)."""
        input_shape = hidden_states.shape[:-1]
        cache = self_attention_cache(cache)
        halves = position_embeddings.rotates_in_halves(self.rotary_value, keys_cached=cache is not None)
        query, key, value = self.project_query_key_value(hidden_states, query_key_in_halves=halves)
        if position_embeddings.keys_cached_rotated:  # RoPE as the paper: rotate, then cache
            query, key, value = position_embeddings.rotate_heads(
                self.head_dim, query, key, value, self.rotary_value, projected_in_halves=halves
            )
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx)
        else:  # length-dependent rope in a decoder: keys cached unrotated, rotated with the queries' frequencies
            heads = (*input_shape, -1, self.head_dim)
            query, key, value = (states.view(heads).transpose(1, 2) for states in (query, key, value))
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx)
            query, key, value = position_embeddings.rotate_with_query_frequencies(query, key, value, self.rotary_value)
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            attention_implementation or self.config._attn_implementation, eager_attention_forward
        )
        output, weights = attention_interface(
            self, query, key, value, attention_mask, dropout=self.attention_dropout, scaling=self.scaling, **kwargs
        )
        return output.reshape(*input_shape, -1).contiguous(), weights


class HfRoFormerLinearSelfAttention(HfRoFormerAttentionBase):
    """RoPE with linear attention (paper eq. 19): O(N) in the sequence length, same parameters as softmax attention.

    Encoders use the associative form over the whole sequence; decoders use chunked prefix sums and, with a cache, a
    constant-size recurrent state per layer. Attention weights are never materialized (`output_attentions` gives
    none, and `attention_probs_dropout_prob` has no probabilities to drop), and a rope type's attention factor has no
    softmax to act on, so it is not applied.
    """

    def __init__(self, config: HfRoFormerConfig, layer_idx: int | None = None):
        super().__init__(config, layer_idx, is_causal=config.is_decoder)
        self.rotary_value = config.rotary_value

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_embeddings: TokenRotation | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        """Attend with eq. 19; `attention_mask` is the 2D padding mask of the current tokens (1 = real)."""
        heads = (*hidden_states.shape[:-1], -1, self.head_dim)
        projections = self.project_query_key_value(hidden_states)
        query, key, value = (states.view(heads).transpose(1, 2) for states in projections)
        rotation = position_embeddings
        if self.rotary_value:
            (value,) = rotation.rotate(value)
        features = linear_attention_features(
            query,
            key,
            lambda x: rotation.rotate(x)[0],
            self.config.linear_feature_map,
            self.config.linear_rotation_order,
            attention_mask,
        )
        eps = self.config.linear_attention_eps
        if not self.is_causal:
            output = bidirectional_linear_attention(features, value, eps)
        else:
            cache = self_attention_cache(cache)
            state = cache.get_state(self.layer_idx) if cache is not None else None
            output, state = causal_linear_attention(features, value, eps, self.config.linear_chunk_size, state)
            if cache is not None:
                cache.set_state(self.layer_idx, state)
        output = output.to(hidden_states.dtype)
        return output.transpose(1, 2).reshape(*hidden_states.shape[:-1], -1).contiguous(), None


class HfRoFormerCrossAttention(HfRoFormerAttentionBase):
    """Decoder-to-encoder attention. No rotation: queries and keys live in different sequences, as in the original."""

    def __init__(self, config: HfRoFormerConfig, layer_idx: int | None = None):
        super().__init__(config, layer_idx, is_causal=False)

    def forward(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from the decoder states to the encoder states (`attention_mask`: over the encoder's padding),
        projecting the latter once per generation."""
        query = self.split_heads(self.query, hidden_states)
        is_updated = cache is not None and cache.is_updated.get(self.layer_idx, False)
        if is_updated:
            layer_cache = cache.cross_attention_cache.layers[self.layer_idx]
            key, value = layer_cache.keys, layer_cache.values
        else:
            key = self.split_heads(self.key, encoder_hidden_states)
            value = self.split_heads(self.value, encoder_hidden_states)
            if cache is not None:
                key, value = cache.cross_attention_cache.update(key, value, self.layer_idx)
                cache.is_updated[self.layer_idx] = True
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.attention_dropout,
            scaling=self.scaling,
            **kwargs,
        )
        return attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous(), attn_weights
