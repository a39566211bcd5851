"""The layers of the network: embeddings, norms, the attention and feed-forward blocks with their residual outputs, the
layer, the stack of layers and the pooler. Module and parameter names are those of transformers' RoFormer, so its
checkpoints (and LoRA target names) load unchanged.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from collections.abc import Callable

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache
from transformers.modeling_layers import GradientCheckpointingLayer

from .attention_hf_roformer import (
    HfRoFormerAttentionBase,
    HfRoFormerCrossAttention,
    HfRoFormerLinearSelfAttention,
    HfRoFormerSelfAttention,
)
from .configuration_hf_roformer import HfRoFormerConfig
from .input_checks_hf_roformer import check_embeds_dtype, check_ids_in_range
from .memory_saving_hf_roformer import (
    HfRoFormerDropout,
    activate_in_place_in_inference,
    add_residual,
    project_recomputing_input,
    records_activation_twice,
)


# Type hints of the inputs every forward takes.
TokenIds = torch.LongTensor | None
Floats = torch.Tensor | None


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
