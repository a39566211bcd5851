"""hf_roformer as a native vLLM model: the encoder written with vLLM's own layers (query, key and value as one
tensor-parallel product, vLLM's encoder attention over the flattened requests of a step), rotated by hf_roformer's
own rotary code, so that every rope type is exact per request, and the heads as vLLM's poolers.

vLLM loads these classes through the plugin in `vllm_plugin` (`ModelRegistry.register_model`, by name, in every vLLM
process), for checkpoints whose `architectures` name an hf_roformer class; the config and tokenizer then load from
the package, without `--trust-remote-code`. Where the package is not installed, vLLM's Transformers backend serves the
checkpoint's remote code instead (docs/serving.md).

Every name this module takes from vLLM is vLLM's model interface, which may change between its releases: the
supported releases are those of `SUPPORTED_VLLM` (tested by `make test-serving`), and the imports below are the only
place they are used.

A step of vLLM's pooling runner holds whole requests one after another in one row, each starting at position 0
(encoders run without chunked prefill), so a token's request is found from the positions alone (`request_ids`), and
length-dependent rope types (dynamic NTK, LongRoPE) get each request's own length, as the model alone gives each row
its own.

Models pooled at [CLS] leave their last layer to the pooler (`LastLayerThenPool`), which knows the step's tasks: where
only each request's first token is read, the last layer computes that row alone, most of a layer's work saved.
"""

import re
from collections.abc import Iterable

import torch
from torch import nn
from transformers.activations import ACT2FN
from vllm.config import VllmConfig
from vllm.distributed import get_tensor_model_parallel_world_size
from vllm.model_executor.layers.attention import Attention, EncoderOnlyAttention
from vllm.model_executor.layers.linear import ColumnParallelLinear, QKVParallelLinear, RowParallelLinear
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.layers.pooler import DispatchPooler, Pooler
from vllm.model_executor.layers.pooler.seqwise import get_seq_pooling_method
from vllm.model_executor.layers.pooler.seqwise.poolers import pooler_for_embed
from vllm.model_executor.layers.pooler.tokwise.poolers import pooler_for_token_classify
from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding
from vllm.model_executor.models.interfaces import SupportsCrossEncoding
from vllm.model_executor.models.interfaces_base import attn_type, default_pooling_type
from vllm.model_executor.models.utils import AutoWeightsLoader, WeightsMapper
from vllm.v1.pool.metadata import PoolingMetadata

from ..remote_code.config_rules_hf_roformer import is_length_dependent, rope_attention_factor
from ..remote_code.modeling_hf_roformer import HfRoFormerPredictionHeadTransform, make_norm
from ..remote_code.rotary_hf_roformer import HfRoFormerRotaryEmbedding, TokenRotation


# The vLLM releases this module is written for (the pooling runner's layers and poolers of these releases).
SUPPORTED_VLLM = ("0.32",)


class NotServedNatively(ValueError):
    """A checkpoint this native model cannot serve exactly; the message names what and what to do instead."""


def refuse_what_is_not_served(config, scores_pairs: bool = False, generates: bool = False) -> None:
    """Refuse, when vLLM builds the model, what the native model does not compute exactly (one line naming the
    reason). Pooling models are encoders; a UniLM model (RoFormer-Sim) is served for sentence vectors, a sentence being
    its source segment, which attends bidirectionally, but not for pairs (its second segment attends causally). The
    causal LM caches keys rotated by their positions, which rope types whose frequencies follow the length cannot."""
    if config.attention_type == "linear":
        raise NotServedNatively(
            "hf_roformer's native vLLM model serves softmax attention only: linear attention (attention_type='linear') "
            "has no vLLM attention backend; run the model in transformers instead."
        )
    if generates:
        if not config.is_decoder or config.unilm or config.add_cross_attention:
            raise NotServedNatively(
                "hf_roformer's native vLLM causal LM generates with causal self-attention only (is_decoder=True, no "
                "UniLM mask, no cross-attention); run generation of this model in transformers."
            )
        if not config.tie_word_embeddings:
            raise NotServedNatively(
                "hf_roformer's native vLLM causal LM projects to the vocabulary with the token embeddings "
                "(tie_word_embeddings=True), as RoFormer-GPT does; generate with this untied head in transformers."
            )
        if is_length_dependent(config):
            raise NotServedNatively(
                f"hf_roformer's native vLLM causal LM caches keys rotated once, which rope_type "
                f"{config.rope_parameters['rope_type']!r} rotates again as the text grows; serve a static rope type "
                "(default, linear, ntk, yarn, llama3) or generate in transformers."
            )
        return
    if config.is_decoder and not config.unilm:
        raise NotServedNatively(
            "hf_roformer's native vLLM pooling models are encoders: a causal decoder's (is_decoder=True) states attend "
            "to earlier tokens only; serve it with vLLM's Transformers backend (--model-impl transformers "
            "--trust-remote-code) or save its encoder with is_decoder=False."
        )
    if config.unilm and scores_pairs:
        raise NotServedNatively(
            "hf_roformer's native vLLM classifiers attend bidirectionally: a UniLM mask (unilm=True) attends the "
            "second segment causally; serve it with vLLM's Transformers backend (--model-impl transformers "
            "--trust-remote-code)."
        )


# The pooling tasks whose poolers, under [CLS] pooling, read each request's first token and nothing else.
FIRST_TOKEN_TASKS = frozenset({"embed", "classify"})


def request_ids(positions: torch.Tensor) -> torch.Tensor:
    """The request of every token of a step, `(1, tokens)`: requests follow one another, each starting at position 0."""
    return (positions == 0).cumsum(0).sub_(1).clamp_(min=0)[None]


class HfRoFormerVllmEmbeddings(nn.Module):
    """Token plus segment embeddings, then the norm (`embeddings_project` to the hidden size where they differ)."""

    def __init__(self, config):
        super().__init__()
        self.word_embeddings = VocabParallelEmbedding(config.vocab_size, config.embedding_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.embedding_size)
        self.LayerNorm = make_norm(config, config.embedding_size)  # no dropout in serving: either order is this

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        """Embed the flattened tokens of a step (segment 0 where no segment ids are given)."""
        embeddings = self.word_embeddings(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        return self.LayerNorm(embeddings + self.token_type_embeddings(token_type_ids))


class HfRoFormerVllmSelfAttention(nn.Module):
    """Self-attention over the step's requests: one query/key/value product, rotation by position, vLLM's attention
    (encoders: each request attends to itself; a causal LM: to its earlier tokens, through vLLM's key/value cache)."""

    def __init__(self, config, vllm_config: VllmConfig, prefix: str):
        super().__init__()
        heads = config.num_attention_heads // get_tensor_model_parallel_world_size()
        self.head_dim = config.head_dim
        self.rotary_value = config.rotary_value
        self.qkv_proj = QKVParallelLinear(
            config.hidden_size,
            self.head_dim,
            config.num_attention_heads,
            bias=config.use_bias,
            quant_config=vllm_config.quant_config,
            prefix=f"{prefix}.qkv_proj",
        )
        # A rope type's attention factor (YaRN's temperature) multiplies the logits, as in the model.
        self.scale = self.head_dim**-0.5 * rope_attention_factor(config) ** 2
        # Encoders attend within each request; a causal LM attends to the earlier tokens, cached across steps.
        attention_class = Attention if config.is_decoder and not config.unilm else EncoderOnlyAttention
        self.attn = attention_class(
            num_heads=heads,
            head_size=self.head_dim,
            scale=self.scale,
            num_kv_heads=heads,
            cache_config=vllm_config.cache_config,
            quant_config=vllm_config.quant_config,
            prefix=f"{prefix}.attn",
        )

    def rotated_heads(self, hidden_states: torch.Tensor, rotation: TokenRotation) -> list[torch.Tensor]:
        """Query, key and value of the step's tokens, `(tokens, heads, head_dim)` each: queries and keys rotated
        (values too with `rotary_value`); `rotation` holds the rotation of every token."""
        qkv, _ = self.qkv_proj(hidden_states)
        query, key, value = qkv.chunk(3, dim=-1)
        projections = (query, key, value) if self.rotary_value else (query, key)
        # In place: the projections are views of `qkv`, which nothing else reads (no gradient is recorded here).
        rotated = rotation.rotate_projections(self.head_dim, *(p[None] for p in projections), in_place=True)
        heads = [states[0].transpose(0, 1) for states in rotated]
        return heads if self.rotary_value else [*heads, value.unflatten(-1, (-1, self.head_dim))]

    def forward(self, hidden_states: torch.Tensor, rotation: TokenRotation) -> torch.Tensor:
        """`(tokens, hidden)` states attended through vLLM's attention."""
        heads = self.rotated_heads(hidden_states, rotation)
        return self.attn(*(states.reshape(hidden_states.shape[0], -1) for states in heads))

    def attend_from_first_tokens(
        self, hidden_states: torch.Tensor, rotation: TokenRotation, requests: torch.Tensor, first_tokens: torch.Tensor
    ) -> torch.Tensor:
        """Attention output `(requests, hidden)` of each request's first token alone, over all its request's tokens
        (`requests`: each token's request; `first_tokens`: where each request starts), in float32: a softmax over each
        request's keys, as the full attention gives that row."""
        query, key, value = (states.float() for states in self.rotated_heads(hidden_states, rotation))
        scores = (query[first_tokens[requests]] * key).sum(-1) * self.scale  # (tokens, heads)
        by_request = requests[:, None].expand_as(scores)
        peaks = scores.new_full((len(first_tokens), scores.shape[1]), -torch.inf)
        peaks = peaks.scatter_reduce_(0, by_request, scores, "amax")
        weights = (scores - peaks[requests]).exp_()
        totals = torch.zeros_like(peaks).index_add_(0, requests, weights)
        output = value.new_zeros(len(first_tokens), *value.shape[1:]).index_add_(
            0, requests, weights[..., None] * value
        )
        return (output / totals[..., None]).flatten(1).to(hidden_states.dtype)

    def attend_per_request(
        self, hidden_states: torch.Tensor, rotation: TokenRotation, lengths: list[int]
    ) -> torch.Tensor:
        """Attention output `(tokens, hidden)` of every token, each request attended alone (`lengths`: the requests'
        token counts, in order), with PyTorch's attention: for a step whose pooler reads more than first tokens."""
        heads = self.rotated_heads(hidden_states, rotation)
        outputs = [
            nn.functional.scaled_dot_product_attention(
                *(states.transpose(0, 1) for states in request), scale=self.scale
            )
            for request in zip(*(states.split(lengths) for states in heads), strict=True)
        ]
        return torch.cat(outputs, dim=1).transpose(0, 1).flatten(1)


class HfRoFormerVllmResidualOutput(nn.Module):
    """Projection back to the hidden size, residual connection and post-norm (`attention.output`, `output`)."""

    def __init__(self, config, input_size: int, vllm_config: VllmConfig, prefix: str):
        super().__init__()
        self.dense = RowParallelLinear(
            input_size,
            config.hidden_size,
            bias=config.use_bias,
            quant_config=vllm_config.quant_config,
            prefix=f"{prefix}.dense",
        )
        self.LayerNorm = make_norm(config, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor, input_tensor: torch.Tensor) -> torch.Tensor:
        """Project, add the block input, normalize."""
        hidden_states, _ = self.dense(hidden_states)
        return self.LayerNorm(hidden_states + input_tensor)


class HfRoFormerVllmAttention(nn.Module):
    """An attention block under its checkpoint names: `self` (its query/key/value as `qkv_proj`) and `output`."""

    def __init__(self, config, vllm_config: VllmConfig, prefix: str):
        super().__init__()
        self.self = HfRoFormerVllmSelfAttention(config, vllm_config, f"{prefix}.self")
        self.output = HfRoFormerVllmResidualOutput(config, config.hidden_size, vllm_config, f"{prefix}.output")

    def forward(self, hidden_states: torch.Tensor, rotation: TokenRotation) -> torch.Tensor:
        """Attend, then the residual output projection."""
        return self.output(self.self(hidden_states, rotation), hidden_states)


class HfRoFormerVllmIntermediate(nn.Module):
    """Expansion to `intermediate_size` and the activation (transformers' own, as in the model)."""

    def __init__(self, config, vllm_config: VllmConfig, prefix: str):
        super().__init__()
        self.dense = ColumnParallelLinear(
            config.hidden_size,
            config.intermediate_size,
            bias=config.use_bias,
            quant_config=vllm_config.quant_config,
            prefix=f"{prefix}.dense",
        )
        self.activation = ACT2FN[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Expand and activate."""
        hidden_states, _ = self.dense(hidden_states)
        return self.activation(hidden_states)


class HfRoFormerVllmLayer(nn.Module):
    """One post-norm transformer layer: attention, then the feed-forward block."""

    def __init__(self, config, vllm_config: VllmConfig, prefix: str):
        super().__init__()
        self.attention = HfRoFormerVllmAttention(config, vllm_config, f"{prefix}.attention")
        self.intermediate = HfRoFormerVllmIntermediate(config, vllm_config, f"{prefix}.intermediate")
        self.output = HfRoFormerVllmResidualOutput(config, config.intermediate_size, vllm_config, f"{prefix}.output")

    def forward(self, hidden_states: torch.Tensor, rotation: TokenRotation) -> torch.Tensor:
        """Transform the step's states."""
        attention_output = self.attention(hidden_states, rotation)
        return self.output(self.intermediate(attention_output), attention_output)

    def first_token_outputs(
        self, hidden_states: torch.Tensor, rotation: TokenRotation, requests: torch.Tensor, first_tokens: torch.Tensor
    ) -> torch.Tensor:
        """The layer's output `(requests, hidden)` at each request's first token only: its attention over the whole
        request, then the output projection and the feed-forward block of that one row."""
        attended = self.attention.self.attend_from_first_tokens(hidden_states, rotation, requests, first_tokens)
        attention_output = self.attention.output(attended, hidden_states[first_tokens])
        return self.output(self.intermediate(attention_output), attention_output)

    def per_request_outputs(
        self, hidden_states: torch.Tensor, rotation: TokenRotation, lengths: list[int]
    ) -> torch.Tensor:
        """The layer's output at every token, each request attended alone (outside vLLM's forward context)."""
        attention_output = self.attention.output(
            self.attention.self.attend_per_request(hidden_states, rotation, lengths), hidden_states
        )
        return self.output(self.intermediate(attention_output), attention_output)


class HfRoFormerVllmEncoderLayers(nn.Module):
    """The stack of layers under its checkpoint name (`encoder.layer.N`)."""

    def __init__(self, config, vllm_config: VllmConfig, prefix: str):
        super().__init__()
        layers = range(config.num_hidden_layers)
        self.layer = nn.ModuleList([HfRoFormerVllmLayer(config, vllm_config, f"{prefix}.layer.{i}") for i in layers])


class HfRoFormerVllmEncoder(nn.Module):
    """The RoFormer transformer on a step of flattened requests, under the parameter names of `HfRoFormerModel`."""

    def __init__(self, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        config = vllm_config.model_config.hf_config
        self.config = config
        self.embeddings = HfRoFormerVllmEmbeddings(config)
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size, bias=config.use_bias)
        self.encoder = HfRoFormerVllmEncoderLayers(config, vllm_config, f"{prefix}.encoder")
        if config.pooler_activation is not None:
            # Loaded from `pooler.dense`; it runs as the embedding head's projector, on states vLLM casts to its head
            # dtype (float32 for pooling models unless `head_dtype` says otherwise), as the heads' layers below.
            head_dtype = vllm_config.model_config.head_dtype
            self.pooler = nn.Linear(config.hidden_size, config.hidden_size, dtype=head_dtype)
        self.rotary_emb = HfRoFormerRotaryEmbedding(config)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        layers: int | None = None,
    ) -> torch.Tensor:
        """The hidden states `(tokens, hidden)` of the step's tokens after the first `layers` layers (None: all), from
        their ids and `positions` (each token's position in its request, which starts at 0)."""
        hidden_states = self.embeddings(input_ids, token_type_ids)
        if hasattr(self, "embeddings_project"):
            hidden_states = self.embeddings_project(hidden_states)
        rotation = self.rotary_emb.for_packed_row(positions[None], request_ids(positions))
        for layer in self.encoder.layer[:layers]:
            hidden_states = layer(hidden_states, rotation)
        return hidden_states

    def last_layer(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> torch.Tensor:
        """The last layer on a step's states from the layers before it, where the pooler's tasks are known: where
        every request is pooled at its first token ([CLS] pooling of `embed` and `classify`), that token's row alone,
        written over the input's row (the other rows, which those poolers do not read, keep the input's states);
        otherwise every row, each request attended alone."""
        cursor = pooling_metadata.get_pooling_cursor()
        if cursor.is_partial_prefill():
            raise NotServedNatively("hf_roformer's native vLLM pooling models need each request whole in one step.")
        lengths, first_tokens = cursor.num_scheduled_tokens_cpu, cursor.first_token_indices_gpu.long()
        tokens, device = hidden_states.shape[0], hidden_states.device
        requests = torch.arange(len(lengths), device=device).repeat_interleave(lengths.to(device), output_size=tokens)
        positions = torch.arange(tokens, device=device) - first_tokens[requests]
        rotation = self.rotary_emb.for_packed_row(positions[None], requests[None])
        layer = self.encoder.layer[-1]
        if FIRST_TOKEN_TASKS.issuperset(pooling_metadata.tasks):
            first_token_states = layer.first_token_outputs(hidden_states, rotation, requests, first_tokens)
            return hidden_states.index_copy(0, first_tokens, first_token_states)
        return layer.per_request_outputs(hidden_states, rotation, lengths.tolist())

    def pooled(self, cls_states: torch.Tensor) -> torch.Tensor:
        """The model's own pooler on [CLS] states (tanh, or none for RoFormer-Sim's linear pooler)."""
        vectors = self.pooler(cls_states)
        return torch.tanh(vectors) if self.config.pooler_activation == "tanh" else vectors


class LastLayerThenPool(Pooler):
    """A [CLS]-pooling model's pooler behind the encoder's last layer, which the model's `forward` leaves to it: here
    the step's tasks are known, so where every request is pooled at its first token the last layer computes that row
    alone (its attention over the request, output projection and feed-forward block), which is most of a layer's
    work saved and the same numbers; steps with per-token tasks get the whole layer."""

    def __init__(self, encoder: HfRoFormerVllmEncoder, pooler: Pooler):
        super().__init__()
        self.pooler = pooler
        self.run_last_layer = encoder.last_layer  # a method, not a submodule: the encoder's weights stay its own

    def get_supported_tasks(self):
        """The tasks of the pooler behind the layer."""
        return self.pooler.get_supported_tasks()

    def get_pooling_updates(self, task):
        """The pooling parameters the pooler behind the layer sets for `task`."""
        return self.pooler.get_pooling_updates(task)

    def replace_classifier(self, new_classifier) -> None:
        """Give the pooler behind the layer another classifier (vLLM's LoRA does)."""
        self.pooler.replace_classifier(new_classifier)

    def forward(self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata):
        """Run the last layer on the states of the layers before it, then pool."""
        return self.pooler(self.run_last_layer(hidden_states, pooling_metadata), pooling_metadata)


# Checkpoint names to this module's: the bare model's names under `roformer.` as the heads' are, query/key/value
# stacked into `qkv_proj`, the pooler's dense layer as `pooler`, and the language-modeling head, which no pooling
# model reads, left out.
WEIGHTS_MAPPER = WeightsMapper(
    orig_to_new_regex={re.compile(r"^(embeddings|embeddings_project|encoder|pooler)\."): r"roformer.\1."},
    orig_to_new_substr={"pooler.dense.": "pooler."},
    orig_to_new_stacked={
        ".self.query": (".self.qkv_proj", "q"),
        ".self.key": (".self.qkv_proj", "k"),
        ".self.value": (".self.qkv_proj", "v"),
    },
    orig_to_new_prefix={"cls.": None},
)


# The causal LM's names: the encoder's, and its vocabulary head's transform and bias; the tied projection (stored or
# not) is the token embeddings.
CAUSAL_LM_WEIGHTS_MAPPER = WeightsMapper(
    orig_to_new_regex=WEIGHTS_MAPPER.orig_to_new_regex,
    orig_to_new_substr={
        "cls.predictions.decoder.": None,
        "cls.predictions.transform.": "transform.",
        "cls.predictions.bias": "bias",
        "pooler.dense.": "pooler.",
    },
    orig_to_new_stacked=WEIGHTS_MAPPER.orig_to_new_stacked,
)


class HfRoFormerVllmModel(nn.Module):
    """What every native model shares: the transformer (`roformer`), weight loading and vLLM's calling convention
    (a step's flattened token ids and their positions; segment ids for pairs)."""

    packed_modules_mapping = {"qkv_proj": ["query", "key", "value"]}
    weights_mapper = None  # the checkpoint's names to this model's (a WeightsMapper)
    scores_pairs = False  # classifiers: their inputs may be pairs, whose second segment a UniLM mask treats apart
    generates = False  # the causal LM
    layers_in_forward = None  # how many layers `forward` runs (None: all; the last one in the pooler: one fewer)

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        self.config = vllm_config.model_config.hf_config
        refuse_what_is_not_served(self.config, self.scores_pairs, self.generates)
        self.roformer = HfRoFormerVllmEncoder(vllm_config, prefix="roformer")

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The token embeddings of `input_ids`."""
        return self.roformer.embeddings.word_embeddings(input_ids)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        intermediate_tensors=None,
        inputs_embeds: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The last hidden states of the step's tokens, which the pooler or the vocabulary head reads."""
        if inputs_embeds is not None:
            raise NotServedNatively("hf_roformer's native vLLM model takes token ids, not embeddings.")
        return self.roformer(input_ids, positions, token_type_ids, self.layers_in_forward)

    def pool_after_last_layer(self, pooler: Pooler) -> Pooler:
        """`pooler` behind the encoder's last layer (`LastLayerThenPool`), which `forward` then leaves out."""
        self.layers_in_forward = self.config.num_hidden_layers - 1
        return LastLayerThenPool(self.roformer, pooler)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Load a checkpoint of any hf_roformer head (its transformer and the parameters this model holds)."""
        return AutoWeightsLoader(self).load_weights(weights, mapper=self.weights_mapper)


@attn_type("encoder_only")  # bidirectional: no chunked prefill, no prefix cache, whatever the pooling
class HfRoFormerVllmPoolingModel(HfRoFormerVllmModel):
    """The pooling models' base: any head's checkpoint, its language-modeling head left out."""

    is_pooling_model = True
    weights_mapper = WEIGHTS_MAPPER


@default_pooling_type(seq_pooling_type="CLS")
class HfRoFormerForEmbedding(HfRoFormerVllmPoolingModel):
    """Sentence vectors (`/v1/embeddings`): vLLM's pooling (CLS by default, or what `--pooler-config` and a
    sentence-transformers folder say), then, for a model with a pooler (`pooler_activation`) pooled at [CLS] and no
    sentence-transformers projection, the model's own pooler (RoFormer-Sim's vector)."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        pooler_config = vllm_config.model_config.pooler_config
        embed = pooler_for_embed(pooler_config)
        pools_first_tokens = pooler_config.get_seq_pooling_type() == "CLS"
        if hasattr(self.roformer, "pooler") and embed.head.projector is None and pools_first_tokens:
            embed.head.projector = self.roformer.pooled
        pooler = DispatchPooler({"embed": embed})
        self.pooler = self.pool_after_last_layer(pooler) if pools_first_tokens else pooler


@default_pooling_type(seq_pooling_type="CLS")
class HfRoFormerForClassification(HfRoFormerVllmPoolingModel, SupportsCrossEncoding):
    """Labels (`/classify`) and cross-encoder scores (`/score`, `/rerank`, with the pair's segment ids), from the head
    `classifier_pooling` names: the [CLS] state through dense, activation and projection, or the mean of the tokens
    through one projection."""

    scores_pairs = True

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        config = self.config
        head_dtype = vllm_config.model_config.head_dtype  # vLLM's poolers cast the pooled states to it first
        self.classifier = nn.Module()
        if config.classifier_pooling == "cls":
            self.classifier.dense = nn.Linear(config.hidden_size, config.hidden_size, dtype=head_dtype)
            self.activation = ACT2FN[config.hidden_act]
        self.classifier.out_proj = nn.Linear(config.hidden_size, config.num_labels, dtype=head_dtype)
        pooling = get_seq_pooling_method("CLS" if config.classifier_pooling == "cls" else "MEAN")
        pooler = DispatchPooler.for_seq_cls(
            vllm_config.model_config.pooler_config, pooling=pooling, classifier=self.logits
        )
        self.pooler = self.pool_after_last_layer(pooler) if config.classifier_pooling == "cls" else pooler

    def logits(self, pooled: torch.Tensor) -> torch.Tensor:
        """Label logits of pooled states `(requests, hidden)`."""
        if hasattr(self.classifier, "dense"):
            pooled = self.activation(self.classifier.dense(pooled))
        return self.classifier.out_proj(pooled)


@default_pooling_type(tok_pooling_type="ALL")
class HfRoFormerForTokenClassificationVllm(HfRoFormerVllmPoolingModel):
    """Labels of every token (`/pooling` with `"task": "token_classify"`): the per-token classifier of
    `HfRoFormerForTokenClassification` on each request's states, its probabilities as vLLM's token pooler gives them
    (softmax over the labels)."""

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        head_dtype = vllm_config.model_config.head_dtype  # vLLM's token pooler casts the states to it first
        self.classifier = nn.Linear(self.config.hidden_size, self.config.num_labels, dtype=head_dtype)
        self.pooler = pooler_for_token_classify(vllm_config.model_config.pooler_config, classifier=self.classifier)


class HfRoFormerForCausalLMVllm(HfRoFormerVllmModel):
    """Generation (`--runner generate`) of a RoFormer causal LM (RoFormer-GPT): causal self-attention over vLLM's
    key/value cache, and the RoFormer vocabulary head (`cls.predictions`: dense, activation and norm, then the
    projection tied to the token embeddings and its own bias; without `lm_head_transform`, the bare tied projection)."""

    generates = True
    weights_mapper = CAUSAL_LM_WEIGHTS_MAPPER

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        config = self.config
        if config.lm_head_transform:
            self.transform = HfRoFormerPredictionHeadTransform(config)  # loaded from `cls.predictions.transform`
            self.bias = nn.Parameter(torch.zeros(config.vocab_size))  # from `cls.predictions.bias`
        self.logits_processor = LogitsProcessor(config.vocab_size)

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        """Next-token logits through the RoFormer vocabulary head."""
        projection = self.roformer.embeddings.word_embeddings  # tied
        if hasattr(self, "transform"):
            return self.logits_processor(projection, self.transform(hidden_states), self.bias)
        return self.logits_processor(projection, hidden_states)


__all__ = [
    "HfRoFormerForCausalLMVllm",
    "HfRoFormerForClassification",
    "HfRoFormerForEmbedding",
    "HfRoFormerForTokenClassificationVllm",
    "NotServedNatively",
]
