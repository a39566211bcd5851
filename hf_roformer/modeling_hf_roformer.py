"""PyTorch RoFormer: a BERT-style transformer whose attention encodes positions by rotating queries and keys (RoPE).

Module and parameter names are those of transformers' `RoFormer*` classes, so their checkpoints (and LoRA target
names) load unchanged; attention runs through transformers' attention interface (eager, sdpa, flash, flex) and the
rotary angles are computed per forward from `position_ids`, so there is no length limit.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.loss.loss_utils import fixed_cross_entropy
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
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.utils import ModelOutput, logging
from transformers.utils.generic import can_return_tuple, merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .batch_plan_hf_roformer import BatchPlan, plan_batch
from .blockwise_attention_hf_roformer import blockwise_attention_applies, blockwise_attention_forward
from .configuration_hf_roformer import HfRoFormerConfig
from .input_checks_hf_roformer import (
    check_embeds_dtype,
    check_ids_in_range,
    check_ids_or_embeds,
    check_labels,
    check_model_inputs,
    check_tensor,
    check_values,
    traces_graph,
)
from .linear_attention_hf_roformer import (
    HfRoFormerLinearAttentionCache,
    bidirectional_linear_attention,
    causal_linear_attention,
    linear_attention_features,
)
from .model_card_hf_roformer import MODEL_TAGS, add_card_metadata, card_metadata
from .padding_free_hf_roformer import varlen_attention_forward
from .releases_hf_roformer import (
    CACHE_FIELD,
    accepts_either_cache_name,
    cache_output,
    is_view_of_another_tensor,
    output_cache,
)
from .rope_scaling_hf_roformer import rope_attention_factor
from .rotary_hf_roformer import (
    HfRoFormerRotaryEmbedding,
    PerQueryRotation,
    per_query_rotary_attention,
    rotate_interleaved,
)
from .sentence_transformers_hf_roformer import write_sentence_transformers_files


logger = logging.get_logger(__name__)

# Every Auto class a checkpoint of this family supports, written to `config.json` on save so that
# `AutoModelFor*.from_pretrained(path, trust_remote_code=True)` works for each head without the package.
AUTO_MAP = {
    "AutoConfig": "configuration_hf_roformer.HfRoFormerConfig",
    "AutoModel": "modeling_hf_roformer.HfRoFormerModel",
    "AutoModelForMaskedLM": "modeling_hf_roformer.HfRoFormerForMaskedLM",
    "AutoModelForCausalLM": "modeling_hf_roformer.HfRoFormerForCausalLM",
    "AutoModelForSequenceClassification": "modeling_hf_roformer.HfRoFormerForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_hf_roformer.HfRoFormerForTokenClassification",
    "AutoModelForMultipleChoice": "modeling_hf_roformer.HfRoFormerForMultipleChoice",
    "AutoModelForQuestionAnswering": "modeling_hf_roformer.HfRoFormerForQuestionAnswering",
}
# Tensor parallelism of cross-attention (decoders with `add_cross_attention`), as `base_model_tp_plan` splits
# self-attention: each rank holds the same heads of both.
CROSS_ATTENTION_TP_PLAN = {
    "encoder.layer.*.crossattention.self.query": "colwise",
    "encoder.layer.*.crossattention.self.key": "colwise",
    "encoder.layer.*.crossattention.self.value": "colwise",
    "encoder.layer.*.crossattention.output.dense": "rowwise",
}
# In-place forms of `ACT2FN` activations (the same kernels, writing into their input), for inference.
IN_PLACE_ACTIVATIONS = {
    "gelu": torch.ops.aten.gelu_,
    "relu": torch.relu_,
    "silu": torch.ops.aten.silu_,
    "swish": torch.ops.aten.silu_,
}
# Type hints of the inputs every forward takes.
TokenIds = torch.LongTensor | None
Floats = torch.Tensor | None


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
        self, hidden_states: torch.Tensor, plan: BatchPlan, cache: Cache | None = None, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend over the sequence (and the cached keys/values of earlier steps); returns output and weights.

        `kwargs` reach the attention function unchanged, with the plan's own backend arguments (a variable-length
        kernel's sequence boundaries). In SDPA's place: its variable-length kernel over a packed row, and blockwise
        attention when attention dropout on CPU would send SDPA to its math path (batch x heads x L x L probabilities
        and dropout mask kept per layer)."""
        query, key, value = self.query(hidden_states), self.key(hidden_states), self.value(hidden_states)
        rotation, cache = plan.rotation, self_attention_cache(cache)
        if isinstance(rotation, PerQueryRotation) and rotation.key_cos is None:
            heads = (*hidden_states.shape[:-1], -1, self.head_dim)
            query, key, value = (states.view(heads).transpose(1, 2) for states in (query, key, value))
            output, weights = self._attend_with_keys_rotated_per_query(query, key, value, rotation, cache)
        else:
            query, key, value = self._rotate_and_cache(query, key, value, rotation, cache)
            attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
                self.config._attn_implementation, eager_attention_forward
            )
            attention_kwargs = {**plan.attention_kwargs, **kwargs}
            if self.config._attn_implementation == "sdpa":
                if "cu_seq_lens_q" in attention_kwargs:
                    attention_interface = varlen_attention_forward  # a packed row: the variable-length kernel
                elif blockwise_attention_applies(query, self.attention_dropout):
                    attention_interface = blockwise_attention_forward
                elif traces_graph() and (plan.attention_mask is not None or not self.is_causal):
                    attention_interface = masked_sdpa_forward  # graphs for any length, 1 included
            output, weights = attention_interface(
                self,
                query,
                key,
                value,
                plan.attention_mask,
                dropout=self.attention_dropout,
                scaling=self.scaling,
                **attention_kwargs,
            )
        return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights

    def _rotate_and_cache(self, query, key, value, rotation, cache) -> tuple[torch.Tensor, ...]:
        """The projections `(batch, seq, hidden)` as rotated heads `(batch, heads, seq, head_dim)`, the keys and values
        extended by the cache.

        Per-token rotations rotate before caching, on the projections' own layout (they are fresh tensors nobody else
        reads: inference may rotate them in place). Length-dependent rope in a decoder (`PerQueryRotation` with one
        frequency set) caches keys and values unrotated and rotates them with the queries' frequencies."""
        heads = (*query.shape[:-1], -1, self.head_dim)
        if isinstance(rotation, PerQueryRotation):
            query, key, value = (states.view(heads).transpose(1, 2) for states in (query, key, value))
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx)
            query = rotate_interleaved(query, rotation.cos, rotation.sin)
            if self.rotary_value:
                value = rotate_interleaved(value, rotation.key_cos, rotation.key_sin)
            return query, rotate_interleaved(key, rotation.key_cos, rotation.key_sin), value
        projections = (query, key, value) if self.rotary_value else (query, key)
        rotated = rotation.rotate_projections(self.head_dim, *projections, in_place=True)
        query, key = rotated[0], rotated[1]
        value = rotated[2] if self.rotary_value else value.view(heads).transpose(1, 2)
        if cache is not None:
            key, value = cache.update(key, value, self.layer_idx)
        return query, key, value

    def _attend_with_keys_rotated_per_query(self, query, key, value, rotation: PerQueryRotation, cache):
        """Length-dependent rope in a decoder where the queries' frequencies differ: each query rotates the
        (unrotated, cached) keys with its own, which no attention backend does."""
        if cache is not None:
            key, value = cache.update(key, value, self.layer_idx)
        return per_query_rotary_attention(
            query,
            key,
            value,
            rotation,
            self.scaling,
            dropout=self.attention_dropout,
            training=self.training,
            rotary_value=self.rotary_value,
        )


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
        self, hidden_states: torch.Tensor, plan: BatchPlan, cache: Cache | None = None, **kwargs
    ) -> tuple[torch.Tensor, None]:
        """Attend with eq. 19; the plan's mask is the 2D padding mask of the current tokens (1 = real)."""
        query = self.split_heads(self.query, hidden_states)
        key = self.split_heads(self.key, hidden_states)
        value = self.split_heads(self.value, hidden_states)
        rotation = plan.rotation
        if self.rotary_value:
            (value,) = rotation.rotate(value)
        features = linear_attention_features(
            query,
            key,
            lambda x: rotation.rotate(x)[0],
            self.config.linear_feature_map,
            self.config.linear_rotation_order,
            plan.attention_mask,
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
        plan: BatchPlan,
        encoder_hidden_states: torch.Tensor,
        cache: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from the decoder states to the encoder states, projecting the latter once per generation."""
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
            plan.encoder_attention_mask,
            dropout=self.attention_dropout,
            scaling=self.scaling,
            **kwargs,
        )
        return attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous(), attn_weights


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
            with input_recomputed_in_backward(hidden_states, recompute_input):
                hidden_states = self.dense(hidden_states)
        if self.training:  # dropout is the identity in evaluation: not dispatched at all there
            hidden_states = self.dropout(hidden_states)
        # The projection (or its dropout) is a fresh tensor that nothing keeps for the backward pass: the residual is
        # added in place, one hidden-size tensor less allocated per block. Not where the sum's dtype or shape differ,
        # nor on a view that records gradients (the projection of 3D states without dropout), whose in-place update
        # autograd would replay with copies in the backward pass.
        in_place = hidden_states.dtype == input_tensor.dtype and hidden_states.shape == input_tensor.shape
        if in_place and not (hidden_states.requires_grad and is_view_of_another_tensor(hidden_states)):
            return self.LayerNorm(hidden_states.add_(input_tensor))
        return self.LayerNorm(hidden_states + input_tensor)


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
        """The activation of the expanded states; in place where no gradient is recorded and the activation has an
        in-place form, so inference allocates no second intermediate-size tensor (the feed-forward block's peak)."""
        in_place = IN_PLACE_ACTIVATIONS.get(self.hidden_act)
        if in_place is None or torch.compiler.is_compiling() or (torch.is_grad_enabled() and expanded.requires_grad):
            return self.intermediate_act_fn(expanded)
        return in_place(expanded)


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
        plan: BatchPlan,
        encoder_hidden_states: torch.Tensor | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """Transform `hidden_states` in the layout, with the masks and rotations, of the forward's `plan`."""
        hidden_states = self.attention(hidden_states, plan, cache=cache, **kwargs)
        if encoder_hidden_states is not None:
            hidden_states = self.crossattention(
                hidden_states, plan, encoder_hidden_states, cache=cache, **kwargs
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
        """Whether this forward records a backward pass in which the activation would otherwise be stored twice (and
        autograd does: not under `torch.func` transforms, whose tensors have no storage to recognize it by)."""
        recorded = (
            torch.is_grad_enabled()
            and attention_output.requires_grad
            and not (self.gradient_checkpointing and self.training)
            and not torch.compiler.is_compiling()
        )
        if not recorded:
            return False
        try:
            attention_output.untyped_storage()
        except (NotImplementedError, RuntimeError):  # a torch.func wrapper
            return False
        return True


class HfRoFormerEncoder(nn.Module):
    """The stack of layers (`encoder.layer.N`, the parameter names of transformers' RoFormer)."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.layer = nn.ModuleList([HfRoFormerLayer(config, layer_idx=i) for i in range(config.num_hidden_layers)])

    def forward(
        self,
        hidden_states: torch.Tensor,
        plan: BatchPlan,
        encoder_hidden_states: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """Run every layer in turn (extra keyword arguments are passed to each layer)."""
        for layer in self.layer:
            # hidden states and encoder states positionally, so reentrant gradient checkpointing propagates gradients
            hidden_states = layer(hidden_states, plan, encoder_hidden_states, **kwargs)
        return hidden_states


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


class HfRoFormerPreTrainedModel(PreTrainedModel):
    """Weight initialization, attention-backend capabilities and saving shared by every RoFormer model."""

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

    @classmethod
    def maybe_distribute_model(cls, model, distributed_config, *args, **kwargs):
        """transformers' step that shards a model being loaded with a `distributed_config`, after refusing a
        tensor-parallel size that would split an attention head between ranks."""
        tp_size = getattr(distributed_config, "tp_size", None) or 1
        heads = model.config.num_attention_heads
        if tp_size > 1 and heads % tp_size:
            divisors = [size for size in range(2, heads + 1) if heads % size == 0]
            raise ValueError(
                f"Tensor parallelism gives each rank whole attention heads: `tp_size` {tp_size} must divide "
                f"`num_attention_heads` {heads}; use a tp_size among {divisors}."
            )
        return super().maybe_distribute_model(model, distributed_config, *args, **kwargs)

    # The Hub task of this head, written to saved and pushed cards (`model_card_hf_roformer`).
    pipeline_tag: str | None = None

    def post_init(self):
        """transformers' end-of-construction step, plus the family's Hub tags (`model.add_model_tags` adds more)."""
        super().post_init()
        self.add_model_tags(list(MODEL_TAGS))

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as any `PreTrainedModel` does, with an `auto_map` naming every head and the model's source files, so
        that `AutoModel*.from_pretrained(path, trust_remote_code=True)` works where hf_roformer is not installed, and
        a card carrying `library_name`, `pipeline_tag` and the model tags (keys an existing card lacks are added).

        A model that torch gave a class made at run time (FSDP2 makes `FSDP<class>`, defined in a torch module) is
        saved as its own class: transformers names the saved class and copies the sources from the object's class,
        which would write torch's files and a wrapper class name into the `auto_map`."""
        wrapper = type(self)
        self.__class__ = next(cls for cls in wrapper.__mro__ if not cls.__module__.startswith("torch."))
        try:
            self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **AUTO_MAP}
            result = super().save_pretrained(save_directory, *args, **kwargs)
            if kwargs.get("is_main_process", True) and Path(save_directory).is_dir():
                add_card_metadata(save_directory, self.card_metadata(), type(self).__name__)
                write_sentence_transformers_files(save_directory, self.config)
        finally:
            self.__class__ = wrapper
        return result

    def card_metadata(self) -> dict:
        """The Hub metadata of this model: `library_name`, this head's `pipeline_tag` and `model_tags`."""
        return card_metadata("transformers", self.pipeline_tag, self.model_tags)

    def _upload_modified_files(self, working_dir, *args, **kwargs):
        """transformers' upload step of `push_to_hub`, after giving the card it wrote this model's Hub metadata."""
        add_card_metadata(working_dir, self.card_metadata(), type(self).__name__)
        return super()._upload_modified_files(working_dir, *args, **kwargs)


class HfRoFormerPooler(nn.Module):
    """Sentence vector from the first token ([CLS]): dense layer with tanh (BERT's pooler) or without activation
    (RoFormer-Sim's linear pooler, whose cosine similarity compares sentences)."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh() if config.pooler_activation == "tanh" else nn.Identity()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Pooled vector of each sequence."""
        return self.activation(self.dense(hidden_states[:, 0]))


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
        check_model_inputs(
            self.config, input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
            position_ids=position_ids, inputs_embeds=inputs_embeds, encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            past_length=cache.get_seq_length() if cache is not None else 0,
        )
        if token_type_ids is not None and token_type_ids.dim() == 1:  # one row's segment ids (vLLM's scoring call)
            token_type_ids = token_type_ids[None]
        use_cache = bool(use_cache) and self.config.is_decoder
        if use_cache:
            cache = self._prepare_cache(cache, encoder_hidden_states)
        hidden_states = self.embeddings(input_ids, token_type_ids, inputs_embeds)
        if hasattr(self, "embeddings_project"):
            hidden_states = self.embeddings_project(hidden_states)
        if self.pooler is not None:  # the pooler reads the first position of every row
            read_positions = "all" if read_positions == "all" else (0, *(read_positions or ()))
        plan = plan_batch(
            self.config, hidden_states, self.rotary_emb, attention_mask=attention_mask, position_ids=position_ids,
            token_type_ids=token_type_ids, cache=cache, encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask, read_positions=read_positions, training=self.training,
            attention_kwargs=kwargs,
        )
        hidden_states = self.encoder(
            plan.pack(hidden_states), plan, encoder_hidden_states, cache=cache, **plan.layer_kwargs
        )
        sequence_output = plan.unpack(hidden_states)
        if use_cache and self.config.attention_type == "linear":
            self_attention_cache(cache).seen_tokens += sequence_output.shape[1]
        return BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=sequence_output,
            pooler_output=self.pooler(sequence_output) if self.pooler is not None else None,
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
        loss pairs each label with the logits one position earlier, which may be padding (left or middle padding).
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
            shifted = kwargs.get("shift_labels", labels[:, 1:])
            loss_kwargs = with_labelled_token_count(shifted, kwargs)
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **loss_kwargs)
        return CausalLMOutputWithCrossAttentions(
            loss=loss,
            logits=logits,
            **cache_output(output_cache(outputs)),
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            cross_attentions=outputs.cross_attentions,
        )


class HfRoFormerClassificationHead(nn.Module):
    """Sentence-level head on the first token ([CLS]): dropout, dense, activation, dropout, projection to labels."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)
        self.activation = ACT2FN[config.hidden_act]

    def forward(self, sequence_output: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label logits from the first token's hidden state."""
        features = self.dropout(sequence_output[:, 0, :])
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


class HfRoFormerForSequenceClassification(HfRoFormerTaskModel):
    """RoFormer with a sentence-level head: single-label or multi-label classification, or regression
    (`num_labels=1`), chosen by `config.problem_type` or inferred from the labels as transformers does.

    `config.classifier_pooling` picks the head: "cls" (first token, as transformers' RoFormer) or "mean" (masked
    mean over tokens, as the original CAIL2019-SCM recipe).
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
            self.read_positions = (0,)
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
            check_values("labels", labels, labels.isfinite(), "regression targets must be finite numbers")
        else:
            check_values("labels", labels, (labels >= 0) & (labels <= 1), "multi-label targets must lie in [0, 1]")


class HfRoFormerForMultipleChoice(HfRoFormerTaskModel):
    """RoFormer scoring each of several candidate sequences; inputs are `(batch, num_choices, seq_len)`.

    Each choice is scored from the hidden state at its last position, as transformers' `RoFormerForMultipleChoice`
    does (its sequence summary defaults to "last"), so checkpoints trained with it keep their meaning.
    """

    _auto_class = "AutoModelForMultipleChoice"
    pipeline_tag = "multiple-choice"
    output_type = MultipleChoiceModelOutput
    read_positions = (-1,)
    scores_choices = True

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def logits(self, sequence_output, attention_mask):
        """One score per choice, from its last position."""
        return self.classifier(sequence_output[:, -1])

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
                check_values(name, positions, positions >= 0, "answer positions must be >= 0")
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
