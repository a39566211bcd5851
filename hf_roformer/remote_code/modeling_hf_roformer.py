"""PyTorch RoFormer: a BERT-style transformer whose attention encodes positions by rotating queries and keys (RoPE).

The models: the base model and the heads that the Auto classes (and the checkpoints' `auto_map`) name, built from the
layers (`layers_hf_roformer`), attention variants (`attention_hf_roformer`) and head modules (`heads_hf_roformer`);
saving and pushing live in `saving_hf_roformer`. Module and parameter names are those of transformers' `RoFormer*`
classes, so their checkpoints (and LoRA target names) load unchanged; the rotary angles are computed per forward from
`position_ids`, so there is no length limit.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import torch
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationMixin
from transformers.loss.loss_utils import fixed_cross_entropy
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    CausalLMOutputWithCrossAttentions,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.modeling_utils import PreTrainedModel
from transformers.utils import ModelOutput, logging
from transformers.utils.generic import can_return_tuple, merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .attention_hf_roformer import (
    PER_QUERY_ROTARY,
    HfRoFormerCrossAttention,
    HfRoFormerLinearSelfAttention,
    HfRoFormerSelfAttention,
    self_attention_cache,
    self_attention_implementation,
)
from .batch_layout_hf_roformer import (
    check_packed_rows,
    cross_attention_mask,
    packed_row_mask,
    packed_row_sequences,
    rotates_keys_per_query,
    self_attention_mask,
    split_packed_row_boundaries,
    unpad_where_allowed,
)
from .configuration_hf_roformer import HfRoFormerConfig
from .heads_hf_roformer import (
    HfRoFormerClassificationHead,
    HfRoFormerLMPredictionHead,
    HfRoFormerMeanPoolingHead,
    HfRoFormerOnlyMLMHead,
    HfRoFormerOutputLinear,
    flatten_choices,
    span_loss,
    with_labelled_token_count,
)
from .input_checks_hf_roformer import (
    check_ids_or_embeds,
    check_labels,
    check_model_inputs,
    check_tensor,
    check_values,
)
from .joined_projection_hf_roformer import JoinedProjectionsMixin
from .layers_hf_roformer import (
    Floats,
    HfRoFormerDropout,
    HfRoFormerEmbeddings,
    HfRoFormerEncoder,
    HfRoFormerLayer,
    HfRoFormerPooler,
    TokenIds,
    real_token_states,
)
from .linear_attention_hf_roformer import HfRoFormerLinearAttentionCache
from .padding_free_hf_roformer import varlen_kernel_applies
from .releases_hf_roformer import CACHE_FIELD, accepts_either_cache_name, cache_output, output_cache
from .rotary_hf_roformer import HfRoFormerRotaryEmbedding
from .saving_hf_roformer import HfRoFormerSavingMixin
from .tensor_parallel_hf_roformer import CROSS_ATTENTION_TP_PLAN, WholeHeadsPerRankMixin


logger = logging.get_logger(__name__)

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
            check_values("labels", labels, labels.isfinite(), "regression targets must be finite numbers")
        else:
            check_values("labels", labels, (labels >= 0) & (labels <= 1), "multi-label targets must lie in [0, 1]")


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
