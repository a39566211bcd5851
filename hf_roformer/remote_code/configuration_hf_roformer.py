"""Configuration of the RoFormer model family (Su et al., "RoFormer: Enhanced Transformer with Rotary Position
Embedding").

A `@strict` config: each field's rule (`config_rules_hf_roformer.FIELD_RULES`) is checked whenever the field is
assigned, also while the config is built, and the `validate_*` methods check what crosses fields (run when the
config is built, by `config.validate()`, when saving, and when a model is built from it). Every error is a
`ValueError`, or a `TypeError` for a value of the wrong type, naming the field, its value and what is allowed.

Hub-bound: this file is copied next to every saved checkpoint so `trust_remote_code=True` loads work without the
package installed. It may import only `torch`, `transformers` and its sibling Hub-bound files.
"""

import dataclasses
import inspect
import json
from typing import Any

from huggingface_hub.dataclasses import strict
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError
from transformers.configuration_utils import PreTrainedConfig
from transformers.modeling_rope_utils import RopeParameters

from .config_rules_hf_roformer import (
    DERIVED_FIELDS,
    FIELD_RULES,
    LENGTH_DEPENDENT_TYPES,
    check_explicit_original_length,
    check_legacy_type,
    shown,
    validate_rope_parameters,
)
from .releases_hf_roformer import CACHE_FIELD, decode_special_floats


def translate_roformer_config(config_dict: dict) -> dict:
    """Turn the dict of a `roformer` config (transformers' RoFormer, or the RoFormer-V2/Sim configs that carry
    `norm_type`, `use_bias` and `pooler_activation`) into one for `HfRoFormerConfig`.

    The hyper-parameters share names and meanings, so they carry over and select the same architecture; values this
    architecture does not implement fail validation with a `ValueError` naming the key. `architectures` name the
    matching classes of this package (`RoFormerForMaskedLM` -> `HfRoFormerForMaskedLM`).
    """
    translated = dict(config_dict)
    translated["model_type"] = HfRoFormerConfig.model_type
    architectures = translated.get("architectures")
    if isinstance(architectures, list):
        translated["architectures"] = [
            f"Hf{name}" if isinstance(name, str) and name.startswith("RoFormer") else name for name in architectures
        ]
    return translated


def plain_validation_errors(cls):
    """Make a `@strict` config raise the `ValueError` / `TypeError` its checks raise, not huggingface_hub's
    `StrictDataclassFieldValidationError` / `StrictDataclassClassValidationError` (which subclass neither), and check
    `FIELD_RULES` before each assignment.

    Applied on top of `@strict`, whose `__setattr__` and `validate` it wraps.
    """
    strict_setattr, strict_validate = cls.__setattr__, cls.validate

    def __setattr__(self, name: str, value: Any) -> None:
        if name in FIELD_RULES:
            value = FIELD_RULES[name].check(name, value)
        try:
            strict_setattr(self, name, value)
        except StrictDataclassFieldValidationError as error:
            cause = error.__cause__
            kind = type(cause) if isinstance(cause, (TypeError, ValueError)) else TypeError
            raise kind(f"`{name}` got {shown(value)}: {cause}") from None

    def validate(self) -> None:
        """Check every field and every rule between fields; raise a `ValueError` or `TypeError` naming the field."""
        try:
            strict_validate(self)
        except StrictDataclassClassValidationError as error:
            raise error.__cause__ from None

    cls.__setattr__ = __setattr__
    validate.__is_defined_by_strict_decorator__ = True  # lets `@strict` subclasses replace it, as it does its own
    cls.validate = validate
    return cls


@plain_validation_errors
@strict
class HfRoFormerConfig(PreTrainedConfig):
    r"""Hyper-parameters of a RoFormer model.

    The fields and defaults are those of transformers' `RoFormerConfig` (so its checkpoints load unchanged), plus the
    standard transformers v5 `rope_parameters` field that selects the rotary frequencies. `max_position_embeddings` is
    the length the model was trained at, not a limit: rotary position embeddings have no position table.

    Args:
        vocab_size: Number of tokens in the vocabulary.
        embedding_size: Width of the token embeddings; defaults to `hidden_size`. When it differs, a linear
            `embeddings_project` maps embeddings to `hidden_size`.
        hidden_size: Width of the hidden states.
        num_hidden_layers: Number of transformer layers.
        num_attention_heads: Number of attention heads; `hidden_size / num_attention_heads` must be an even integer
            because RoPE rotates pairs of features.
        intermediate_size: Width of the feed-forward layer.
        hidden_act: Activation of the feed-forward layer and of the prediction heads (a key of transformers' `ACT2FN`).
        hidden_dropout_prob: Dropout on embeddings and layer outputs.
        attention_probs_dropout_prob: Dropout on attention probabilities.
        max_position_embeddings: Sequence length used in pre-training (the original length for rope scaling).
        type_vocab_size: Number of segment (token type) ids.
        initializer_range: Standard deviation of the normal weight initialization.
        layer_norm_eps: Epsilon of the layer norms.
        rotary_value: Also rotate the values, as the original Chinese RoFormer allows.
        rope_parameters: Rotary frequencies, e.g. `{"rope_type": "default", "rope_theta": 10000.0}` (paper eq. 15:
            theta_i = rope_theta^(-2i/d)). A legacy `rope_scaling` / `rope_theta` pair is converted into it.
        use_cache: Whether decoders return a key/value cache.
        is_decoder: Use causal self-attention (causal language modeling, decoder of an encoder-decoder).
        add_cross_attention: Add cross-attention layers (decoder of an `EncoderDecoderModel`).
        tie_word_embeddings: Tie the language-modeling head to the input embeddings.
        attention_type: "softmax" (standard attention, any backend) or "linear" (RoPE with linear attention, paper
            eq. 19: O(N) time and memory).
        linear_feature_map: Non-negative feature map of linear attention: "elu" (elu(x) + 1), "relu", or "softmax"
            (softmax over features for queries, exp for keys).
        linear_rotation_order: "after_feature_map" (paper eq. 19: rotate phi(q), phi(k) in the numerator only) or
            "before_feature_map" (rotate q, k, then apply the feature map in numerator and denominator, as
            performer-pytorch does; a different model).
        linear_attention_eps: Lower clamp of the linear-attention denominator sum_n phi(q_m)^T phi(k_n).
        linear_chunk_size: Chunk length of causal linear attention (memory O(N * chunk), speed only).
        norm_type: "layer_norm" (RoFormer) or "rms_norm" (RoFormer-V2: parameter-free RMS norms
            x / sqrt(mean(x^2) + eps)). It selects the norm only; the other RoFormer-V2 traits are the two fields below,
            derived from it when absent.
        dropout_before_embeddings_norm: Apply the embeddings' dropout before their norm (RoFormer-V2) instead of after
            it. None derives it from `norm_type`: True for "rms_norm", False otherwise.
        lm_head_transform: Give the language-modeling head a dense + activation + layer norm transform and an output
            bias before the tied vocabulary projection (RoFormer, BERT); False makes the head the bare tied embedding
            matrix without bias (RoFormer-V2). None derives it from `norm_type`: False for "rms_norm", True otherwise.
        lm_head_layer_norm_eps: Epsilon of the language-modeling head's transform layer norm. None means
            `layer_norm_eps`; bert4keras >= 0.11.4 checkpoints use 1e-7 in the encoder and 1e-12 here.
        use_bias: Biases in the transformer's linear layers (RoFormer-V2 has none).
        pooler_activation: Add a pooler on the first token: None (no pooler), "tanh" (BERT's) or "linear"
            (RoFormer-Sim's, whose cosine similarity compares sentences).
        unilm: Use UniLM's sequence-to-sequence mask from `token_type_ids` (RoFormer-Sim): the source segment (0)
            attends to itself, the target segment (1) to the source and its own past; generation appends target tokens.
        classifier_pooling: How `HfRoFormerForSequenceClassification` summarizes a sequence: "cls" (the first real
            token, then dense + activation, as transformers' RoFormer) or "mean" (masked mean of all tokens, then one
            linear layer, the original CAIL2019-SCM recipe).
        summary_type (keyword, stored only when given): Which token `HfRoFormerForMultipleChoice` scores a choice
            from: "last" (also when absent, as transformers' RoFormer reads its configs: the choice's last real token)
            or "first" (the [CLS] token).
        padding_free: How padded batches attend: "auto" packs the real tokens of every row into one row after the
            embeddings and attends per sequence only where that measured faster (a variable-length kernel: flash
            backends, or SDPA on CUDA in half precision without attention dropout; rows of at least 2,048 tokens, or
            batches of at least 20,480 positions at most 80% real), "always" packs wherever it can (a benchmark and
            testing mode: without such a kernel a block-diagonal mask does the same job, slower), "never" keeps the
            padded batch. Packed outputs are zeros at padding positions. Forwards with a cache, cross-attention, a UniLM
            mask, linear attention or requested attentions/hidden states, and batches where a head reads a padding
            position, keep the padded batch, so every head returns the padded result in every mode.

    Invalid values raise a `ValueError` (a `TypeError` for a wrong type) naming the field, the value and what is
    allowed: at construction, in `from_pretrained` (overrides included), on assignment of a field, and, for rules
    between fields, at the latest when a model is built from the config. See docs/configuration.md.

    Example:

    ```python
    >>> from hf_roformer import HfRoFormerConfig, HfRoFormerModel
    >>> config = HfRoFormerConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    >>> model = HfRoFormerModel(config)
    ```
    """

    model_type = "hf_roformer"
    # Saving copies this file next to the checkpoint and records it under `auto_map`.
    _auto_class = "AutoConfig"
    # The output the Trainer leaves out of evaluation logits: the cache (its field's name differs between releases).
    keys_to_ignore_at_inference = [CACHE_FIELD]
    # Tensor parallelism (`from_pretrained(..., distributed_config=DistributedConfig(tp_size=N))`; vLLM reads the same
    # plan): each rank holds some of the attention heads and a slice of the feed-forward width. Query, key, value and
    # the feed-forward expansion are split by output features ("colwise"); the two projections back to the hidden
    # size by input features ("rowwise"), their partial sums all-reduced. Embeddings, norms and poolers stay whole.
    base_model_tp_plan = {
        "encoder.layer.*.attention.self.query": "colwise",
        "encoder.layer.*.attention.self.key": "colwise",
        "encoder.layer.*.attention.self.value": "colwise",
        "encoder.layer.*.attention.output.dense": "rowwise",
        "encoder.layer.*.intermediate.dense": "colwise",
        "encoder.layer.*.output.dense": "rowwise",
    }

    vocab_size: int = 50000
    embedding_size: int | None = None
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 1536
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    rotary_value: bool = False
    rope_parameters: RopeParameters | dict | None = None
    use_cache: bool = True
    is_decoder: bool = False
    add_cross_attention: bool = False
    tie_word_embeddings: bool = True
    attention_type: str = "softmax"
    linear_feature_map: str = "elu"
    linear_rotation_order: str = "after_feature_map"
    linear_attention_eps: float = 1e-6
    linear_chunk_size: int = 64
    classifier_pooling: str = "cls"
    norm_type: str = "layer_norm"
    use_bias: bool = True
    pooler_activation: str | None = None
    unilm: bool = False
    padding_free: str = "auto"
    dropout_before_embeddings_norm: bool | None = None
    lm_head_transform: bool | None = None
    lm_head_layer_norm_eps: float | None = None

    def __post_init__(self, **kwargs):
        self._check_extra_keys(kwargs)
        rope_scaling = kwargs.get("rope_scaling")  # legacy name of `rope_parameters`
        if rope_scaling is not None and not isinstance(rope_scaling, dict):
            raise TypeError(f"`rope_scaling` must be a dict of rope parameters, got {shown(rope_scaling)}.")
        # Derived fields are resolved here, so saved configs carry the values the model was built with.
        if self.embedding_size is None:
            self.embedding_size = self.hidden_size
        if self.dropout_before_embeddings_norm is None:
            self.dropout_before_embeddings_norm = self.norm_type == "rms_norm"
        if self.lm_head_transform is None:
            self.lm_head_transform = self.norm_type != "rms_norm"
        if self.lm_head_layer_norm_eps is None:
            self.lm_head_layer_norm_eps = self.layer_norm_eps
        # Before transformers standardizes the dict, which silently fills a missing YaRN original length.
        check_explicit_original_length(self.rope_parameters or kwargs.get("rope_scaling"))
        super().__post_init__(**kwargs)
        if isinstance(self.rope_parameters, dict) and "type" in self.rope_parameters:
            check_legacy_type(self.rope_parameters)
            del self.rope_parameters["type"]  # legacy spelling of `rope_type`, already copied into it
        # `@strict` runs `validate()` (the rules between fields, below) right after this.

    def _check_extra_keys(self, kwargs: dict) -> None:
        """Keys that are not fields become attributes; refuse those that would replace a method or a derived
        property (a `config.json` holding `"head_dim"` or `"to_dict"`). A `head_dim` equal to the derived one is
        accepted and dropped."""
        if "head_dim" in kwargs:
            head_dim = kwargs.pop("head_dim")
            if head_dim != self.hidden_size / self.num_attention_heads:
                raise ValueError(
                    f"`head_dim` is derived as `hidden_size` / `num_attention_heads` = {self.hidden_size} / "
                    f"{self.num_attention_heads}; got {shown(head_dim)}. Remove it or change those fields."
                )
        for key, value in kwargs.items():
            if key in FIELD_RULES:  # properties such as `output_attentions`, set around `__setattr__`
                FIELD_RULES[key].check(key, value)
            attribute = inspect.getattr_static(type(self), key, None)
            read_only = isinstance(attribute, property) and attribute.fset is None
            if read_only or inspect.isroutine(attribute) or isinstance(attribute, (classmethod, staticmethod)):
                raise ValueError(f"`{key}` is not a configuration field: it names a method or read-only property.")

    @property
    def head_dim(self) -> int:
        """Width of one attention head, the dimension `d` that RoPE rotates."""
        return self.hidden_size // self.num_attention_heads

    # -- rules between fields (strict-dataclass class validators) ----------------------------------------------------

    def check_rules(self) -> None:
        """Every rule of this file: each field's, those between fields, token ids and rope parameters. What
        `validate()` checks, minus transformers' check of `output_attentions` against the attention backend, which a
        model chooses while it is being built."""
        self.validate_architecture()
        self.validate_token_ids()
        self.validate_rope()

    def validate_architecture(self) -> None:
        """Every field against its rule (values may have been set around `__setattr__`), then the rules between
        fields; raise a `ValueError` naming them."""
        for name, rule in FIELD_RULES.items():
            if name in self.__dict__ or name == "output_attentions":
                rule.check(name, getattr(self, name))
        if self.id2label is None:  # `num_labels` is its length
            raise ValueError(
                "`id2label` is None; a built config holds one name per label (set `num_labels` or `id2label`)."
            )
        for name, source in DERIVED_FIELDS.items():
            if getattr(self, name) is None:
                raise ValueError(
                    f"`{name}` is None; it is derived from `{source}` only when the config is built, so set a "
                    "value explicitly."
                )
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"`hidden_size` ({self.hidden_size}) must be a multiple of `num_attention_heads` "
                f"({self.num_attention_heads})."
            )
        if self.head_dim % 2 != 0:
            raise ValueError(
                f"RoPE rotates pairs of features, so the head dimension `hidden_size / num_attention_heads` must be "
                f"even, got {self.hidden_size} / {self.num_attention_heads} = {self.head_dim}."
            )
        if not self.lm_head_transform and self.embedding_size != self.hidden_size:
            raise ValueError(
                f"`lm_head_transform=False` (a bare tied embedding matrix as language-modeling head, the default for "
                f"`norm_type='rms_norm'`) needs `embedding_size` ({self.embedding_size}) equal to `hidden_size` "
                f"({self.hidden_size}): only the transform projects hidden states to the embedding width."
            )
        if self.add_cross_attention and not self.is_decoder:
            raise ValueError("`add_cross_attention=True` needs `is_decoder=True`: only decoders attend to an encoder.")
        if self.unilm and self.type_vocab_size < 2:
            raise ValueError(
                f"`unilm=True` needs `type_vocab_size` >= 2 (the target segment has token type 1), got "
                f"{self.type_vocab_size}."
            )

    def validate_token_ids(self) -> None:
        """Special token ids must lie in the vocabulary (transformers only warns)."""
        for name in ("pad_token_id", "bos_token_id", "eos_token_id"):
            value = getattr(self, name)
            ids = value if isinstance(value, list) else [value]
            if any(token_id is not None and token_id >= self.vocab_size for token_id in ids):
                raise ValueError(f"`{name}` ({value}) must lie in [0, vocab_size={self.vocab_size}).")

    def validate_rope(self) -> None:
        """Every key the rope type reads, by `config_rules_hf_roformer.ROPE_TYPE_RULES` (transformers' own rope
        validation only warns, and raises a `KeyError` for missing keys), then what linear attention needs of them."""
        validate_rope_parameters(self)
        rope_type = self.rope_parameters.get("rope_type", "default")
        if self.attention_type == "linear" and self.is_decoder and rope_type in LENGTH_DEPENDENT_TYPES:
            raise ValueError(  # a causal linear-attention state folds in each key once, rotated as it came
                f"`rope_parameters['rope_type']` {rope_type!r} changes every key's rotation as the input grows, which "
                "a causal linear-attention state cannot follow; use a static type (default, linear, ntk, yarn) with "
                "`attention_type='linear'` in decoders."
            )

    # -- reading ---------------------------------------------------------------------------------------------------

    @classmethod
    def _dict_from_json_file(cls, json_file) -> dict:
        """Read a config file; raise a `ValueError` naming the file when it is not JSON or holds no JSON object."""
        with open(json_file, encoding="utf-8") as reader:
            text = reader.read()
        try:
            config_dict = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{json_file} is not valid JSON: {error}.") from None
        if not isinstance(config_dict, dict):
            raise ValueError(
                f"{json_file} must hold a JSON object of configuration fields, got {shown(config_dict)} "
                f"({type(config_dict).__name__})."
            )
        return decode_special_floats(cls, config_dict)

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs) -> tuple[dict, dict]:
        """Read a config file; a transformers `roformer` config is translated, so its checkpoints load unchanged."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if config_dict.get("model_type") == "roformer":
            config_dict = translate_roformer_config(config_dict)
        return config_dict, kwargs

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """Build a config from a dict. Overrides of fields (`from_pretrained(path, num_attention_heads=16)`) go
        through construction with the rest, so they are validated together, never one at a time; a
        `rope_parameters` override without `rope_theta` keeps the checkpoint's."""
        if not isinstance(config_dict, dict):
            raise TypeError(f"`config_dict` must be a dict of configuration fields, got {type(config_dict).__name__}.")
        config_dict = dict(config_dict)
        rope_overrides = {
            key: kwargs.pop(key) for key in ("rope_parameters", "rope_scaling", "rope_theta") if key in kwargs
        }
        if rope_overrides:
            saved = config_dict.pop("rope_parameters", None) or {}
            new = rope_overrides.pop("rope_parameters", None) or rope_overrides.pop("rope_scaling", None)
            if isinstance(new, dict):
                new = dict(new)
                if isinstance(saved, dict) and "rope_theta" in saved:
                    new.setdefault("rope_theta", saved["rope_theta"])
            config_dict["rope_parameters"] = saved if new is None else new
            if "rope_theta" in rope_overrides and isinstance(config_dict["rope_parameters"], dict):
                config_dict["rope_parameters"] = {
                    **config_dict["rope_parameters"],
                    "rope_theta": rope_overrides["rope_theta"],
                }
        # transformers handles `dtype` itself ("auto" means: keep the checkpoint's).
        fields = {field.name for field in dataclasses.fields(cls)} - {"dtype"}
        config_dict.update({key: kwargs.pop(key) for key in list(kwargs) if key in fields})
        return super().from_dict(config_dict, **kwargs)


__all__ = ["HfRoFormerConfig"]
