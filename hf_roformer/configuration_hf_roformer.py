"""Configuration of the RoFormer model family (Su et al., "RoFormer: Enhanced Transformer with Rotary Position
Embedding").

Hub-bound: this file is copied next to every saved checkpoint so `trust_remote_code=True` loads work without the
package installed. It may import only `torch`, `transformers` and its sibling Hub-bound files.
"""

from huggingface_hub.dataclasses import strict
from transformers.activations import ACT2FN
from transformers.configuration_utils import PreTrainedConfig
from transformers.modeling_rope_utils import RopeParameters

from .linear_attention_hf_roformer import FEATURE_MAPS, ROTATION_ORDERS, check_linear_attention_rope
from .padding_free_hf_roformer import PADDING_FREE_MODES
from .rope_scaling_hf_roformer import check_explicit_original_length, validate_rope_parameters


def translate_roformer_config(config_dict: dict) -> dict:
    """Turn the dict of a `roformer` config (transformers' RoFormer, or the RoFormer-V2/Sim configs that carry
    `norm_type`, `use_bias` and `pooler_activation`) into one for `HfRoFormerConfig`.

    The hyper-parameters share names and meanings, so they carry over and select the same architecture; values this
    architecture does not implement fail validation with a `ValueError` naming the key.
    """
    translated = dict(config_dict)
    translated["model_type"] = HfRoFormerConfig.model_type
    return translated


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
        classifier_pooling: How `HfRoFormerForSequenceClassification` summarizes a sequence: "cls" (the first token,
            then dense + activation, as transformers' RoFormer) or "mean" (masked mean of all tokens, then one linear
            layer, the original CAIL2019-SCM recipe).
        padding_free: How padded batches attend: "auto" packs the real tokens of every row into one row after the
            embeddings and attends per sequence wherever a variable-length kernel runs (flash backends; SDPA on CUDA
            in half precision without attention dropout, torch >= 2.10), "always" packs them on every backend
            (without such a kernel a block-diagonal mask does the same job, no faster), "never" keeps the padded
            batch. Packed outputs are zeros at padding positions. Forwards with a cache, cross-attention, a UniLM mask,
            linear attention or requested attentions/hidden states always keep the padded batch.

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
    keys_to_ignore_at_inference = ["past_key_values"]

    vocab_size: int = 50000
    embedding_size: int | None = None
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float | int = 0.1
    attention_probs_dropout_prob: float | int = 0.1
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
        if self.embedding_size is None:
            self.embedding_size = self.hidden_size
        # Derived fields are resolved here, so saved configs carry the values the model was built with.
        if self.dropout_before_embeddings_norm is None:
            self.dropout_before_embeddings_norm = self.norm_type == "rms_norm"
        if self.lm_head_transform is None:
            self.lm_head_transform = self.norm_type != "rms_norm"
        if self.lm_head_layer_norm_eps is None:
            self.lm_head_layer_norm_eps = self.layer_norm_eps
        # Checked here, not only in the strict validators, so that a bad value raises a plain `ValueError` at
        # construction (the validators wrap errors in huggingface_hub's own exception type).
        self.check_architecture()
        # Before transformers standardizes the dict, which silently fills a missing YaRN original length.
        check_explicit_original_length(self.rope_parameters or kwargs.get("rope_scaling"))
        super().__post_init__(**kwargs)
        self.rope_parameters.pop("type", None)  # legacy spelling of `rope_type`, already copied into it
        validate_rope_parameters(self.rope_parameters, self.head_dim)
        check_linear_attention_rope(self)

    @property
    def head_dim(self) -> int:
        """Width of one attention head, the dimension `d` that RoPE rotates."""
        return self.hidden_size // self.num_attention_heads

    def check_architecture(self) -> None:
        """Raise a `ValueError` naming the field when the hyper-parameters cannot describe a RoFormer."""
        positive_fields = (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        for name in positive_fields:
            value = getattr(self, name)
            if value <= 0:
                raise ValueError(f"`{name}` must be a positive integer, got {value}.")
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
        if self.hidden_act not in ACT2FN:
            raise ValueError(
                f"`hidden_act` {self.hidden_act!r} is not a known activation; use one of {sorted(ACT2FN)}."
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"`{name}` must be a probability in [0, 1], got {value}.")
        if self.layer_norm_eps <= 0:
            raise ValueError(f"`layer_norm_eps` must be positive, got {self.layer_norm_eps}.")
        if self.pad_token_id is not None and not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"`pad_token_id` ({self.pad_token_id}) must lie in [0, vocab_size={self.vocab_size}).")
        if self.add_cross_attention and not self.is_decoder:
            raise ValueError("`add_cross_attention=True` needs `is_decoder=True`: only decoders attend to an encoder.")
        self.check_linear_attention()
        if self.norm_type not in ("layer_norm", "rms_norm"):
            raise ValueError(f"`norm_type` must be 'layer_norm' or 'rms_norm', got {self.norm_type!r}.")
        if self.pooler_activation not in (None, "tanh", "linear"):
            raise ValueError(f"`pooler_activation` must be None, 'tanh' or 'linear', got {self.pooler_activation!r}.")
        if self.padding_free not in PADDING_FREE_MODES:
            raise ValueError(f"`padding_free` must be one of {list(PADDING_FREE_MODES)}, got {self.padding_free!r}.")
        if self.classifier_pooling not in ("cls", "mean"):
            raise ValueError(f"`classifier_pooling` must be 'cls' or 'mean', got {self.classifier_pooling!r}.")

    def check_linear_attention(self) -> None:
        """Raise a `ValueError` naming the field for linear-attention settings that cannot work."""
        if self.attention_type not in ("softmax", "linear"):
            raise ValueError(f"`attention_type` must be 'softmax' or 'linear', got {self.attention_type!r}.")
        if self.linear_feature_map not in FEATURE_MAPS:
            raise ValueError(f"`linear_feature_map` {self.linear_feature_map!r} is not one of {list(FEATURE_MAPS)}.")
        if self.linear_rotation_order not in ROTATION_ORDERS:
            raise ValueError(
                f"`linear_rotation_order` {self.linear_rotation_order!r} is not one of {list(ROTATION_ORDERS)}."
            )
        if not self.linear_attention_eps > 0:
            raise ValueError(f"`linear_attention_eps` must be positive, got {self.linear_attention_eps}.")
        if self.linear_chunk_size <= 0:
            raise ValueError(f"`linear_chunk_size` must be a positive integer, got {self.linear_chunk_size}.")

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs) -> tuple[dict, dict]:
        """Read a config file; a transformers `roformer` config is translated, so its checkpoints load unchanged."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if config_dict.get("model_type") == "roformer":
            config_dict = translate_roformer_config(config_dict)
        return config_dict, kwargs

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """Build a config from a dict. Rope settings passed as overrides (`from_pretrained(path,
        rope_parameters={...})`) go through construction, so they are standardized and validated like any other; a
        `rope_parameters` override without `rope_theta` keeps the checkpoint's."""
        overrides = {key: kwargs.pop(key) for key in ("rope_parameters", "rope_scaling", "rope_theta") if key in kwargs}
        if overrides:
            config_dict = dict(config_dict)
            saved = config_dict.pop("rope_parameters", None) or {}
            new = overrides.pop("rope_parameters", None) or overrides.pop("rope_scaling", None)
            if new is not None:
                new = dict(new)
                if "rope_theta" in saved:
                    new.setdefault("rope_theta", saved["rope_theta"])
                config_dict["rope_parameters"] = new
            else:
                config_dict["rope_parameters"] = saved
            if "rope_theta" in overrides:
                config_dict["rope_parameters"]["rope_theta"] = overrides["rope_theta"]
        return super().from_dict(config_dict, **kwargs)

    def validate_architecture(self) -> None:
        """Strict-dataclass validator: re-checks the hyper-parameters when `config.validate()` runs after edits."""
        self.check_architecture()

    def _validate_own_rope_parameters(self, rope_parameters: dict, ignore_keys: set | None = None) -> None:
        """transformers' per-type rope validation hook, replaced for the types whose meaning differs here: `ntk`
        (unknown to transformers), `dynamic` (reads `original_max_position_embeddings`) and `yarn` (whose check warns
        when `factor` differs from `max_position_embeddings / original_max_position_embeddings`, but here
        `max_position_embeddings` is the trained length, not a target). The full check runs in `__post_init__`."""
        validate_rope_parameters(rope_parameters, self.head_dim)

    _validate_ntk_rope_parameters = _validate_own_rope_parameters
    _validate_dynamic_rope_parameters = _validate_own_rope_parameters
    _validate_yarn_rope_parameters = _validate_own_rope_parameters


__all__ = ["HfRoFormerConfig"]
