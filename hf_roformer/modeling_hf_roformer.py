"""PyTorch RoFormer: a BERT-style transformer whose attention encodes positions by rotating queries and keys (RoPE).

Module and parameter names are those of transformers' `RoFormer*` classes, so their checkpoints (and LoRA target
names) load unchanged; attention runs through transformers' attention interface (eager, sdpa, flash, flex) and the
rotary angles are computed per forward from `position_ids`, so there is no length limit.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
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
from transformers.pytorch_utils import apply_chunking_to_forward
from transformers.utils import logging
from transformers.utils.generic import can_return_tuple, merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .configuration_hf_roformer import HfRoFormerConfig
from .linear_attention_hf_roformer import (
    HfRoFormerLinearAttentionCache,
    bidirectional_linear_attention,
    causal_linear_attention,
    check_linear_attention_rope,
    linear_attention_features,
)
from .model_card_hf_roformer import MODEL_TAGS, add_card_metadata, card_metadata
from .padding_free_hf_roformer import (
    UnpaddedBatch,
    packed_row_boundaries,
    unpad_batch,
    varlen_attention_forward,
    varlen_kernel_applies,
)
from .rope_scaling_hf_roformer import rope_attention_factor
from .rotary_hf_roformer import (
    HfRoFormerRotaryEmbedding,
    PerQueryRotation,
    apply_rotary_pos_emb,
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


def check_ids_in_range(ids: torch.Tensor, size: int, name: str, size_name: str) -> None:
    """Raise a `ValueError` when `ids` holds a value outside `[0, size)`, before an embedding lookup turns it into an
    opaque index error (CPU) or a device-side assert (CUDA). Skipped while compiling, where it would break the graph."""
    if torch.compiler.is_compiling() or ids.numel() == 0:
        return
    low, high = (int(value) for value in torch.aminmax(ids))
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise ValueError(
            f"`{name}` contains {bad}, outside the valid range [0, {size - 1}] given by `{size_name}`={size}; "
            "check that the tokenizer (or segment ids) match the model."
        )


def packed_sequence_ids(position_ids: torch.Tensor | None) -> torch.Tensor | None:
    """For rows packing several sequences (positions restarting at 0, as `DataCollatorWithFlattening` makes them), the
    index of the sequence each token belongs to; None for ordinary rows (or while compiling, where it is not checked).
    """
    if position_ids is None or position_ids.shape[-1] < 2 or torch.compiler.is_compiling():
        return None
    restarts = position_ids[..., 1:] <= position_ids[..., :-1]
    if not bool(restarts.any()):
        return None
    return (position_ids == 0).long().cumsum(dim=-1)


def sequence_lengths(position_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Length of the sequence each token of an encoder batch belongs to, `(batch, seq)`: the sequence's largest real
    position + 1 (padding excluded; each sequence of a packed row separately)."""
    if attention_mask is not None:
        position_ids = position_ids.expand(attention_mask.shape[0], -1).masked_fill(attention_mask == 0, -1)
    sequence_ids = packed_sequence_ids(position_ids) if attention_mask is None else None
    if sequence_ids is None:
        return (position_ids.max(dim=-1, keepdim=True).values + 1).expand_as(position_ids)
    longest = torch.full((position_ids.shape[0], int(sequence_ids.max()) + 1), -1, device=position_ids.device)
    longest = longest.scatter_reduce(1, sequence_ids, position_ids, reduce="amax")
    return longest.gather(1, sequence_ids) + 1


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
    """Token plus segment embeddings, then norm and dropout (RoFormer-V2: dropout, then norm). Positions enter later,
    as rotations in attention."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.embedding_size)
        self.LayerNorm = make_norm(config, config.embedding_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.dropout_before_norm = config.norm_type == "rms_norm"

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Embed `input_ids` (or take `inputs_embeds`) and add the segment embeddings of `token_type_ids`."""
        if inputs_embeds is None:
            check_ids_in_range(input_ids, self.word_embeddings.num_embeddings, "input_ids", "vocab_size")
            inputs_embeds = self.word_embeddings(input_ids)
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


def self_attention_cache(past_key_values: Cache | None) -> Cache | None:
    """The cache self-attention writes to (the self-attention half of an encoder-decoder cache)."""
    if isinstance(past_key_values, EncoderDecoderCache):
        return past_key_values.self_attention_cache
    return past_key_values


class HfRoFormerAttentionBase(nn.Module):
    """Query, key and value projections under their checkpoint names, and the call into the configured attention
    backend; shared by the self-, linear- and cross-attention modules."""

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

    def attend(self, query, key, value, attention_mask, **kwargs) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Rotated queries, keys and values through the configured attention backend (SDPA over a packed row with
        sequence boundaries goes to its variable-length kernel)."""
        if "cu_seq_lens_q" in kwargs and self.config._attn_implementation == "sdpa":
            return varlen_attention_forward(
                self,
                query,
                key,
                value,
                attention_mask,
                self.scaling,
                self.dropout_prob if self.training else 0.0,
                **kwargs,
            )
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        return attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.dropout_prob if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )


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
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | PerQueryRotation,
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend over the sequence (and the cached keys/values of earlier steps); returns output and weights."""
        query = self.split_heads(self.query, hidden_states)
        key = self.split_heads(self.key, hidden_states)
        value = self.split_heads(self.value, hidden_states)
        cache = self_attention_cache(past_key_values)
        if isinstance(position_embeddings, PerQueryRotation):
            attn_output, attn_weights = self._attend_rotating_per_query(
                query, key, value, position_embeddings, attention_mask, cache, **kwargs
            )
        else:
            cos, sin = position_embeddings
            query, key, rotated_value = apply_rotary_pos_emb(
                query, key, cos, sin, value=value if self.rotary_value else None
            )
            if rotated_value is not None:
                value = rotated_value
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx)
            attn_output, attn_weights = self.attend(query, key, value, attention_mask, **kwargs)
        return attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous(), attn_weights

    def _attend_rotating_per_query(self, query, key, value, rotation, attention_mask, cache, **kwargs):
        """Length-dependent rope in a decoder: keys and values are cached unrotated and rotated with the queries'
        frequencies, which grow with the length each query sees."""
        if cache is not None:
            key, value = cache.update(key, value, self.layer_idx)
        if rotation.key_cos is None:
            return per_query_rotary_attention(
                query,
                key,
                value,
                rotation,
                self.scaling,
                dropout=self.dropout_prob if self.training else 0.0,
                training=self.training,
                rotary_value=self.rotary_value,
            )
        query = rotate_interleaved(query, rotation.cos, rotation.sin)
        if self.rotary_value:
            value = rotate_interleaved(value, rotation.key_cos, rotation.key_sin)
        key = rotate_interleaved(key, rotation.key_cos, rotation.key_sin)
        return self.attend(query, key, value, attention_mask, **kwargs)


class HfRoFormerLinearSelfAttention(HfRoFormerAttentionBase):
    """RoPE with linear attention (paper eq. 19): O(N) in the sequence length, same parameters as softmax attention.

    Encoders use the associative form over the whole sequence; decoders use chunked prefix sums and, with a cache, a
    constant-size recurrent state per layer. Attention weights are never materialized (`output_attentions` gives
    none, and `attention_probs_dropout_prob` has no probabilities to drop), and a rope type's attention factor has no
    softmax to act on, so it is not applied.
    """

    def __init__(self, config: HfRoFormerConfig, layer_idx: int | None = None):
        check_linear_attention_rope(config)  # again here: `is_decoder` may be set after the config was built
        super().__init__(config, layer_idx, is_causal=config.is_decoder)
        self.rotary_value = config.rotary_value

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, None]:
        """Attend with eq. 19. `attention_mask` is the 2D padding mask of the current tokens (1 = real)."""
        query = self.split_heads(self.query, hidden_states)
        key = self.split_heads(self.key, hidden_states)
        value = self.split_heads(self.value, hidden_states)
        cos, sin = position_embeddings
        if self.rotary_value:
            value = rotate_interleaved(value, cos, sin)
        features = linear_attention_features(
            query,
            key,
            lambda x: rotate_interleaved(x, cos, sin),
            self.config.linear_feature_map,
            self.config.linear_rotation_order,
            attention_mask,
        )
        eps = self.config.linear_attention_eps
        if not self.is_causal:
            output = bidirectional_linear_attention(features, value, eps)
        else:
            cache = self_attention_cache(past_key_values)
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
        past_key_values: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from the decoder states to the encoder states, projecting the latter once per generation."""
        query = self.split_heads(self.query, hidden_states)
        is_updated = past_key_values is not None and past_key_values.is_updated.get(self.layer_idx, False)
        if is_updated:
            layer_cache = past_key_values.cross_attention_cache.layers[self.layer_idx]
            key, value = layer_cache.keys, layer_cache.values
        else:
            key = self.split_heads(self.key, encoder_hidden_states)
            value = self.split_heads(self.value, encoder_hidden_states)
            if past_key_values is not None:
                key, value = past_key_values.cross_attention_cache.update(key, value, self.layer_idx)
                past_key_values.is_updated[self.layer_idx] = True
        attn_output, attn_weights = self.attend(query, key, value, attention_mask, **kwargs)
        return attn_output.reshape(*hidden_states.shape[:-1], -1).contiguous(), attn_weights


class HfRoFormerSelfOutput(nn.Module):
    """Output projection of an attention block, dropout, residual connection and post layer norm."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=config.use_bias)
        self.LayerNorm = make_norm(config, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        """Project `hidden_states` and add them to the block input `input_tensor` before normalizing."""
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class HfRoFormerAttention(nn.Module):
    """An attention block: self- or cross-attention (`.self`) followed by its output projection (`.output`)."""

    def __init__(self, config: HfRoFormerConfig, layer_idx: int | None = None, is_cross_attention: bool = False):
        super().__init__()
        self.is_cross_attention = is_cross_attention
        if is_cross_attention:
            attention_class = HfRoFormerCrossAttention
        elif config.attention_type == "linear":
            attention_class = HfRoFormerLinearSelfAttention
        else:
            attention_class = HfRoFormerSelfAttention
        self.self = attention_class(config, layer_idx=layer_idx)
        self.output = HfRoFormerSelfOutput(config)

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

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Expand and activate."""
        return self.intermediate_act_fn(self.dense(hidden_states))


class HfRoFormerOutput(nn.Module):
    """Second half of the feed-forward block: projection back, dropout, residual and post layer norm."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size, bias=config.use_bias)
        self.LayerNorm = make_norm(config, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        """Project the activations and add them to the block input `input_tensor` before normalizing."""
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class HfRoFormerLayer(GradientCheckpointingLayer):
    """One transformer layer: self-attention, optional cross-attention (decoders), feed-forward; all post-norm."""

    def __init__(self, config: HfRoFormerConfig, layer_idx: int | None = None):
        super().__init__()
        self.chunk_size_feed_forward = config.chunk_size_feed_forward
        self.is_decoder = config.is_decoder
        self.attention = HfRoFormerAttention(config, layer_idx=layer_idx)
        if config.add_cross_attention:
            self.crossattention = HfRoFormerAttention(config, layer_idx=layer_idx, is_cross_attention=True)
        self.intermediate = HfRoFormerIntermediate(config)
        self.output = HfRoFormerOutput(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """Transform `hidden_states`; `position_embeddings` are the (cos, sin) of the tokens' positions."""
        attention_output = self.attention(
            hidden_states, position_embeddings, attention_mask, past_key_values=past_key_values, **kwargs
        )
        if encoder_hidden_states is not None:
            if not hasattr(self, "crossattention"):
                raise ValueError(
                    "`encoder_hidden_states` were passed but the model has no cross-attention layers; build it with "
                    "`is_decoder=True, add_cross_attention=True`."
                )
            attention_output = self.crossattention(
                attention_output,
                encoder_hidden_states,
                encoder_attention_mask,
                past_key_values=past_key_values,
                **kwargs,
            )
        return apply_chunking_to_forward(self.feed_forward_chunk, self.chunk_size_feed_forward, 1, attention_output)

    def feed_forward_chunk(self, attention_output: torch.Tensor) -> torch.Tensor:
        """Feed-forward block on (a chunk of) the attention output."""
        return self.output(self.intermediate(attention_output), attention_output)


class HfRoFormerEncoder(nn.Module):
    """The stack of layers (`encoder.layer.N`, the parameter names of transformers' RoFormer)."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.layer = nn.ModuleList([HfRoFormerLayer(config, layer_idx=i) for i in range(config.num_hidden_layers)])

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        """Run every layer in turn (extra keyword arguments are passed to each layer)."""
        for layer in self.layer:
            # hidden states and encoder states positionally, so reentrant gradient checkpointing propagates gradients
            hidden_states = layer(
                hidden_states,
                attention_mask,
                encoder_hidden_states,
                encoder_attention_mask=encoder_attention_mask,
                **kwargs,
            )
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


class HfRoFormerLMPredictionHead(nn.Module):
    """Vocabulary logits: transform, then the (tied) embedding matrix plus an output-only bias. RoFormer-V2's head is
    the bare tied embedding matrix (no transform, no bias)."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        if is_bare_lm_head(config):
            self.decoder = nn.Linear(config.embedding_size, config.vocab_size, bias=False)
            return
        self.transform = HfRoFormerPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size, bias=True)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Logits over the vocabulary."""
        if hasattr(self, "transform"):
            hidden_states = self.transform(hidden_states)
        return self.decoder(hidden_states)


def is_bare_lm_head(config: HfRoFormerConfig) -> bool:
    """RoFormer-V2 (`norm_type="rms_norm"`) predicts tokens with the tied embedding alone."""
    return config.norm_type == "rms_norm"


LM_HEAD_TIES = {
    "cls.predictions.decoder.bias": "cls.predictions.bias",
    "cls.predictions.decoder.weight": "roformer.embeddings.word_embeddings.weight",
}


def lm_head_ties(config: HfRoFormerConfig) -> dict[str, str]:
    """Tied parameters of a language-modeling head: the embedding matrix, and the bias when the head has one."""
    if is_bare_lm_head(config):
        return {"cls.predictions.decoder.weight": "roformer.embeddings.word_embeddings.weight"}
    return dict(LM_HEAD_TIES)


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
    _no_split_modules = ["HfRoFormerEmbeddings", "HfRoFormerLayer"]
    _supports_flash_attn = True
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    # transformers' RoFormer stores a sinusoid table; RoPE here is computed from positions, so the table is unused.
    _keys_to_ignore_on_load_unexpected = [r"encoder\.embed_positions\.weight"]
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

    # The Hub task of this head, written to saved and pushed cards (`model_card_hf_roformer`).
    pipeline_tag: str | None = None

    def post_init(self):
        """transformers' end-of-construction step, plus the family's Hub tags (`model.add_model_tags` adds more)."""
        super().post_init()
        self.add_model_tags(list(MODEL_TAGS))

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as any `PreTrainedModel` does, with an `auto_map` naming every head and the model's source files, so
        that `AutoModel*.from_pretrained(path, trust_remote_code=True)` works where hf_roformer is not installed, and
        a card carrying `library_name`, `pipeline_tag` and the model tags (keys an existing card lacks are added)."""
        self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **AUTO_MAP}
        result = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True) and Path(save_directory).is_dir():
            add_card_metadata(save_directory, self.card_metadata(), type(self).__name__)
            write_sentence_transformers_files(save_directory, self.config)
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


def same_sequence_mask_function(sequence_ids: torch.Tensor):
    """Mask function letting a token attend only within its own packed sequence."""

    def allowed(batch_idx, head_idx, q_idx, kv_idx):
        return sequence_ids[batch_idx, q_idx] == sequence_ids[batch_idx, kv_idx]

    return allowed


def unilm_mask_function(token_type_ids: torch.Tensor):
    """UniLM's sequence-to-sequence mask (RoFormer-Sim): with idx = cumsum(token_type_ids), position i may attend to
    j iff idx[j] <= idx[i]; the source (segment 0) sees itself, the target (segment 1) the source and its past."""
    segment_index = token_type_ids.cumsum(dim=-1)

    def allowed(batch_idx, head_idx, q_idx, kv_idx):
        return segment_index[batch_idx, kv_idx] <= segment_index[batch_idx, q_idx]

    return allowed


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

    def get_input_embeddings(self) -> nn.Embedding:
        """The token embedding matrix."""
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        """Replace the token embedding matrix (e.g. after resizing the vocabulary)."""
        self.embeddings.word_embeddings = value

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPoolingAndCrossAttentions:
        """Encode a batch.

        Args:
            input_ids: Token ids `(batch, seq_len)`; exactly one of `input_ids` and `inputs_embeds` is required.
            attention_mask: 1 for real tokens, 0 for padding, `(batch, seq_len)` (or `(batch, past + seq_len)` with a
                cache).
            token_type_ids: Segment ids, default 0.
            position_ids: Positions whose rotations are applied, `(batch or 1, seq_len)`; default `arange` continuing
                after the cached length. Any non-negative integers work: RoPE has no table.
            inputs_embeds: Precomputed token embeddings `(batch, seq_len, embedding_size)`.
            encoder_hidden_states: Encoder output a decoder with cross-attention attends to.
            encoder_attention_mask: Padding mask of `encoder_hidden_states`.
            past_key_values: Key/value cache of earlier decoding steps (decoders only).
            use_cache: Return an updated cache (decoders only).
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of `input_ids` and `inputs_embeds`.")
        use_cache = bool(use_cache) and self.config.is_decoder
        linear = self.config.attention_type == "linear"
        if use_cache:
            past_key_values = self._prepare_cache(past_key_values, encoder_hidden_states)

        embedding_output = self.embeddings(input_ids, token_type_ids, inputs_embeds)
        if hasattr(self, "embeddings_project"):
            embedding_output = self.embeddings_project(embedding_output)

        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        seq_length = embedding_output.shape[1]
        if position_ids is None:
            position_ids = torch.arange(past_length, past_length + seq_length, device=embedding_output.device)
            position_ids = position_ids.unsqueeze(0)
        position_embeddings = self._rotary_embeddings(position_ids, attention_mask, past_length)

        unpadded = self._unpadded_batch(
            attention_mask, embedding_output, position_embeddings, past_key_values, encoder_hidden_states, kwargs
        )
        if unpadded is not None:
            embedding_output = unpadded.pack(embedding_output)
            position_ids = unpadded.pack(position_ids)
            position_embeddings = tuple(unpadded.pack(rotation) for rotation in position_embeddings)
            attention_mask = self._packed_attention_mask(unpadded, embedding_output, kwargs)
        elif (
            boundaries := self._packed_row_boundaries(
                attention_mask,
                position_ids,
                embedding_output,
                position_embeddings,
                past_key_values,
                encoder_hidden_states,
                kwargs,
            )
        ) is not None:
            kwargs.update(boundaries)  # a packed row on a variable-length kernel: sequence boundaries, no mask
            attention_mask = None
        elif linear:  # linear attention takes the padding mask of the current tokens, not an attention-score mask
            if attention_mask is not None:
                attention_mask = attention_mask[:, -seq_length:]
        else:
            attention_mask = self._self_attention_mask(
                attention_mask,
                embedding_output,
                past_key_values,
                position_ids,
                token_type_ids if past_length == 0 else None,
            )
        if encoder_attention_mask is not None:
            encoder_attention_mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=embedding_output,
                attention_mask=encoder_attention_mask,
                encoder_hidden_states=encoder_hidden_states,
            )
        sequence_output = self.encoder(
            embedding_output,
            attention_mask,
            encoder_hidden_states,
            encoder_attention_mask,
            position_embeddings=position_embeddings,
            past_key_values=past_key_values,
            position_ids=position_ids,
            **kwargs,
        )
        if unpadded is not None:
            sequence_output = unpadded.unpack(sequence_output)
        if linear and use_cache:
            linear_cache = past_key_values
            if isinstance(linear_cache, EncoderDecoderCache):
                linear_cache = linear_cache.self_attention_cache
            linear_cache.seen_tokens += seq_length
        return BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=sequence_output,
            pooler_output=self.pooler(sequence_output) if self.pooler is not None else None,
            past_key_values=past_key_values if use_cache else None,
        )

    def _prepare_cache(self, past_key_values: Cache | None, encoder_hidden_states) -> Cache:
        """The cache to decode with: key/value caches for softmax attention, recurrent states for linear attention
        (an empty standard cache handed in, e.g. by `EncoderDecoderModel.generate`, is swapped for one)."""
        with_cross = encoder_hidden_states is not None or self.config.is_encoder_decoder
        if self.config.attention_type != "linear":
            if past_key_values is not None:
                return past_key_values
            if with_cross:
                return EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
            return DynamicCache(config=self.config)

        def linear_state(cache):
            if isinstance(cache, HfRoFormerLinearAttentionCache):
                return cache
            if cache is None or cache.get_seq_length() == 0:
                return HfRoFormerLinearAttentionCache(self.config.num_hidden_layers)
            raise ValueError(
                f"Linear attention decodes with a HfRoFormerLinearAttentionCache, got a filled {type(cache).__name__}."
            )

        if isinstance(past_key_values, EncoderDecoderCache):
            past_key_values.self_attention_cache = linear_state(past_key_values.self_attention_cache)
            return past_key_values
        if with_cross:
            return EncoderDecoderCache(linear_state(past_key_values), DynamicCache(config=self.config))
        return linear_state(past_key_values)

    def _rotary_embeddings(self, position_ids, attention_mask, past_length):
        """The rotations every layer applies: cos/sin per token, or per-query state for length-dependent rope types in
        decoders (so cached decoding equals a full forward)."""
        padding_mask = attention_mask if attention_mask is not None and attention_mask.dim() == 2 else None
        if not self.rotary_emb.depends_on_length:
            return self.rotary_emb(position_ids)
        if self.config.is_decoder:
            return self.rotary_emb.per_query(position_ids, past_length, padding_mask)
        return self.rotary_emb(position_ids, lengths=sequence_lengths(position_ids, padding_mask))

    def _attends_packed(self, position_embeddings, past_key_values, encoder_hidden_states) -> bool:
        """Whether this forward can attend over one row packing several sequences: it never looks across rows or at
        padded shapes (no cache, no cross-attention, no UniLM mask, softmax attention, per-token rotations), and it
        is not being compiled, where the data-dependent token count would break the graph."""
        config = self.config
        return not (
            past_key_values is not None
            or encoder_hidden_states is not None
            or torch.compiler.is_compiling()
            or config.unilm
            or config.attention_type == "linear"
            or isinstance(position_embeddings, PerQueryRotation)
        )

    def _varlen_kernel_runs(self, hidden_states) -> bool:
        """Whether the configured backend attends over a packed row with a variable-length kernel in this forward."""
        dropout = self.config.attention_probs_dropout_prob if self.training else 0.0
        return varlen_kernel_applies(self.config._attn_implementation, hidden_states, dropout)

    def _unpadded_batch(
        self, attention_mask, embedding_output, position_embeddings, past_key_values, encoder_hidden_states, kwargs
    ) -> UnpaddedBatch | None:
        """How to pack this padded batch into one row of real tokens (`config.padding_free`), or None to keep it:
        where packed attention applies and no per-layer outputs are asked for."""
        config = self.config
        if config.padding_free == "never" or attention_mask is None or attention_mask.dim() != 2:
            return None
        if not self._attends_packed(position_embeddings, past_key_values, encoder_hidden_states):
            return None
        if attention_mask.shape[1] != embedding_output.shape[1]:
            return None
        if any(
            kwargs.get(f"output_{name}", getattr(config, f"output_{name}")) for name in ("attentions", "hidden_states")
        ):
            return None
        if config.padding_free == "auto" and not self._varlen_kernel_runs(embedding_output):
            return None
        return unpad_batch(attention_mask)

    def _packed_row_boundaries(
        self,
        attention_mask,
        position_ids,
        embedding_output,
        position_embeddings,
        past_key_values,
        encoder_hidden_states,
        kwargs,
    ) -> dict | None:
        """For a row that already packs several sequences (`DataCollatorWithFlattening`: no mask, positions restarting
        at 0) on a backend with a variable-length kernel, where each sequence starts; None otherwise."""
        if attention_mask is not None or "cu_seq_lens_q" in kwargs:
            return None
        if not self._attends_packed(position_embeddings, past_key_values, encoder_hidden_states):
            return None
        if kwargs.get("output_attentions", self.config.output_attentions):
            return None
        if not self._varlen_kernel_runs(embedding_output):
            return None
        return packed_row_boundaries(position_ids)

    def _packed_attention_mask(self, unpadded: UnpaddedBatch, packed_embeddings, kwargs):
        """Mask of a packed row, keeping each token inside its sequence (and causal in decoders): none where a
        variable-length kernel runs, which takes the sequence boundaries in `kwargs` instead."""
        if self._varlen_kernel_runs(packed_embeddings):
            kwargs.update(unpadded.varlen_kwargs())
            return None
        same_sequence = same_sequence_mask_function(unpadded.sequence_ids)
        if self.config.is_decoder:
            return create_causal_mask(
                config=self.config,
                inputs_embeds=packed_embeddings,
                attention_mask=None,
                past_key_values=None,
                position_ids=None,  # positions may jump (middle padding); sequences come from `same_sequence`
                and_mask_function=same_sequence,
            )
        return create_bidirectional_mask(
            config=self.config, inputs_embeds=packed_embeddings, attention_mask=None, and_mask_function=same_sequence
        )

    def _self_attention_mask(
        self, attention_mask, embedding_output, past_key_values, position_ids, unilm_token_type_ids=None
    ):
        """The self-attention mask in the form the configured backend expects (None where none is needed).

        UniLM models get their sequence-to-sequence mask on a forward without cache; decoding steps after it append
        target tokens, which see everything before them: a causal mask over the cache.
        """
        if self.config.unilm:
            if self.config._attn_implementation.startswith("flash"):
                raise ValueError("`unilm=True` needs an attention backend that takes masks: eager, sdpa or flex.")
            if unilm_token_type_ids is not None or past_key_values is None or past_key_values.get_seq_length() == 0:
                token_type_ids = unilm_token_type_ids
                if token_type_ids is None:
                    token_type_ids = torch.zeros(
                        embedding_output.shape[:2], dtype=torch.long, device=embedding_output.device
                    )
                attention_mask = create_bidirectional_mask(
                    config=self.config,
                    inputs_embeds=embedding_output,
                    attention_mask=attention_mask,
                    and_mask_function=unilm_mask_function(token_type_ids),
                    allow_is_bidirectional_skip=False,
                )
            else:
                attention_mask = create_causal_mask(
                    config=self.config,
                    inputs_embeds=embedding_output,
                    attention_mask=attention_mask,
                    past_key_values=past_key_values,
                    position_ids=position_ids,
                    allow_is_causal_skip=False,
                )
        elif self.config.is_decoder:
            attention_mask = create_causal_mask(
                config=self.config,
                inputs_embeds=embedding_output,
                attention_mask=attention_mask,
                past_key_values=past_key_values,
                position_ids=position_ids,
            )
        else:
            packed = packed_sequence_ids(position_ids) if attention_mask is None else None
            attention_mask = create_bidirectional_mask(
                config=self.config,
                inputs_embeds=embedding_output,
                attention_mask=attention_mask,
                and_mask_function=same_sequence_mask_function(packed) if packed is not None else None,
            )
        return attention_mask


class HfRoFormerForMaskedLM(HfRoFormerPreTrainedModel):
    """RoFormer with the masked-language-modeling head it was pre-trained with (`fill-mask`)."""

    _auto_class = "AutoModelForMaskedLM"
    pipeline_tag = "fill-mask"
    _tied_weights_keys = LM_HEAD_TIES

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        if config.is_decoder:
            logger.warning("HfRoFormerForMaskedLM expects `config.is_decoder=False` (bidirectional attention).")
        self.roformer = HfRoFormerModel(config)
        self.cls = HfRoFormerOnlyMLMHead(config)
        self._tied_weights_keys = lm_head_ties(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        """The vocabulary projection (tied to the input embeddings)."""
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        """Replace the vocabulary projection and its bias."""
        self.cls.predictions.decoder = new_embeddings
        if new_embeddings.bias is not None:
            self.cls.predictions.bias = new_embeddings.bias

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> MaskedLMOutput:
        """Vocabulary logits for every position; with `labels` (-100 = ignored) also the masked-LM loss."""
        outputs = self.roformer(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            return_dict=True,
            **kwargs,
        )
        logits = self.cls(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **kwargs)
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class HfRoFormerForCausalLM(HfRoFormerPreTrainedModel, GenerationMixin):
    """RoFormer as a left-to-right language model (`generate`, KV cache), e.g. the original RoFormer-GPT, or the
    decoder of an `EncoderDecoderModel` when built with `add_cross_attention=True`."""

    _auto_class = "AutoModelForCausalLM"
    pipeline_tag = "text-generation"
    _tied_weights_keys = LM_HEAD_TIES

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        if not config.is_decoder:
            logger.warning("HfRoFormerForCausalLM used with `is_decoder=False`: attention will not be causal.")
        self.roformer = HfRoFormerModel(config)
        self.cls = HfRoFormerOnlyMLMHead(config)
        self._tied_weights_keys = lm_head_ties(config)
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        """The vocabulary projection (tied to the input embeddings)."""
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        """Replace the vocabulary projection and its bias."""
        self.cls.predictions.decoder = new_embeddings
        if new_embeddings.bias is not None:
            self.cls.predictions.bias = new_embeddings.bias

    def prepare_inputs_for_generation(self, *args, **kwargs):
        """As `GenerationMixin` does; a UniLM model without `token_type_ids` reads the prompt as the source segment
        (type 0) and every generated token as the target segment (type 1)."""
        model_inputs = super().prepare_inputs_for_generation(*args, **kwargs)
        if self.config.unilm and model_inputs.get("token_type_ids") is None:
            tokens = model_inputs.get("input_ids")
            if tokens is None:
                tokens = model_inputs["inputs_embeds"][..., 0]
            cache = model_inputs.get("past_key_values")
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

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        **kwargs,
    ) -> CausalLMOutputWithCrossAttentions:
        """Next-token logits; with `labels` also the shifted language-modeling loss.

        `logits_to_keep` computes logits only for the last N positions (0 = all), as in transformers' causal LMs.
        """
        outputs = self.roformer(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            encoder_hidden_states=encoder_hidden_states,
            encoder_attention_mask=encoder_attention_mask,
            past_key_values=past_key_values,
            use_cache=use_cache,
            return_dict=True,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        kept = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.cls(hidden_states[:, kept, :])
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithCrossAttentions(
            loss=loss,
            logits=logits,
            past_key_values=outputs.past_key_values,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            cross_attentions=outputs.cross_attentions,
        )


class HfRoFormerClassificationHead(nn.Module):
    """Sentence-level head on the first token ([CLS]): dropout, dense, activation, dropout, projection to labels."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)
        self.activation = ACT2FN[config.hidden_act]

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Label logits from the first token's hidden state."""
        features = self.dropout(sequence_output[:, 0, :])
        features = self.dropout(self.activation(self.dense(features)))
        return self.out_proj(features)


class HfRoFormerMeanPoolingHead(nn.Module):
    """Sentence-level head on the masked mean of all token states: dropout, then one projection to the labels."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, sequence_output: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label logits from the mean of the real tokens' hidden states."""
        if attention_mask is None:
            pooled = sequence_output.mean(dim=1)
        else:
            weights = attention_mask.to(sequence_output.dtype).unsqueeze(-1)
            pooled = (sequence_output * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return self.out_proj(self.dropout(pooled))


class HfRoFormerForSequenceClassification(HfRoFormerPreTrainedModel):
    """RoFormer with a sentence-level head: single-label or multi-label classification, or regression
    (`num_labels=1`), chosen by `config.problem_type` or inferred from the labels as transformers does.

    `config.classifier_pooling` picks the head: "cls" (first token, as transformers' RoFormer) or "mean" (masked
    mean over tokens, as the original CAIL2019-SCM recipe).
    """

    _auto_class = "AutoModelForSequenceClassification"
    pipeline_tag = "text-classification"

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.roformer = HfRoFormerModel(config)
        if config.classifier_pooling == "mean":
            self.classifier = HfRoFormerMeanPoolingHead(config)
        else:
            self.classifier = HfRoFormerClassificationHead(config)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        """Label logits `(batch, num_labels)`; with `labels` also the loss of the problem type."""
        outputs = self.roformer(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        if self.config.classifier_pooling == "mean":
            padding_mask = attention_mask if attention_mask is not None and attention_mask.dim() == 2 else None
            logits = self.classifier(outputs.last_hidden_state, padding_mask)
        else:
            logits = self.classifier(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = self.loss_function(labels, logits, self.config, **kwargs)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class HfRoFormerForMultipleChoice(HfRoFormerPreTrainedModel):
    """RoFormer scoring each of several candidate sequences; inputs are `(batch, num_choices, seq_len)`.

    Each choice is scored from the hidden state at its last position, as transformers' `RoFormerForMultipleChoice`
    does (its sequence summary defaults to "last"), so checkpoints trained with it keep their meaning.
    """

    _auto_class = "AutoModelForMultipleChoice"
    pipeline_tag = "multiple-choice"

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.roformer = HfRoFormerModel(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> MultipleChoiceModelOutput:
        """Choice logits `(batch, num_choices)`; with `labels` (the correct choice index) also the cross-entropy."""
        num_choices = input_ids.shape[1] if input_ids is not None else inputs_embeds.shape[1]

        def flatten_choices(tensor):
            return None if tensor is None else tensor.reshape(-1, *tensor.shape[2:])

        outputs = self.roformer(
            flatten_choices(input_ids),
            attention_mask=flatten_choices(attention_mask),
            token_type_ids=flatten_choices(token_type_ids),
            position_ids=flatten_choices(position_ids),
            inputs_embeds=flatten_choices(inputs_embeds),
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(outputs.last_hidden_state[:, -1]).view(-1, num_choices)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits, labels.to(logits.device))
        return MultipleChoiceModelOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


class HfRoFormerForTokenClassification(HfRoFormerPreTrainedModel):
    """RoFormer with a per-token classifier (named entities, word segmentation, part-of-speech tags)."""

    _auto_class = "AutoModelForTokenClassification"
    pipeline_tag = "token-classification"

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.roformer = HfRoFormerModel(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> TokenClassifierOutput:
        """Per-token label logits; with `labels` (-100 = ignored) also the cross-entropy."""
        outputs = self.roformer(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            loss = self.loss_function(logits, labels, self.config, **kwargs)
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


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
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        **kwargs,
    ) -> QuestionAnsweringModelOutput:
        """Span logits; with `start_positions` and `end_positions` also the mean of the two cross-entropies."""
        outputs = self.roformer(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            return_dict=True,
            **kwargs,
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).unbind(-1)
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = self.loss_function(start_logits, end_logits, start_positions, end_positions, **kwargs)
        return QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits.contiguous(),
            end_logits=end_logits.contiguous(),
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
