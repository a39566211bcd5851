"""PyTorch RoFormer: a BERT-style transformer whose attention encodes positions by rotating queries and keys (RoPE).

One file in transformers' shape, read top to bottom: the attention functions, the layers (embeddings, attention,
feed-forward, pooler), the heads' modules, the models (the base model and the heads that the Auto classes and the
checkpoints' `auto_map` name), then what the model forward builds its batch layout with, the input checks and the
layers' memory-saving mechanics. The rotations come from `rotary_hf_roformer`, and differences between library
releases from `releases_hf_roformer`. Module and parameter names are those of transformers' `RoFormer*` classes, so
their checkpoints (and LoRA target names) load unchanged; the rotary angles are computed per forward from
`position_ids`, so there is no length limit.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from collections.abc import Callable
from contextlib import contextmanager
from typing import NamedTuple

import torch
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.loss.loss_utils import fixed_cross_entropy
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    CausalLMOutputWithCrossAttentions,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface, PreTrainedModel
from transformers.utils import ModelOutput, logging
from transformers.utils.generic import can_return_tuple, merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .blockwise_attention_hf_roformer import blockwise_attention_forward
from .config_rules_hf_roformer import is_length_dependent, rope_attention_factor
from .configuration_hf_roformer import HfRoFormerConfig
from .joined_projection_hf_roformer import JoinedProjectionsMixin, joined_projection
from .linear_attention_hf_roformer import (
    HfRoFormerLinearAttentionCache,
    bidirectional_linear_attention,
    causal_linear_attention,
    linear_attention_features,
)
from .releases_hf_roformer import (
    CACHE_FIELD,
    accepts_either_cache_name,
    assert_on_device,
    cache_output,
    causal_mask,
    is_view_of_another_tensor,
    output_cache,
    traces_graph,
)
from .rotary_hf_roformer import (
    HfRoFormerRotaryEmbedding,
    PerQueryRotation,
    TokenRotation,
    in_halves,
)
from .saving_hf_roformer import HfRoFormerSavingMixin
from .tensor_parallel_hf_roformer import CROSS_ATTENTION_TP_PLAN, WholeHeadsPerRankMixin


try:
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # torch < 2.10 has no varlen attention; SDPA then keeps the padded path
    varlen_attn = None

logger = logging.get_logger(__name__)

# Type hints of the inputs every forward takes.
TokenIds = torch.LongTensor | None
Floats = torch.Tensor | None


# --- Attention functions -------------------------------------------------------------------------------------------
# Softmax attention runs through transformers' attention interface (eager, sdpa, flash, flex, or an engine's own).
# Where the configured backend cannot serve a batch, the model forward picks, once, one of the functions registered
# here in its place (`self_attention_implementation`).


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


# Elements of the per-chunk rotated-key tensor (batch * heads * queries * keys * head_dim), about 64 MB in float32.
PER_QUERY_CHUNK_ELEMENTS = 1 << 24


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
    unrotated (cached) keys, and values with `rotary_value`, with its own frequencies, which no attention backend does;
    `query_rotations.allowed` is the mask. Exact for any mix of frequencies, in chunks of queries so memory stays
    bounded. Returns the output `(batch, seq, heads, d)` and the attention weights `(batch, heads, seq, keys)`."""
    batch, heads, seq_len, head_dim = query.shape
    chunk = max(1, PER_QUERY_CHUNK_ELEMENTS // max(1, batch * heads * key.shape[2] * head_dim))
    outputs, weights = [], []
    for start in range(0, seq_len, chunk):
        queries = slice(start, min(start + chunk, seq_len))
        rotated_query, rotated_keys, rotated_values = query_rotations.rotate_for_queries(
            queries, query, key, value if module.rotary_value else None
        )
        scores = torch.einsum("bhcd,bhctd->bhct", rotated_query.float(), rotated_keys.float()) * scaling
        scores = scores.masked_fill(~query_rotations.allowed[:, None, queries], torch.finfo(scores.dtype).min)
        probabilities = nn.functional.dropout(scores.softmax(dim=-1), p=dropout, training=module.training)
        if rotated_values is None:
            output = probabilities @ value.float()
        else:
            output = torch.einsum("bhct,bhctd->bhcd", probabilities, rotated_values.float())
        outputs.append(output.to(query.dtype))
        weights.append(probabilities.to(query.dtype))
    return torch.cat(outputs, dim=2).transpose(1, 2).contiguous(), torch.cat(weights, dim=2)


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
    if dropout > 0.0 and hidden_states.device.type == "cpu" and not torch.compiler.is_compiling():
        return BLOCKWISE_SDPA  # eager only: its per-block generators are host-side state a graph cannot replay
    causal = config.is_decoder and not config.unilm
    if traces_graph() and (attention_mask is not None or not causal):
        return MASKED_SDPA
    return implementation


def self_attention_cache(cache: Cache | None) -> Cache | None:
    """The cache self-attention writes to (the self-attention half of an encoder-decoder cache)."""
    if isinstance(cache, EncoderDecoderCache):
        return cache.self_attention_cache
    return cache


# --- Layers --------------------------------------------------------------------------------------------------------


class HfRoFormerRMSNorm(nn.Module):
    """RoFormer-V2's norm: x / sqrt(mean(x^2) + eps), without gain or bias (computed in float32)."""

    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Normalize the last dimension to unit root mean square."""
        states = hidden_states.float()
        return (states * torch.rsqrt(states.pow(2).mean(-1, keepdim=True) + self.eps)).to(hidden_states.dtype)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"


def make_norm(config: HfRoFormerConfig, size: int) -> nn.Module:
    """The post-norm of the architecture: layer norm (RoFormer) or parameter-free RMS norm (RoFormer-V2)."""
    if config.norm_type == "rms_norm":
        return HfRoFormerRMSNorm(config.layer_norm_eps)
    return nn.LayerNorm(size, eps=config.layer_norm_eps)


class HfRoFormerEmbeddings(nn.Module):
    """Token plus segment embeddings, then norm and dropout (`dropout_before_embeddings_norm`: dropout, then norm, as
    RoFormer-V2). Positions enter later, as rotations in attention."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.embedding_size)
        self.LayerNorm = make_norm(config, config.embedding_size)
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)
        self.dropout_before_norm = config.dropout_before_embeddings_norm

    def forward(
        self, input_ids: TokenIds = None, token_type_ids: TokenIds = None, inputs_embeds: Floats = None
    ) -> torch.Tensor:
        """Embed `input_ids` (or take `inputs_embeds`) and add the segment embeddings of `token_type_ids`."""
        if inputs_embeds is None:
            check_ids_in_range(input_ids, self.word_embeddings.num_embeddings, "input_ids", "vocab_size")
            inputs_embeds = self.word_embeddings(input_ids)
        else:
            check_embeds_dtype(inputs_embeds, self.word_embeddings.weight.dtype)
        if token_type_ids is None:
            token_type_ids = torch.zeros(inputs_embeds.shape[:-1], dtype=torch.long, device=inputs_embeds.device)
        else:
            check_ids_in_range(
                token_type_ids, self.token_type_embeddings.num_embeddings, "token_type_ids", "type_vocab_size"
            )
        embeddings = inputs_embeds + self.token_type_embeddings(token_type_ids)
        if self.dropout_before_norm:
            return self.LayerNorm(self.dropout(embeddings))
        return self.dropout(self.LayerNorm(embeddings))


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
        if "joined_qkv_source" in self.__dict__:  # `fuse_qkv_projections()` kept joined weights
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


class HfRoFormerResidualOutput(nn.Module):
    """Projection back to the hidden size, dropout, residual connection and post-norm: the end of the attention block
    (`attention.output`) and of the feed-forward block (`output`)."""

    def __init__(self, config: HfRoFormerConfig, input_size: int):
        super().__init__()
        self.dense = nn.Linear(input_size, config.hidden_size, bias=config.use_bias)
        self.LayerNorm = make_norm(config, config.hidden_size)
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)

    def forward(
        self, hidden_states: torch.Tensor, input_tensor: torch.Tensor, recompute_input: Callable | None = None
    ) -> torch.Tensor:
        """Project `hidden_states` and add them to the block input `input_tensor` before normalizing.

        `recompute_input()`, a function computing `hidden_states` again, lets the projection's backward pass get them
        from it rather than from memory (see `input_recomputed_in_backward`)."""
        if recompute_input is None:
            hidden_states = self.dense(hidden_states)
        else:
            hidden_states = project_recomputing_input(self.dense, hidden_states, recompute_input)
        if self.training:  # dropout is the identity in evaluation: not dispatched at all there
            hidden_states = self.dropout(hidden_states)
        return self.LayerNorm(add_residual(hidden_states, input_tensor))


class HfRoFormerAttention(nn.Module):
    """An attention block: self- or cross-attention (`.self`) followed by its output projection (`.output`)."""

    def __init__(self, config: HfRoFormerConfig, layer_idx: int, attention_class: type[HfRoFormerAttentionBase]):
        super().__init__()
        self.self = attention_class(config, layer_idx=layer_idx)
        self.output = HfRoFormerResidualOutput(config, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        """Run the attention (arguments as for `.self`) and the residual output projection."""
        attention_output, _ = self.self(hidden_states, *args, **kwargs)
        return self.output(attention_output, hidden_states)


class HfRoFormerIntermediate(nn.Module):
    """First half of the feed-forward block: expansion to `intermediate_size` and activation."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size, bias=config.use_bias)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]
        self.hidden_act = config.hidden_act

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Expand and activate."""
        return self.activate(self.dense(hidden_states))

    def activate(self, expanded: torch.Tensor) -> torch.Tensor:
        """The activation of the expanded states (in place in inference: see `activate_in_place_in_inference`)."""
        return activate_in_place_in_inference(self.intermediate_act_fn, self.hidden_act, expanded)


class HfRoFormerLayer(GradientCheckpointingLayer):
    """One transformer layer: self-attention, optional cross-attention (decoders), feed-forward; all post-norm."""

    def __init__(self, config: HfRoFormerConfig, layer_idx: int):
        super().__init__()
        self_attention = HfRoFormerLinearSelfAttention if config.attention_type == "linear" else HfRoFormerSelfAttention
        self.attention = HfRoFormerAttention(config, layer_idx, self_attention)
        if config.add_cross_attention:
            self.crossattention = HfRoFormerAttention(config, layer_idx, HfRoFormerCrossAttention)
        self.intermediate = HfRoFormerIntermediate(config)
        self.output = HfRoFormerResidualOutput(config, config.intermediate_size)
        self.chunk_size_feed_forward = config.chunk_size_feed_forward

    def forward(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_embeddings=None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        attention_implementation: str | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """Transform `hidden_states` with the self-attention `attention_mask` and the rotations
        `position_embeddings`, attending to `encoder_hidden_states` (over `encoder_attention_mask`) in decoders with
        cross-attention. `attention_implementation` is the forward's choice for self-attention (cross-attention runs
        the config's backend); `kwargs` reach every attention function."""
        hidden_states = self.attention(
            hidden_states, attention_mask=attention_mask, position_embeddings=position_embeddings, cache=cache,
            attention_implementation=attention_implementation, **kwargs,
        )  # fmt: skip
        if encoder_hidden_states is not None:
            hidden_states = self.crossattention(
                hidden_states, encoder_hidden_states, attention_mask=encoder_attention_mask, cache=cache, **kwargs
            )
        if self.chunk_size_feed_forward > 0:  # memory only: the same result, computed in chunks of tokens
            chunks = hidden_states.split(self.chunk_size_feed_forward, dim=1)  # any length (the last chunk is shorter)
            return torch.cat([self.feed_forward(chunk) for chunk in chunks], dim=1)
        return self.feed_forward(hidden_states)

    def feed_forward(self, attention_output: torch.Tensor) -> torch.Tensor:
        """Feed-forward block on (a chunk of) the attention output. In training the output projection gets the
        activation recomputed in the backward pass from the activation's input (which the activation's backward keeps
        anyway) instead of storing it a second time: a quarter of a layer's stored activations (128 MB per layer at
        32 x 1,024 tokens), for one elementwise pass whose result is bitwise the same. Not under gradient
        checkpointing (which stores neither) nor in compiled graphs (whose compiler plans what to store)."""
        if not self.stores_activation_once(attention_output):
            return self.output(self.intermediate(attention_output), attention_output)
        activation = self.intermediate.intermediate_act_fn
        expanded = self.intermediate.dense(attention_output)
        return self.output(activation(expanded), attention_output, recompute_input=lambda: activation.forward(expanded))

    def stores_activation_once(self, attention_output: torch.Tensor) -> bool:
        """Whether this forward records a backward pass in which the activation would otherwise be stored twice."""
        return records_activation_twice(attention_output, self.gradient_checkpointing and self.training)


class HfRoFormerEncoder(nn.Module):
    """The stack of layers (`encoder.layer.N`, the parameter names of transformers' RoFormer), run in turn by
    `HfRoFormerModel.forward`."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.layer = nn.ModuleList([HfRoFormerLayer(config, layer_idx=i) for i in range(config.num_hidden_layers)])


def real_token_states(sequence_output: torch.Tensor, attention_mask: torch.Tensor | None, last: bool = False):
    """Each row's hidden state at its first real token ([CLS]) or, with `last`, its last real token, found in its
    padding mask (right or left padding alike), so the state read never depends on the padding; without a 2-D mask
    of the rows' length (none, a 4-D mask, or one covering cached positions too), the first or last position."""
    rows, length = sequence_output.shape[:2]
    if attention_mask is None or attention_mask.shape != (rows, length):
        return sequence_output[:, -1 if last else 0]
    real = attention_mask.ne(0).int()
    positions = length - 1 - real.flip(-1).argmax(-1) if last else real.argmax(-1)
    return sequence_output[torch.arange(rows, device=sequence_output.device), positions.to(sequence_output.device)]


class HfRoFormerPooler(nn.Module):
    """Sentence vector from the first real token ([CLS], also in a left-padded row): dense layer with tanh (BERT's
    pooler) or without activation (RoFormer-Sim's linear pooler, whose cosine similarity compares sentences)."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh() if config.pooler_activation == "tanh" else nn.Identity()

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Pooled vector of each sequence."""
        return self.activation(self.dense(real_token_states(hidden_states, attention_mask)))


# --- Heads' modules: what the `HfRoFormerFor*` models put on top of the encoder ------------------------------------


class HfRoFormerPredictionHeadTransform(nn.Module):
    """Dense + activation + layer norm applied before the vocabulary projection of the language-modeling heads."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.lm_head_layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Transform hidden states into the embedding space."""
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class HfRoFormerOutputLinear(nn.Linear):
    """The `nn.Linear` of an output head (vocabulary logits, token labels), whose output is a tensor of its own, never a
    view: torch's linear with a bias returns, for inputs of more than two dimensions, a view of its 2-D product, and
    FSDP2 warns that an in-place op on a view output of a sharded module would skip its hooks (wrong gradients). The
    product without the bias is not a view; the bias is added to it. Same parameters and names as `nn.Linear`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """`input @ weight.T + bias`, as a new tensor."""
        output = nn.functional.linear(input, self.weight)
        return output if self.bias is None else output + self.bias


class HfRoFormerLMPredictionHead(nn.Module):
    """Vocabulary logits: transform, then the (tied) embedding matrix plus an output-only bias; without
    `lm_head_transform` (RoFormer-V2) the bare tied embedding matrix (no transform, no bias)."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        if not config.lm_head_transform:
            self.decoder = HfRoFormerOutputLinear(config.embedding_size, config.vocab_size, bias=False)
            return
        self.transform = HfRoFormerPredictionHeadTransform(config)
        self.decoder = HfRoFormerOutputLinear(config.embedding_size, config.vocab_size, bias=True)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Logits over the vocabulary."""
        if hasattr(self, "transform"):
            hidden_states = self.transform(hidden_states)
        return self.decoder(hidden_states)


class HfRoFormerOnlyMLMHead(nn.Module):
    """Container giving the language-modeling head its checkpoint name `cls.predictions`."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.predictions = HfRoFormerLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Logits over the vocabulary."""
        return self.predictions(sequence_output)


def flatten_choices(shape, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds) -> tuple:
    """Multiple-choice inputs `(batch, choices, seq_len, ...)` as rows `(batch * choices, seq_len, ...)`; masks,
    segment ids and positions must have the ids' `shape` (positions may broadcast over the batch)."""
    given = {"attention_mask": attention_mask, "token_type_ids": token_type_ids, "position_ids": position_ids}
    kinds = {"attention_mask": "mask", "token_type_ids": "ids", "position_ids": "integer"}
    for name, tensor in given.items():
        if tensor is not None:
            expected = (None if name == "position_ids" else shape[0], *shape[1:])
            check_tensor(name, tensor, kind=kinds[name], dims=(3,), shape=expected)
    if position_ids is not None:
        if position_ids.shape[0] not in (1, shape[0]):
            rows = ", ".join(str(size) for size in shape[1:])
            raise ValueError(
                f"`position_ids` has shape {tuple(position_ids.shape)}, expected ({shape[0]}, {rows}) or (1, {rows}) "
                "(one row of positions for every question of the batch)."
            )
        position_ids = position_ids.expand(shape)
    tensors = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
    return tuple(None if tensor is None else tensor.flatten(0, 1) for tensor in tensors)


def labelled_token_count(labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """How many labels are not ignored, at least 1: a summed loss divided by it is their mean, and 0 (not 0/0 = NaN,
    which would poison the weights) when nothing is labelled. A device tensor, so no host sync."""
    return (labels != ignore_index).sum().clamp(min=1)


def with_labelled_token_count(labels: torch.Tensor, kwargs: dict) -> dict:
    """`kwargs` for transformers' token losses with `num_items_in_batch` at least 1: the labelled tokens of `labels`
    (-100 ignored) unless the Trainer passed its count across accumulated batches."""
    count = kwargs.get("num_items_in_batch")
    if count is None:
        count = labelled_token_count(labels)
    count = count.clamp(min=1) if torch.is_tensor(count) else max(count, 1)
    return {**kwargs, "num_items_in_batch": count}


class HfRoFormerClassificationHead(nn.Module):
    """Sentence-level head on the first real token ([CLS], also in a left-padded row): dropout, dense, activation,
    dropout, projection to labels."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)
        self.activation = ACT2FN[config.hidden_act]

    def forward(self, sequence_output: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label logits from the first real token's hidden state."""
        features = self.dropout(real_token_states(sequence_output, attention_mask))
        features = self.dropout(self.activation(self.dense(features)))
        return self.out_proj(features)


class HfRoFormerMeanPoolingHead(nn.Module):
    """Sentence-level head on the masked mean of all token states: dropout, then one projection to the labels."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, sequence_output: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label logits from the mean of the real tokens' hidden states."""
        if attention_mask is None or attention_mask.dim() != 2:
            pooled = sequence_output.mean(dim=1)
        else:
            weights = attention_mask.to(sequence_output.dtype).unsqueeze(-1)
            pooled = (sequence_output * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return self.out_proj(self.dropout(pooled))


def span_loss(start_logits, end_logits, start_positions, end_positions) -> torch.Tensor:
    """transformers' question-answering loss (positions past the input ignored), each cross-entropy a mean over the
    answers inside the input, 0 where there are none."""
    ignored = start_logits.size(1)
    losses = []
    for logits, positions in ((start_logits, start_positions), (end_logits, end_positions)):
        positions = positions.reshape(-1).to(logits.device).clamp(0, ignored)
        count = labelled_token_count(positions, ignore_index=ignored)
        losses.append(fixed_cross_entropy(logits, positions, count, ignore_index=ignored))
    return (losses[0] + losses[1]) / 2


# --- Models --------------------------------------------------------------------------------------------------------


class HfRoFormerPreTrainedModel(
    HfRoFormerSavingMixin, JoinedProjectionsMixin, WholeHeadsPerRankMixin, PreTrainedModel
):
    """Weight initialization, attention-backend capabilities, saving (`HfRoFormerSavingMixin`), the inference-time
    fusion of query, key and value (`JoinedProjectionsMixin`) and tensor parallelism by whole heads
    (`WholeHeadsPerRankMixin`) shared by every RoFormer model."""

    config: HfRoFormerConfig
    base_model_prefix = "roformer"
    supports_gradient_checkpointing = True
    _no_split_modules = ["HfRoFormerLayer"]
    _supports_flash_attn = True
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    # transformers' RoFormer stores a sinusoid table; RoPE here is computed from positions, so the table is unused.
    _keys_to_ignore_on_load_unexpected = [r"encoder\.embed_positions\.weight"]
    # Tensor parallelism splits the encoder layers (`config.base_model_tp_plan`); the heads' own layers stay whole on
    # every rank. They are small, except the vocabulary projection, which is tied to the embeddings and has its own
    # bias: sharding the two together breaks the bias tie (transformers 5.23) or needs a vocabulary divisible by the
    # number of ranks (5.17).
    _tp_plan: dict[str, str] = {}
    # The layers `fuse_qkv_projections()` joins (`JoinedProjectionsMixin`).
    projected_attention_classes = (HfRoFormerSelfAttention, HfRoFormerLinearSelfAttention)
    _can_record_outputs = {
        "hidden_states": HfRoFormerLayer,
        "attentions": HfRoFormerSelfAttention,
        "cross_attentions": HfRoFormerCrossAttention,
    }

    def __init__(self, config: HfRoFormerConfig, *inputs, **kwargs):
        """Validate the config before building on it: fields assigned since it was built, or dicts edited in place,
        fail here with a `ValueError` naming the field rather than deep inside a forward."""
        config.check_rules()
        super().__init__(config, *inputs, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, HfRoFormerLMPredictionHead) and hasattr(module, "bias"):
            init.zeros_(module.bias)

    def _supports_default_dynamic_cache(self) -> bool:
        """`generate` may create a key/value cache, except for linear attention, whose model makes its own state."""
        return self.config.attention_type != "linear"


class HfRoFormerModel(HfRoFormerPreTrainedModel):
    """The bare RoFormer transformer, returning hidden states (and a pooled vector with `pooler_activation`).

    As an encoder it attends bidirectionally. With `config.is_decoder=True` it attends causally and keeps a key/value
    cache; with `add_cross_attention=True` as well it can serve as the decoder of an `EncoderDecoderModel`. With
    `config.unilm=True` the mask follows UniLM's sequence-to-sequence pattern from `token_type_ids`.
    """

    _auto_class = "AutoModel"
    pipeline_tag = "feature-extraction"

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.embeddings = HfRoFormerEmbeddings(config)
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size, bias=config.use_bias)
        self.encoder = HfRoFormerEncoder(config)
        self.pooler = HfRoFormerPooler(config) if config.pooler_activation is not None else None
        self.rotary_emb = HfRoFormerRotaryEmbedding(config)
        self.gradient_checkpointing = False
        self.post_init()

    def init_parallel_plans(self) -> None:
        """transformers' parallel plans of this model: `config.base_model_tp_plan`, plus the same split for the
        cross-attention layers of a decoder that has them (rules naming no module would be reported as unused)."""
        super().init_parallel_plans()
        if self.config.add_cross_attention and self._tp_plan:
            self._tp_plan.update(CROSS_ATTENTION_TP_PLAN)

    def get_input_embeddings(self) -> nn.Embedding:
        """The token embedding matrix."""
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        """Replace the token embedding matrix (e.g. after resizing the vocabulary)."""
        self.embeddings.word_embeddings = value

    @accepts_either_cache_name
    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self, input_ids: TokenIds = None, attention_mask: Floats = None, token_type_ids: TokenIds = None,
        position_ids: TokenIds = None, inputs_embeds: Floats = None, encoder_hidden_states: Floats = None,
        encoder_attention_mask: Floats = None, cache: Cache | None = None, use_cache: bool | None = None,
        read_positions: tuple[int, ...] | str | None = None, **kwargs,
    ) -> BaseModelOutputWithPoolingAndCrossAttentions:
        """Encode a batch: `(batch, seq_len)` ids (or `inputs_embeds`), padding `attention_mask` (1 = real token;
        `(batch, past + seq_len)` with a cache), segment `token_type_ids`, and `position_ids` `(batch or 1, seq_len)`,
        the angles of the rotations (default: `arange` after the cached length; any integers, RoPE has no table).

        Decoders take `cache` (also accepted as `past_key_values`, its name before transformers 5.24)/`use_cache` and,
        with cross-attention, `encoder_hidden_states` and their `encoder_attention_mask`. `kwargs` may declare packed
        rows (`cu_seq_lens_q/k` + `max_length_q/k`, or `seq_idx`, as `DataCollatorWithFlattening` passes them) and
        carry attention-backend arguments. Heads pass `read_positions`, the output positions they read besides real
        tokens (`(0,)`, `(-1,)`: one per row, which may be padding; "all"), so that padding-free layouts keep their
        results exact.
        """
        # Read once: the cache `_prepare_cache` returns below holds as many tokens as the one given (or none).
        past_length = cache.get_seq_length() if cache is not None else 0
        check_model_inputs(
            self.config, input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
            position_ids=position_ids, inputs_embeds=inputs_embeds, encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask, past_length=past_length,
        )
        if token_type_ids is not None and token_type_ids.dim() == 1:  # one row's segment ids (vLLM's scoring call)
            token_type_ids = token_type_ids[None]
        use_cache = bool(use_cache) and self.config.is_decoder
        if use_cache:
            cache = self._prepare_cache(cache, encoder_hidden_states)
        hidden_states = self.embeddings(input_ids, token_type_ids, inputs_embeds)
        if hasattr(self, "embeddings_project"):
            hidden_states = self.embeddings_project(hidden_states)
        if position_ids is None:
            position_ids = torch.arange(past_length, past_length + hidden_states.shape[1], device=hidden_states.device)
            position_ids = position_ids[None]
        if self.pooler is not None:  # the pooler reads one vector per row (its first real token)
            read_positions = "all" if read_positions == "all" else (0, *(read_positions or ()))

        # The batch layout, decided once: one row of sequences the caller packed (their boundaries in `kwargs`), the
        # real tokens of a padded batch packed into one row (`config.padding_free`), or the rows as given.
        boundaries, kwargs = split_packed_row_boundaries(kwargs)
        dropout = self.config.attention_probs_dropout_prob if self.training else 0.0
        varlen_kernel_runs = varlen_kernel_applies(self.config._attn_implementation, hidden_states, dropout)
        varlen_kernel_runs = varlen_kernel_runs and not rotates_keys_per_query(self.config)
        unpadded = None
        if boundaries:
            check_packed_rows(
                self.config, hidden_states, boundaries, attention_mask=attention_mask, cache=cache,
                encoder_hidden_states=encoder_hidden_states, read_positions=read_positions,
            )
            sequence_ids, varlen_kwargs = packed_row_sequences(boundaries, hidden_states, varlen_kernel_runs)
        else:
            unpadded = unpad_where_allowed(
                self.config, hidden_states, attention_mask, cache=cache, encoder_hidden_states=encoder_hidden_states,
                read_positions=read_positions, attention_kwargs=kwargs, varlen_kernel_runs=varlen_kernel_runs,
            )
            if unpadded is not None:  # one row of the real tokens until the layers are done
                hidden_states, position_ids = unpadded.pack(hidden_states), unpadded.pack(position_ids)
                sequence_ids = unpadded.sequence_ids
                varlen_kwargs = unpadded.varlen_kwargs() if varlen_kernel_runs else {}
        if boundaries or unpadded is not None:
            position_embeddings = self.rotary_emb.for_packed_row(position_ids, sequence_ids)
            layers_mask = None if varlen_kwargs else packed_row_mask(self.config, hidden_states, sequence_ids)
            kwargs = {**kwargs, **varlen_kwargs}
        else:
            position_embeddings = self.rotary_emb.for_rows(position_ids, attention_mask, past_length)
            layers_mask = self_attention_mask(self.config, hidden_states, attention_mask, cache, token_type_ids)
        encoder_mask = None
        if encoder_hidden_states is not None:
            encoder_mask = cross_attention_mask(
                self.config, hidden_states, encoder_hidden_states, encoder_attention_mask
            )
        attention_implementation = self_attention_implementation(
            self.config, hidden_states, layers_mask, position_embeddings, kwargs, dropout
        )
        if attention_implementation == PER_QUERY_ROTARY:
            kwargs["query_rotations"] = position_embeddings

        for layer in self.encoder.layer:
            # hidden states and encoder states positionally, so reentrant gradient checkpointing propagates gradients
            hidden_states = layer(
                hidden_states, encoder_hidden_states, attention_mask=layers_mask,
                position_embeddings=position_embeddings, encoder_attention_mask=encoder_mask, cache=cache,
                attention_implementation=attention_implementation, **kwargs,
            )
        if unpadded is not None:  # rows again, zeros at the padding
            hidden_states = unpadded.unpack(hidden_states)
        if use_cache and self.config.attention_type == "linear":
            self_attention_cache(cache).seen_tokens += hidden_states.shape[1]
        return BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=hidden_states,
            pooler_output=None if self.pooler is None else self.pooler(hidden_states, attention_mask),
            **cache_output(cache if use_cache else None),
        )

    def _prepare_cache(self, cache: Cache | None, encoder_hidden_states) -> Cache:
        """The cache to decode with: key/value caches for softmax attention, recurrent states for linear attention
        (an empty standard cache handed in, e.g. by `EncoderDecoderModel.generate`, is swapped for one)."""
        with_cross = encoder_hidden_states is not None or self.config.is_encoder_decoder
        if self.config.attention_type != "linear":
            if with_cross and cache is not None and not isinstance(cache, EncoderDecoderCache):
                # `generate` of a decoder cache `encoder_hidden_states` hands in a self-attention cache only
                return EncoderDecoderCache(cache, DynamicCache(config=self.config))
            if cache is not None:
                return cache
            if with_cross:
                return EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
            return DynamicCache(config=self.config)

        def linear_state(candidate):
            if isinstance(candidate, HfRoFormerLinearAttentionCache):
                return candidate
            if candidate is None or candidate.get_seq_length() == 0:
                return HfRoFormerLinearAttentionCache(self.config.num_hidden_layers)
            raise ValueError(
                "Linear attention decodes with a HfRoFormerLinearAttentionCache, got a filled "
                f"{type(candidate).__name__}."
            )

        if isinstance(cache, EncoderDecoderCache):
            cache.self_attention_cache = linear_state(cache.self_attention_cache)
            return cache
        if with_cross:
            return EncoderDecoderCache(linear_state(cache), DynamicCache(config=self.config))
        return linear_state(cache)


class HfRoFormerTiedLMHeadMixin:
    """The language-modeling head (`cls`) tied to the input embeddings, shared by the masked and causal LMs."""

    _tied_weights_keys = {
        "cls.predictions.decoder.bias": "cls.predictions.bias",
        "cls.predictions.decoder.weight": "roformer.embeddings.word_embeddings.weight",
    }

    def add_lm_head(self, config: HfRoFormerConfig) -> None:
        """Create `cls`; a bare head (no transform) ties only the embedding matrix, having no bias."""
        self.cls = HfRoFormerOnlyMLMHead(config)
        self._tied_weights_keys = dict(type(self)._tied_weights_keys)
        if not config.lm_head_transform:
            del self._tied_weights_keys["cls.predictions.decoder.bias"]

    def get_output_embeddings(self) -> nn.Linear:
        """The vocabulary projection (tied to the input embeddings)."""
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        """Replace the vocabulary projection and its bias."""
        self.cls.predictions.decoder = new_embeddings
        if new_embeddings.bias is not None:
            self.cls.predictions.bias = new_embeddings.bias


class HfRoFormerTaskModel(HfRoFormerPreTrainedModel):
    """The skeleton of the heads that map the encoder output to logits and take `labels`: encode, `logits`, `loss`.

    `read_positions` tells the encoder which output positions the head reads besides real tokens; a head with
    `scores_choices` takes `(batch, num_choices, seq_len)` inputs and scores each choice.
    """

    output_type: type
    read_positions: tuple[int, ...] | None = None
    scores_choices: bool = False

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.roformer = HfRoFormerModel(config)

    def logits(self, sequence_output: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """The head's logits from the encoder's last hidden states (and the padding mask)."""
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, labels: torch.Tensor, **kwargs) -> torch.Tensor:
        """The head's training loss."""
        raise NotImplementedError

    def check_labels(self, labels, batch: int, length: int) -> None:
        """Refuse labels of the wrong type, shape or range for inputs of `(batch, length)` (choices: `length`)."""
        raise NotImplementedError

    @can_return_tuple
    def forward(
        self, input_ids: TokenIds = None, attention_mask: Floats = None, token_type_ids: TokenIds = None,
        position_ids: TokenIds = None, inputs_embeds: Floats = None, labels: Floats = None, **kwargs,
    ) -> ModelOutput:
        """Logits of the head (see the class); with `labels` also its loss."""
        inputs = check_ids_or_embeds(input_ids, inputs_embeds, ids_rank=3 if self.scores_choices else 2)
        num_choices = None
        if self.scores_choices:  # (batch, choices, seq_len) -> (batch * choices, seq_len)
            num_choices = inputs.shape[1]
            input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds = flatten_choices(
                inputs.shape[:3], input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds
            )
        if labels is not None:
            self.check_labels(labels, *inputs.shape[:2])
        outputs = self.roformer(
            input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, position_ids=position_ids,
            inputs_embeds=inputs_embeds, read_positions=self.read_positions, return_dict=True, **kwargs,
        )
        logits = self.logits(outputs.last_hidden_state, attention_mask)
        if num_choices is not None:  # a tensor of its own, not a view (see `HfRoFormerOutputLinear`): batch x choices
            logits = logits.view(-1, num_choices).clone()
        loss = None if labels is None else self.loss(logits, labels, **kwargs)
        return self.output_type(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class HfRoFormerForMaskedLM(HfRoFormerTiedLMHeadMixin, HfRoFormerTaskModel):
    """RoFormer with the masked-language-modeling head it was pre-trained with (`fill-mask`)."""

    _auto_class = "AutoModelForMaskedLM"
    pipeline_tag = "fill-mask"
    output_type = MaskedLMOutput

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        if config.is_decoder:
            logger.warning("HfRoFormerForMaskedLM expects `config.is_decoder=False` (bidirectional attention).")
        self.add_lm_head(config)
        self.post_init()

    def logits(self, sequence_output, attention_mask):
        """Vocabulary logits for every position."""
        return self.cls(sequence_output)

    def loss(self, logits, labels, **kwargs):
        """Masked-LM cross-entropy (-100 = ignored); 0 for a batch without labelled tokens."""
        kwargs = with_labelled_token_count(labels, kwargs)
        return self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **kwargs)

    def check_labels(self, labels, batch, length):
        """One token id (or -100) per input token."""
        vocab = self.config.vocab_size
        check_labels("labels", labels, kind="targets", shape=(batch, length), high=vocab, ignore_index=True)


def labels_predicted_from_real_tokens(labels: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """The causal-LM targets of each position (the next label; -100 past the end), -100 where the predicting position
    is padding (a 2-D padding mask of the labels' shape)."""
    shifted = nn.functional.pad(labels, (0, 1), value=-100)[:, 1:].contiguous()
    if attention_mask is not None and attention_mask.shape == labels.shape:
        shifted = shifted.masked_fill(attention_mask.to(labels.device) == 0, -100)
    return shifted


class HfRoFormerForCausalLM(HfRoFormerTiedLMHeadMixin, HfRoFormerPreTrainedModel, GenerationMixin):
    """RoFormer as a left-to-right language model (`generate`, KV cache), e.g. the original RoFormer-GPT, or the
    decoder of an `EncoderDecoderModel` when built with `add_cross_attention=True`."""

    _auto_class = "AutoModelForCausalLM"
    pipeline_tag = "text-generation"

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        if not config.is_decoder:
            logger.warning("HfRoFormerForCausalLM used with `is_decoder=False`: attention will not be causal.")
        self.roformer = HfRoFormerModel(config)
        self.add_lm_head(config)
        self.post_init()

    def generate(self, inputs: torch.Tensor | None = None, *args, **kwargs):
        """`GenerationMixin.generate`; a UniLM model (RoFormer-Sim) given a prompt but no `token_type_ids` reads the
        prompt as the source segment (type 0) and every generated token as the target segment (type 1), so that
        decoding with the cache and without it (each step re-encoding the whole sequence) attend alike."""
        if self.config.unilm and kwargs.get("token_type_ids") is None:
            prompt = inputs if inputs is not None else kwargs.get("input_ids")
            if prompt is None and kwargs.get("inputs_embeds") is not None:
                prompt = kwargs["inputs_embeds"][..., 0]
            if prompt is not None:
                kwargs["token_type_ids"] = torch.zeros(prompt.shape[:2], dtype=torch.long, device=prompt.device)
        return super().generate(inputs, *args, **kwargs)

    def prepare_inputs_for_generation(self, input_ids: torch.Tensor, *args, inputs_embeds: Floats = None, **kwargs):
        """As `GenerationMixin` does; a UniLM model without `token_type_ids` (generation without a prompt) reads the
        first step as the source segment (type 0) and every generated token as the target segment (type 1)."""
        model_inputs = super().prepare_inputs_for_generation(input_ids, *args, inputs_embeds=inputs_embeds, **kwargs)
        if self.config.unilm and model_inputs.get("token_type_ids") is None:
            tokens = model_inputs.get("input_ids")
            if tokens is None:
                tokens = model_inputs["inputs_embeds"][..., 0]
            cache = model_inputs.get(CACHE_FIELD)
            generated = cache is not None and cache.get_seq_length() > 0
            model_inputs["token_type_ids"] = torch.full_like(tokens, int(generated), dtype=torch.long)
        return model_inputs

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs, is_encoder_decoder=False, num_new_tokens=1):
        """As `GenerationMixin` does; a UniLM model marks the generated tokens as target segment (type 1)."""
        model_kwargs = super()._update_model_kwargs_for_generation(
            outputs, model_kwargs, is_encoder_decoder=is_encoder_decoder, num_new_tokens=num_new_tokens
        )
        if self.config.unilm and model_kwargs.get("token_type_ids") is not None:
            token_type_ids = model_kwargs["token_type_ids"].clone()
            token_type_ids[:, -num_new_tokens:] = 1
            model_kwargs["token_type_ids"] = token_type_ids
        return model_kwargs

    @accepts_either_cache_name
    @can_return_tuple
    def forward(
        self, input_ids: TokenIds = None, attention_mask: Floats = None, token_type_ids: TokenIds = None,
        position_ids: TokenIds = None, inputs_embeds: Floats = None, encoder_hidden_states: Floats = None,
        encoder_attention_mask: Floats = None, cache: Cache | None = None, labels: TokenIds = None,
        use_cache: bool | None = None, logits_to_keep: int | torch.Tensor = 0, **kwargs,
    ) -> CausalLMOutputWithCrossAttentions:
        """Next-token logits; with `labels` also the shifted language-modeling loss.

        `logits_to_keep` computes logits only for the last N positions (0 = all), as in transformers' causal LMs. The
        loss pairs each label with the logits one position earlier; a label whose earlier position is padding (the
        first real token after left or middle padding) is left out, so the loss does not depend on the padding
        (transformers' causal LMs count it, predicted from a padding position).
        """
        inputs = check_ids_or_embeds(input_ids, inputs_embeds)
        if labels is not None:
            vocab = self.config.vocab_size
            check_labels("labels", labels, kind="targets", shape=tuple(inputs.shape[:2]), high=vocab, ignore_index=True)
        outputs = self.roformer(
            input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, position_ids=position_ids,
            inputs_embeds=inputs_embeds, encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask, cache=cache, use_cache=use_cache,
            read_positions=None if labels is None else "all", return_dict=True, **kwargs,
        )
        kept = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.cls(outputs.last_hidden_state[:, kept, :])
        loss = None
        if labels is not None:
            if "shift_labels" not in kwargs:
                kwargs["shift_labels"] = labels_predicted_from_real_tokens(labels, attention_mask)
            loss_kwargs = with_labelled_token_count(kwargs["shift_labels"], kwargs)
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **loss_kwargs)
        return CausalLMOutputWithCrossAttentions(
            loss=loss,
            logits=logits,
            **cache_output(output_cache(outputs)),
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            cross_attentions=outputs.cross_attentions,
        )


class HfRoFormerForSequenceClassification(HfRoFormerTaskModel):
    """RoFormer with a sentence-level head: single-label or multi-label classification, or regression
    (`num_labels=1`), chosen by `config.problem_type` or inferred from the labels as transformers does.

    `config.classifier_pooling` picks the head: "cls" (the first real token, [CLS], as transformers' RoFormer reads
    position 0 of a right-padded row) or "mean" (masked mean over tokens, as the original CAIL2019-SCM recipe).
    """

    _auto_class = "AutoModelForSequenceClassification"
    pipeline_tag = "text-classification"
    output_type = SequenceClassifierOutput

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        if config.classifier_pooling == "mean":
            self.classifier = HfRoFormerMeanPoolingHead(config)
        else:
            self.classifier = HfRoFormerClassificationHead(config)
            self.read_positions = (0,)  # one vector per row: its first real token, position 0 when right-padded
        self.post_init()

    def logits(self, sequence_output, attention_mask):
        """Label logits `(batch, num_labels)` from the pooled sequence."""
        return self.classifier(sequence_output, attention_mask)

    def loss(self, logits, labels, **kwargs):
        """The loss of the problem type (cross-entropy, binary cross-entropy or mean squared error). Given the Trainer's
        `num_items_in_batch` (the labels across accumulated batches), each is a sum divided by it, as transformers'
        cross-entropy is: a mean over one batch would count every accumulated batch in full (gradients x N)."""
        loss = self.loss_function(labels, logits, self.config, **kwargs)
        count = kwargs.get("num_items_in_batch")
        if count is None or self.config.problem_type == "single_label_classification":
            return loss  # transformers' cross-entropy divides by the count itself
        return loss * labels.numel() / count

    def check_labels(self, labels, batch, length):
        """Regression (`num_labels=1`): one float per row; single-label: one class index per row; multi-label: one
        0/1 float per row and label. The problem type is `config.problem_type`, else inferred as transformers does."""
        num_labels, problem = self.config.num_labels, self.config.problem_type
        check_tensor("labels", labels, kind="mask", dims=(1, 2))
        if problem is None:
            if num_labels == 1:
                problem = "regression"
            elif labels.dtype.is_floating_point:
                problem = "multi_label_classification"
            else:
                problem = "single_label_classification"
        if problem == "single_label_classification":
            check_labels("labels", labels, kind="targets", shape=(batch,), high=num_labels)
            return
        shape = (batch,) if problem == "regression" and num_labels == 1 and labels.dim() == 1 else (batch, num_labels)
        check_labels("labels", labels, kind="floating", shape=shape)
        if problem == "regression":
            check_values("labels", labels, torch.isfinite, "regression targets must be finite numbers")
        else:
            check_values("labels", labels, lambda v: (v >= 0) & (v <= 1), "multi-label targets must lie in [0, 1]")


def choice_scored_position(config: HfRoFormerConfig) -> int | None:
    """Where `HfRoFormerForMultipleChoice` scores each choice: 0, its first real token ([CLS]), for `summary_type`
    "first"; None, its last real token, for "last" (also when the config has no `summary_type`, as transformers'
    RoFormer reads it)."""
    return 0 if getattr(config, "summary_type", "last") == "first" else None


class HfRoFormerForMultipleChoice(HfRoFormerTaskModel):
    """RoFormer scoring each of several candidate sequences; inputs are `(batch, num_choices, seq_len)`.

    Each choice is scored from one hidden state, which `config.summary_type` names: "last" (also when the config has
    none, as transformers' `RoFormerForMultipleChoice` reads its checkpoints) is the choice's last real token, read
    from the attention mask, so a choice scores the same however it is padded (transformers' class reads the last
    position, padding in a padded batch; on unpadded choices the two agree); "first" is the [CLS] token.
    """

    _auto_class = "AutoModelForMultipleChoice"
    pipeline_tag = "multiple-choice"
    output_type = MultipleChoiceModelOutput
    scores_choices = True

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @property
    def read_positions(self) -> tuple[int, ...]:
        """One vector per choice: its first real token (position 0 when right-padded) or its last (position -1 when
        left-padded or unpadded)."""
        return (0,) if choice_scored_position(self.config) == 0 else (-1,)

    def logits(self, sequence_output, attention_mask):
        """One score per choice, from the real token `summary_type` names (read from the config at every forward, so
        it may be set after loading)."""
        last = choice_scored_position(self.config) is None
        return self.classifier(real_token_states(sequence_output, attention_mask, last=last))

    def loss(self, logits, labels, **kwargs):
        """Cross-entropy over the choices; `labels` is the correct choice's index (a sum over the Trainer's
        `num_items_in_batch` questions when it passes them, as for the other heads)."""
        return fixed_cross_entropy(logits, labels.to(logits.device), kwargs.get("num_items_in_batch"))

    def check_labels(self, labels, batch, num_choices):
        """The index of the correct choice of every question."""
        check_labels("labels", labels, kind="targets", shape=(batch,), high=num_choices)


class HfRoFormerForTokenClassification(HfRoFormerTaskModel):
    """RoFormer with a per-token classifier (named entities, word segmentation, part-of-speech tags)."""

    _auto_class = "AutoModelForTokenClassification"
    pipeline_tag = "token-classification"
    output_type = TokenClassifierOutput

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)
        self.classifier = HfRoFormerOutputLinear(config.hidden_size, config.num_labels)
        self.post_init()

    def logits(self, sequence_output, attention_mask):
        """Per-token label logits."""
        return self.classifier(self.dropout(sequence_output))

    def loss(self, logits, labels, **kwargs):
        """Cross-entropy over tokens (-100 = ignored); 0 for a batch without labelled tokens."""
        return self.loss_function(logits, labels, self.config, **with_labelled_token_count(labels, kwargs))

    def check_labels(self, labels, batch, length):
        """One class index (or -100) per input token."""
        num_labels = self.config.num_labels
        check_labels("labels", labels, kind="targets", shape=(batch, length), high=num_labels, ignore_index=True)


class HfRoFormerForQuestionAnswering(HfRoFormerPreTrainedModel):
    """RoFormer for extractive question answering: start and end logits of the answer span."""

    _auto_class = "AutoModelForQuestionAnswering"
    pipeline_tag = "question-answering"

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.roformer = HfRoFormerModel(config)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(
        self, input_ids: TokenIds = None, attention_mask: Floats = None, token_type_ids: TokenIds = None,
        position_ids: TokenIds = None, inputs_embeds: Floats = None, start_positions: TokenIds = None,
        end_positions: TokenIds = None, **kwargs,
    ) -> QuestionAnsweringModelOutput:
        """Span logits; with `start_positions` and `end_positions` also the mean of the two cross-entropies, a softmax
        over every position (padding included, as transformers' models compute it). Positions past the input are
        ignored, as transformers does; a batch whose answers all lie past it gives loss 0 instead of NaN."""
        training_span = start_positions is not None and end_positions is not None
        inputs = check_ids_or_embeds(input_ids, inputs_embeds)
        if training_span:  # positions past the input are ignored, as transformers does
            for name, positions in (("start_positions", start_positions), ("end_positions", end_positions)):
                check_tensor(name, positions, kind="targets", dims=(1, 2))
                if positions.shape[0] != inputs.shape[0] or positions.numel() != inputs.shape[0]:
                    raise ValueError(f"`{name}` has shape {tuple(positions.shape)}, expected ({inputs.shape[0]},).")
                check_values(name, positions, lambda v: v >= 0, "answer positions must be >= 0")
        outputs = self.roformer(
            input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, position_ids=position_ids,
            inputs_embeds=inputs_embeds, read_positions="all" if training_span else None, return_dict=True, **kwargs,
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(-1)
        loss = None
        if training_span:
            loss = span_loss(start_logits, end_logits, start_positions, end_positions)
        # copies in any case: `.contiguous()` would test the strides, which fixes an exported length to 1 or not 1
        return QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits.clone(memory_format=torch.contiguous_format),
            end_logits=end_logits.clone(memory_format=torch.contiguous_format),
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


# --- Batch layout --------------------------------------------------------------------------------------------------
# `HfRoFormerModel.forward` decides a batch's layout once, from what the caller said (masks, sequence boundaries, the
# cache, the config), never from data values such as positions:
# - rows: rows of equal length; padding, causality, a UniLM pattern or a cache are an attention mask in the form the
#   configured backend expects (`self_attention_mask`);
# - unpadded (`config.padding_free`): the real tokens of a padded batch packed into one row after the embeddings,
#   attended per sequence, and put back into rows after the last layer (`unpad_where_allowed`). Under SDPA a padding
#   mask rules out the flash kernel; a packed row lets variable-length kernels skip padding altogether;
# - packed rows: the caller packed several sequences into one row and said where each starts, through the
#   `cu_seq_lens_q/k` + `max_length_q/k` or `seq_idx` of `DataCollatorWithFlattening` (`packed_row_sequences`).
# A packed row is attended within each sequence by a variable-length kernel where one runs (flash backends; SDPA on
# CUDA in half precision), through the attention kwargs transformers names, and with a block-diagonal mask elsewhere
# (`packed_row_mask`). The default path reads no device value on the host; unpadding reads one small tensor once per
# forward. transformers' unpad/pad helpers are private to its flash-attention path, so the index bookkeeping is here.


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


# --- Input checks --------------------------------------------------------------------------------------------------
# Checks at the entry of the base model and the heads, with errors naming the argument and its shape. Types, ranks,
# shapes and dtypes are read from tensor metadata, which costs nothing; values (ids in range, 0/1 masks, labels in
# range) are read on the host for CPU tensors only, and become an asynchronous device assertion with the same message
# (or are not checked) on an accelerator, so the forward never waits for the device.


IGNORE_INDEX = -100  # labels transformers' losses skip


def reads_values_on_host(tensor: torch.Tensor) -> bool:
    """Whether checks may read `tensor`'s values on the host: CPU tensors (free), never accelerator tensors (a read
    waits for the device) nor while a graph is recorded (`traces_graph`)."""
    return tensor.device.type == "cpu" and not traces_graph()


def check_ids_in_range(ids: torch.Tensor, size: int, name: str, size_name: str) -> None:
    """Refuse ids outside `[0, size)` before an embedding lookup turns them into an opaque index error (CPU) or a
    device-side assert (CUDA): a `ValueError` naming the value on the host; an asynchronous device assertion with
    the same message elsewhere."""
    if traces_graph() or ids.numel() == 0:
        return
    message = (
        f"`{name}` contains {{value}}, outside the valid range [0, {size - 1}] given by `{size_name}`={size}; check "
        "that the tokenizer (or segment ids) match the model."
    )
    if not reads_values_on_host(ids):
        in_range = ids.clamp(0, size - 1) == ids  # one comparison for both bounds: a launch fewer per forward
        assert_on_device(in_range.all(), message.format(value="a value"))
        return
    low, high = (int(value) for value in torch.aminmax(ids))
    if low < 0 or high >= size:
        raise ValueError(message.format(value=low if low < 0 else high))


def _shape(tensor: torch.Tensor) -> tuple[int, ...]:
    return tuple(tensor.shape)


# The dtypes each kind of tensor argument accepts, in the words of the error (tested by `has_dtype_of_kind`).
EMBEDDING_INDEX_DTYPES = (torch.long, torch.int32)  # what `nn.Embedding` looks up
DTYPE_KINDS = {
    "ids": "dtype torch.long or torch.int32 (indices into an embedding table)",
    "integer": "an integer dtype (torch.long)",
    "targets": "dtype torch.long (class indices of a cross-entropy loss)",
    "floating": "a floating dtype",
    "mask": "0/1 values",
}


def has_dtype_of_kind(dtype: torch.dtype, kind: str) -> bool:
    """Whether `dtype` is one `kind` of argument accepts (see `DTYPE_KINDS`)."""
    if kind == "ids":
        return dtype in EMBEDDING_INDEX_DTYPES
    if kind == "targets":  # cross-entropy also takes uint8, but transformers' loss then infers multi-label
        return dtype == torch.long
    if kind == "integer":
        return not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool
    if kind == "floating":
        return dtype.is_floating_point
    return not dtype.is_complex  # mask


def check_tensor(
    name: str, value, *, kind: str, dims: tuple[int, ...], shape: tuple[int | None, ...] | None = None
) -> None:
    """Refuse `value` unless it is a tensor of `kind` (a key of `DTYPE_KINDS`: "ids" for embedding lookups, "integer",
    "targets" for class labels, "floating", "mask": bool/integer/floating) with one of the ranks `dims` and, where
    given, the `shape` (None entries are free; 1 also matches a broadcast axis only where the caller allows it by
    passing None)."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"`{name}` must be a torch.Tensor, got {type(value).__name__}; tokenizers return tensors with "
            "`return_tensors='pt'`."
        )
    if not has_dtype_of_kind(value.dtype, kind):
        raise TypeError(f"`{name}` must have {DTYPE_KINDS[kind]}, got {value.dtype}.")
    if value.dim() not in dims:
        ranks = " or ".join(str(rank) for rank in dims)
        raise ValueError(f"`{name}` must have {ranks} dimensions, got shape {_shape(value)}.")
    if shape is not None and value.dim() == len(shape):
        if any(expected is not None and size != expected for size, expected in zip(value.shape, shape, strict=True)):
            wanted = tuple("*" if expected is None else expected for expected in shape)
            raise ValueError(f"`{name}` has shape {_shape(value)}, expected {wanted}.")


def check_embeds_dtype(inputs_embeds: torch.Tensor, model_dtype: torch.dtype) -> None:
    """Refuse `inputs_embeds` of a dtype that would lift the embeddings past the model's dtype (float64 into a
    float32 model, float32 into a bfloat16 one): the norm after them would fail with torch's "mixed dtype". Dtypes
    that promote to the model's (bfloat16 into float32) are accepted, and so is anything under autocast on an
    accelerator, which casts the norm's inputs; autocast on CPU does not (measured), so there it is refused too."""
    if torch.promote_types(inputs_embeds.dtype, model_dtype) == model_dtype:
        return
    device = inputs_embeds.device.type
    if device != "cpu" and torch.is_autocast_enabled(device):
        return
    raise TypeError(
        f"`inputs_embeds` has dtype {inputs_embeds.dtype}, but the model's embeddings are {model_dtype}; pass "
        f"`inputs_embeds.to({model_dtype})`."
    )


def check_values(name: str, value: torch.Tensor, allowed: Callable, description: str) -> None:
    """Refuse `value` where `allowed(value)`, a boolean tensor, is False: for CPU tensors only, whose values are read
    on the host (elsewhere `allowed` is not even computed, so no device work is spent on a check that is not made)."""
    if not reads_values_on_host(value):
        return
    passes = allowed(value)
    if bool(passes.all()):
        return
    bad = value[~passes][0].item()
    raise ValueError(f"`{name}` contains {bad!r}; {description}.")


def check_ids_or_embeds(input_ids, inputs_embeds, ids_rank: int = 2) -> torch.Tensor:
    """Exactly one of `input_ids` (integer, `ids_rank` dimensions) and `inputs_embeds` (floating, one more); returns
    the one given, whose leading dimensions give the batch layout."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
    if input_ids is not None:
        check_tensor("input_ids", input_ids, kind="ids", dims=(ids_rank,))
        return input_ids
    check_tensor("inputs_embeds", inputs_embeds, kind="floating", dims=(ids_rank + 1,))
    return inputs_embeds


def check_model_inputs(
    config,
    *,
    input_ids,
    attention_mask,
    token_type_ids,
    position_ids,
    inputs_embeds,
    encoder_hidden_states,
    encoder_attention_mask,
    past_length: int,
) -> None:
    """Refuse inputs the base model cannot take, naming the argument and its shape, before any work."""
    given = check_ids_or_embeds(input_ids, inputs_embeds)
    if inputs_embeds is not None:
        embeds_shape = (None, None, config.embedding_size)
        check_tensor("inputs_embeds", inputs_embeds, kind="floating", dims=(3,), shape=embeds_shape)
    batch, seq_length = given.shape[:2]
    if batch == 0 or seq_length == 0:
        where = f"`{'input_ids' if input_ids is not None else 'inputs_embeds'}` has shape {_shape(given)}"
        raise ValueError(f"Nothing to encode: {where}; pass at least one row of at least one token.")
    if attention_mask is not None:
        check_tensor("attention_mask", attention_mask, kind="mask", dims=(2, 4))
        if attention_mask.dim() == 2:
            keys = past_length + seq_length
            if _shape(attention_mask) != (batch, keys):
                cached = f" ({past_length} cached + {seq_length} new tokens)" if past_length else ""
                raise ValueError(
                    f"`attention_mask` has shape {_shape(attention_mask)}, expected ({batch}, {keys}){cached}: one "
                    "entry per token, 1 for real tokens and 0 for padding."
                )
            if attention_mask.dtype != torch.bool:
                check_values(
                    "attention_mask",
                    attention_mask,
                    lambda mask: (mask == 0) | (mask == 1),
                    "use 1 for real tokens and 0 for padding",
                )
        elif attention_mask.shape[0] not in (1, batch) or attention_mask.shape[-2] != seq_length:
            raise ValueError(
                f"A 4D `attention_mask` must have shape ({batch}, heads or 1, {seq_length}, keys), got "
                f"{_shape(attention_mask)}."
            )
    if token_type_ids is not None:
        if token_type_ids.dim() == 1 and batch == 1:  # one row's ids without the batch dimension, as vLLM passes them
            check_tensor("token_type_ids", token_type_ids, kind="ids", dims=(1,), shape=(seq_length,))
        else:
            check_tensor("token_type_ids", token_type_ids, kind="ids", dims=(2,), shape=(batch, seq_length))
    if position_ids is not None:
        check_tensor("position_ids", position_ids, kind="integer", dims=(2,), shape=(None, seq_length))
        if position_ids.shape[0] not in (1, batch):
            raise ValueError(
                f"`position_ids` has shape {_shape(position_ids)}, expected ({batch}, {seq_length}) or "
                f"(1, {seq_length}) (one row of positions for every row of the batch)."
            )
    if encoder_hidden_states is not None:
        if not config.add_cross_attention:
            raise ValueError(
                "`encoder_hidden_states` were passed but the model has no cross-attention layers; build it with "
                "`is_decoder=True, add_cross_attention=True`."
            )
        encoder_shape = (batch, None, config.hidden_size)
        check_tensor("encoder_hidden_states", encoder_hidden_states, kind="floating", dims=(3,), shape=encoder_shape)
        if encoder_attention_mask is not None:
            encoder_shape = tuple(encoder_hidden_states.shape[:2])
            check_tensor("encoder_attention_mask", encoder_attention_mask, kind="mask", dims=(2,), shape=encoder_shape)


def check_labels(
    name: str,
    labels,
    *,
    kind: str,
    shape: tuple[int, ...],
    low: int = 0,
    high: int | None = None,
    ignore_index: bool = False,
) -> None:
    """Refuse `labels` of the wrong type, shape or (class index) range `[low, high)`; -100 allowed with
    `ignore_index`."""
    check_tensor(name, labels, kind=kind, dims=(len(shape),), shape=shape)
    if kind != "targets" or high is None:
        return

    def allowed(values: torch.Tensor) -> torch.Tensor:
        in_range = (values >= low) & (values < high)
        return in_range | (values == IGNORE_INDEX) if ignore_index else in_range

    skipped = f" or {IGNORE_INDEX} (ignored)" if ignore_index else ""
    check_values(name, labels, allowed, f"labels must lie in [{low}, {high - 1}]{skipped}")


# --- Memory saving -------------------------------------------------------------------------------------------------
# Mechanics of the layers, each behind one small named entry: a dropout with a one-byte mask, activations in place in
# inference, the residual added in place where autograd allows it, and a projection whose backward pass recomputes its
# input instead of storing it. Each gives bitwise the same result as the plain form.


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


__all__ = [
    "HfRoFormerForCausalLM",
    "HfRoFormerForMaskedLM",
    "HfRoFormerForMultipleChoice",
    "HfRoFormerForQuestionAnswering",
    "HfRoFormerForSequenceClassification",
    "HfRoFormerForTokenClassification",
    "HfRoFormerLayer",
    "HfRoFormerModel",
    "HfRoFormerPreTrainedModel",
]
