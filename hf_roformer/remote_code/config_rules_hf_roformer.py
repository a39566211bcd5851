"""What a RoFormer config accepts, in one rule style: a `Rule` for each field (`FIELD_RULES`) and for each key of
`rope_parameters` a rope type reads (`ROPE_TYPE_RULES`), and the checks transformers does not make.

transformers' `@strict` checks a field's type only, and its rope validation warns where a value cannot work (a
missing key is a `KeyError`); these rules refuse, before any work, every value that would fail later (division by
zero, math domain errors, `None` arithmetic) or give non-finite numbers, with a `ValueError` (a `TypeError` for a
field of the wrong type) naming the field or key, the value and what is allowed. The config
(`configuration_hf_roformer`) applies them; what crosses fields is its `validate_architecture`. Also here: the
numbers rope parameters give before any tensor exists (the NTK base, the attention factor, whether frequencies
depend on the length), which both the rules and the frequencies (`rotary_hf_roformer`) read.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import math
import numbers
import reprlib
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.utils import logging


logger = logging.get_logger(__name__)

# Transformers' rope types build their factors as float32 tensors: anything below this becomes 0 (then 1/0) there.
FLOAT32_TINY = torch.finfo(torch.float32).tiny
FLOAT32_MAX = torch.finfo(torch.float32).max
# Positions are int64 tensors: no length reaches 2**63 (beyond it torch cannot even hold the number).
MAX_LENGTH = 2**63
MAX_LENGTH_TEXT = "2**63"
# YaRN's beta_fast and beta_slow count rotations and enter as ln(original length / (2 pi beta)): far outside this
# range the quotient overflows (a math domain error, or an infinity that cannot be rounded with `truncate`).
YARN_BETA_RANGE = (1e-100, 1e100)
# Bound on the factor a rope type puts on queries and keys. YaRN's 0.1 ln s + 1 reaches it only at s ~ 1e39 and
# LongRoPE's sqrt(1 + ln s / ln L) at ln s = 99 ln L; beyond it the squared factor overflows attention logits.
MAX_ATTENTION_FACTOR = 10.0


def is_real(value) -> bool:
    """A finite int or float (bools excluded; an int too large for a float is not finite)."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def is_integer(value) -> bool:
    """An int (bools excluded)."""
    return isinstance(value, int) and not isinstance(value, bool)


def shown(value: Any) -> str:
    """`repr` of a value for an error message, shortened for long lists and strings."""
    return SHORT_REPR.repr(value)


SHORT_REPR = reprlib.Repr()
SHORT_REPR.maxstring = SHORT_REPR.maxother = 80
SHORT_REPR.maxlist = SHORT_REPR.maxdict = 8


def as_float(value: Any) -> Any:
    """An int as that float (JSON writers write `2` for `2.0`); an int too large for a float stays, to fail its rule."""
    if not is_integer(value):
        return value
    try:
        return float(value)
    except OverflowError:
        return value


class Rule(NamedTuple):
    """What one value accepts (a config field, or a key of `rope_parameters`): values of `types` (a bool is never
    taken for an int or float) that pass `test`. `allowed` says it in words, for error messages and the
    documentation. `real`: the value is a real number (or a list of them), so an int given for it is taken as that
    float. `null_means_absent`: the reader treats `None` like a missing key, so `null` in a config file is fine."""

    allowed: str
    types: tuple[type, ...]
    test: Callable[[Any], bool] | None = None
    real: bool = False
    null_means_absent: bool = False

    def held(self, value: Any) -> Any:
        """`value` as it is held: ints as floats where the rule takes real numbers."""
        if not self.real:
            return value
        return [as_float(item) for item in value] if isinstance(value, list) else as_float(value)

    def has_type(self, value: Any) -> bool:
        """Whether `value` is of the rule's types (a bool only where the rule takes bools)."""
        return isinstance(value, self.types) and (bool in self.types or not isinstance(value, bool))

    def accepts(self, value: Any) -> bool:
        """Whether `value` (as held) is of the rule's types and passes its test."""
        return self.has_type(value) and (self.test is None or bool(self.test(value)))

    def check(self, name: str, value: Any) -> Any:
        """Return `value` as held; raise a `TypeError` (wrong type) or `ValueError` (wrong value, an int too large
        for a float included) naming the field `name`, the value and `allowed`."""
        value = self.held(value)
        if not self.has_type(value) and not (self.real and is_integer(value)):
            raise TypeError(f"`{name}` must be {self.allowed}, got {shown(value)} ({type(value).__name__}).")
        if not self.accepts(value):
            raise ValueError(f"`{name}` must be {self.allowed}, got {shown(value)}.")
        return value


# -- the fields ------------------------------------------------------------------------------------------------------

# Linear attention's feature maps and rotation orders (`linear_attention_hf_roformer` implements them), and the
# padding-free modes (the model forward's unpadding, `modeling_hf_roformer`).
FEATURE_MAPS = ("elu", "relu", "softmax")
ROTATION_ORDERS = ("after_feature_map", "before_feature_map")
PADDING_FREE_MODES = ("auto", "always", "never")


def integer(minimum: int, maybe_none: bool = False, meaning: str = "", length: bool = False) -> Rule:
    """An int >= `minimum` (or None); a `length` also below `MAX_LENGTH`, as positions are int64."""
    allowed = f"an integer >= {minimum}" + (f" and < {MAX_LENGTH_TEXT}" if length else "")
    allowed += (" or None" + meaning) if maybe_none else ""
    types = (int, type(None)) if maybe_none else (int,)
    return Rule(
        allowed, types, lambda value: value is None or (value >= minimum and (not length or value < MAX_LENGTH))
    )


def number(allowed: str, test: Callable[[float], bool], maybe_none: bool = False) -> Rule:
    """A finite float (an int is taken as that float) passing `test` (or None)."""
    types = (float, type(None)) if maybe_none else (float,)
    return Rule(allowed, types, lambda value: value is None or (math.isfinite(value) and test(value)), real=True)


def one_of(*choices) -> Rule:
    """One of the given strings (or None, if listed)."""
    types = tuple({type(choice) for choice in choices})
    return Rule(f"one of {list(choices)}", types, lambda value: value in choices)


# Activations every transformers release names (keys of `ACT2FN`, checked by tests/test_config.py), accepted without
# importing `transformers.activations`, which imports transformers' weight-loading machinery (seconds): a config stays
# light to import and build.
COMMON_ACTIVATIONS = frozenset({"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "relu", "silu", "swish", "tanh"})


def is_activation(name: str) -> bool:
    """Whether `name` is a key of transformers' `ACT2FN`."""
    if name in COMMON_ACTIVATIONS:
        return True
    from transformers.activations import ACT2FN

    return name in ACT2FN


def is_float_dtype(value) -> bool:
    """A floating-point torch dtype (the dtype weights are loaded in)."""
    return isinstance(value, torch.dtype) and value.is_floating_point


def is_token_id_list(value) -> bool:
    """A non-empty list of ints >= 0."""
    return isinstance(value, list) and len(value) > 0 and all(is_integer(item) and item >= 0 for item in value)


def is_label_map(value, key_types: tuple[type, ...], value_types: tuple[type, ...]) -> bool:
    """A non-empty dict with keys and values of the given types; str keys of `id2label` must spell integers."""
    return (
        len(value) > 0
        and all(isinstance(key, key_types) and not isinstance(key, bool) for key in value)
        and all(isinstance(item, value_types) and not isinstance(item, bool) for item in value.values())
        and all(not isinstance(key, str) or key.lstrip("-").isdigit() for key in value if int in key_types)
    )


# Norm epsilons and the linear-attention clamp are used in float32: below FLOAT32_TINY they round to 0 (then 0 / 0).
BOOL = Rule("true or false", (bool,))
BOOL_OR_NONE = Rule("true, false or None", (bool, type(None)))
PROBABILITY = number("a probability in [0, 1]", lambda value: 0 <= value <= 1)
EPSILON = number(
    f"a finite float >= {FLOAT32_TINY:.3g} (float32's smallest normal number)", lambda value: value >= FLOAT32_TINY
)
TOKEN_ID = integer(0, maybe_none=True)

FIELD_RULES: dict[str, Rule] = {
    "vocab_size": integer(1),
    "embedding_size": integer(1, maybe_none=True, meaning=" (None: `hidden_size`)"),
    "hidden_size": integer(2),
    "num_hidden_layers": integer(1),
    "num_attention_heads": integer(1),
    "intermediate_size": integer(1),
    "hidden_act": Rule("a key of transformers' ACT2FN (e.g. 'gelu', 'relu', 'silu')", (str,), is_activation),
    "hidden_dropout_prob": PROBABILITY,
    "attention_probs_dropout_prob": PROBABILITY,
    "max_position_embeddings": integer(1, length=True),
    "type_vocab_size": integer(1),
    "initializer_range": number("a standard deviation in [0, 1]", lambda value: 0 <= value <= 1),
    "layer_norm_eps": EPSILON,
    "pad_token_id": TOKEN_ID,
    "bos_token_id": TOKEN_ID,
    "eos_token_id": Rule(
        "an integer >= 0, a non-empty list of them, or None",
        (int, list, type(None)),
        lambda value: value is None or is_token_id_list(value) or (not isinstance(value, list) and value >= 0),
    ),
    "rotary_value": BOOL,
    "rope_parameters": Rule(
        "a dict such as {'rope_type': 'default', 'rope_theta': 10000.0} (None, the default, when the config is built)",
        (dict, type(None)),
    ),
    "use_cache": BOOL,
    "is_decoder": BOOL,
    "add_cross_attention": BOOL,
    "tie_word_embeddings": BOOL,
    "attention_type": one_of("softmax", "linear"),
    "linear_feature_map": one_of(*FEATURE_MAPS),
    "linear_rotation_order": one_of(*ROTATION_ORDERS),
    "linear_attention_eps": EPSILON,
    "linear_chunk_size": integer(1),
    "classifier_pooling": one_of("cls", "mean"),
    "norm_type": one_of("layer_norm", "rms_norm"),
    "use_bias": BOOL,
    "pooler_activation": one_of(None, "tanh", "linear"),
    "unilm": BOOL,
    "padding_free": one_of(*PADDING_FREE_MODES),
    "dropout_before_embeddings_norm": Rule("true, false or None (None: derived from `norm_type`)", (bool, type(None))),
    "lm_head_transform": Rule("true, false or None (None: derived from `norm_type`)", (bool, type(None))),
    "lm_head_layer_norm_eps": number(
        EPSILON.allowed + " or None (None: `layer_norm_eps`)", EPSILON.test, maybe_none=True
    ),
    # Fields every transformers config has.
    "output_hidden_states": BOOL_OR_NONE,
    "return_dict": BOOL_OR_NONE,
    "chunk_size_feed_forward": integer(0),
    "is_encoder_decoder": Rule(
        "false (a RoFormer is an encoder or a decoder; pair two in transformers' EncoderDecoderModel)",
        (bool,),
        lambda value: value is False,
    ),
    "dtype": Rule(
        "None, a floating-point torch.dtype or its name (e.g. 'float32', 'bfloat16')",
        (str, torch.dtype, type(None)),
        lambda value: value is None or is_float_dtype(getattr(torch, value, None) if isinstance(value, str) else value),
    ),
    "problem_type": one_of(None, "regression", "single_label_classification", "multi_label_classification"),
    # transformers' sequence-summary key, as its RoFormer reads it: the position the multiple-choice head scores
    # ("last" when absent; the values that head supports).
    "summary_type": one_of("last", "first"),
    # Not fields: properties that take their values from keyword arguments.
    "num_labels": integer(1),
    "output_attentions": BOOL,
    "id2label": Rule(
        "None or a non-empty dict from label ids (integers, or strings of them) to names",
        (dict, type(None)),
        lambda value: value is None or is_label_map(value, (int, str), (str,)),
    ),
    "label2id": Rule(
        "None or a non-empty dict from label names to ids",
        (dict, type(None)),
        lambda value: value is None or is_label_map(value, (str,), (int, str)),
    ),
    "transformers_version": Rule("a string or None", (str, type(None))),
    "architectures": Rule(
        "None or a list of class names",
        (list, type(None)),
        lambda value: value is None or all(isinstance(name, str) for name in value),
    ),
}
# Fields `__post_init__` resolves from others when they are None, so a built config always holds a value.
DERIVED_FIELDS = {
    "embedding_size": "hidden_size",
    "dropout_before_embeddings_norm": "norm_type",
    "lm_head_transform": "norm_type",
    "lm_head_layer_norm_eps": "layer_norm_eps",
}


# -- the numbers rope parameters give ------------------------------------------------------------------------------

# Types written in `rotary_hf_roformer` (transformers lacks them or gets them in a way that breaks long inputs),
# and the types whose frequencies depend on the length of the input.
OWN_TYPES = ("default", "ntk", "dynamic")
LENGTH_DEPENDENT_TYPES = ("dynamic", "longrope")


def original_length(config) -> int:
    """The pre-training length `L` scaled types extend: `original_max_position_embeddings`, else
    `max_position_embeddings`."""
    return config.rope_parameters.get("original_max_position_embeddings") or config.max_position_embeddings


def is_length_dependent(config) -> bool:
    """Whether the frequencies depend on the input length (`dynamic`, `longrope`)."""
    return config.rope_parameters.get("rope_type", "default") in LENGTH_DEPENDENT_TYPES


def rope_attention_factor(config) -> float:
    """The factor the rope type puts on queries and keys (YaRN's sqrt(1/t) = 0.1 ln s + 1, longrope's
    sqrt(1 + ln s / ln L), 1 otherwise). Attention logits are multiplied by its square."""
    rope_type = config.rope_parameters.get("rope_type", "default")
    if rope_type in OWN_TYPES:
        return 1.0
    # The factor is plain Python arithmetic; "meta" skips the frequency tensors (and works inside meta-device init).
    return float(ROPE_INIT_FUNCTIONS[rope_type](config, torch.device("meta"))[1])


def ntk_base(base: float, factor: float, head_dim: int) -> float:
    """NTK-aware base: base * s^(d / (d - 2)) (the seed article's static NTK scaling)."""
    return base * factor ** (head_dim / (head_dim - 2))


# -- the keys of each rope type --------------------------------------------------------------------------------------


class RopeTypeRules(NamedTuple):
    """The keys one rope type reads (required and optional), and the smallest head dimension it works with."""

    required: dict[str, Rule]
    optional: dict[str, Rule]
    min_head_dim: int = 2


def _factor_list(values) -> bool:
    return all(is_real(value) and FLOAT32_TINY <= value <= FLOAT32_MAX for value in values)


THETA = number("a finite number > 1", lambda value: value > 1)
FACTOR = number("a finite number >= 1", lambda value: value >= 1)
LENGTH = integer(1, length=True)
POSITIVE = number("a finite number > 0", lambda value: value > 0)
NON_NEGATIVE = number("a finite number >= 0", lambda value: value >= 0)
YARN_BETA = number(
    f"a number in [{YARN_BETA_RANGE[0]:g}, {YARN_BETA_RANGE[1]:g}] (a count of rotations)",
    lambda value: YARN_BETA_RANGE[0] <= value <= YARN_BETA_RANGE[1],
)._replace(null_means_absent=True)
ATTENTION_FACTOR = number(
    f"a number in (0, {MAX_ATTENTION_FACTOR:g}]", lambda value: 0 < value <= MAX_ATTENTION_FACTOR
)._replace(null_means_absent=True)
FULL_ROTATION = number(
    "1 (RoFormer rotates every feature pair; use rope_type 'proportional' for partial rotation)",
    lambda value: value == 1,
)
FACTOR_LIST = Rule(
    f"a list of head_dim / 2 numbers in [{FLOAT32_TINY:.3g}, {FLOAT32_MAX:.3g}]", (list, tuple), _factor_list, real=True
)

ROPE_TYPE_RULES: dict[str, RopeTypeRules] = {
    "default": RopeTypeRules({"rope_theta": THETA}, {"partial_rotary_factor": FULL_ROTATION}),
    "linear": RopeTypeRules({"rope_theta": THETA, "factor": FACTOR}, {"partial_rotary_factor": FULL_ROTATION}),
    # base * s^(d / (d - 2)): d = 2 would divide by zero.
    "ntk": RopeTypeRules(
        {"rope_theta": THETA, "factor": FACTOR}, {"partial_rotary_factor": FULL_ROTATION}, min_head_dim=4
    ),
    "dynamic": RopeTypeRules(
        {"rope_theta": THETA, "factor": FACTOR},
        {
            "original_max_position_embeddings": LENGTH._replace(null_means_absent=True),
            "partial_rotary_factor": FULL_ROTATION,
        },
        min_head_dim=4,
    ),
    "yarn": RopeTypeRules(
        {
            "rope_theta": THETA,  # YaRN divides by ln(rope_theta)
            "factor": FACTOR,
            "original_max_position_embeddings": LENGTH._replace(
                allowed=f"the length the model was pre-trained at ({LENGTH.allowed}, e.g. 512 for the original "
                "RoFormer checkpoints; transformers would silently take `max_position_embeddings`)"
            ),
        },
        {
            "beta_fast": YARN_BETA,
            "beta_slow": YARN_BETA,
            "attention_factor": ATTENTION_FACTOR,
            "mscale": NON_NEGATIVE._replace(null_means_absent=True),
            "mscale_all_dim": NON_NEGATIVE._replace(null_means_absent=True),
            "truncate": BOOL,
            "partial_rotary_factor": FULL_ROTATION,
        },
    ),
    "longrope": RopeTypeRules(
        {
            "rope_theta": THETA,
            "short_factor": FACTOR_LIST,
            "long_factor": FACTOR_LIST,
            # The default attention factor divides by ln(original_max_position_embeddings).
            "original_max_position_embeddings": integer(2, length=True),
        },
        {
            "factor": FACTOR._replace(null_means_absent=True),
            "attention_factor": ATTENTION_FACTOR,
            "partial_rotary_factor": FULL_ROTATION,
        },
    ),
    "llama3": RopeTypeRules(
        {
            "rope_theta": THETA,
            "factor": FACTOR,
            "low_freq_factor": POSITIVE,
            "high_freq_factor": POSITIVE,
            "original_max_position_embeddings": LENGTH,
        },
        {"partial_rotary_factor": FULL_ROTATION},
    ),
    "proportional": RopeTypeRules(
        {"rope_theta": THETA},
        {
            "factor": FACTOR,
            "partial_rotary_factor": number(
                "a number in (0, 1] (the fraction of feature pairs rotated)", lambda value: 0 < value <= 1
            ),
        },
    ),
}


def _ordered_pair_errors(parameters: dict, rope_type: str) -> str | None:
    """Rules between two keys of one type: YaRN's beta_fast > beta_slow, llama3's high > low frequency factor."""
    if rope_type == "yarn":
        beta_fast = parameters.get("beta_fast") or 32  # transformers' defaults, also for null
        beta_slow = parameters.get("beta_slow") or 1
        if beta_fast <= beta_slow:
            return (
                f"`rope_parameters['beta_fast']` ({beta_fast}) must be greater than `rope_parameters['beta_slow']` "
                f"({beta_slow}) for rope_type 'yarn' (defaults 32 and 1)."
            )
    if rope_type == "llama3" and parameters["high_freq_factor"] <= parameters["low_freq_factor"]:
        return (
            f"`rope_parameters['high_freq_factor']` ({parameters['high_freq_factor']}) must be greater than "
            f"`rope_parameters['low_freq_factor']` ({parameters['low_freq_factor']}) for rope_type 'llama3'."
        )
    return None


def check_explicit_original_length(rope_parameters) -> None:
    """YaRN needs the pre-training length spelled out: transformers silently takes `max_position_embeddings`, which
    is wrong whenever that field already holds the extended length. Runs on the dict as given, before transformers
    standardizes it."""
    if not isinstance(rope_parameters, dict):
        return
    rope_type = rope_parameters.get("rope_type", rope_parameters.get("type"))
    if rope_type == "yarn" and rope_parameters.get("original_max_position_embeddings") is None:
        rule = ROPE_TYPE_RULES["yarn"].required["original_max_position_embeddings"]
        raise ValueError(
            f"`rope_parameters['original_max_position_embeddings']` is required for rope_type 'yarn': {rule.allowed}."
        )


def check_legacy_type(parameters: dict) -> None:
    """`type`, the legacy spelling of `rope_type`, may stay next to it only with the same value."""
    rope_type = parameters.get("rope_type", "default")
    if "type" in parameters and parameters["type"] != rope_type:
        raise ValueError(
            f"`rope_parameters['type']` ({parameters['type']!r}) is the legacy spelling of 'rope_type' and differs "
            f"from it ({rope_type!r}); remove it."
        )


def validate_rope_parameters(config) -> None:
    """Raise a `ValueError` (or `TypeError` for a wrong type) naming the key, its value and what is allowed, for
    `config.rope_parameters` that cannot describe a rotary embedding of `config.head_dim`. Unread keys are logged.

    Ints given for keys that hold real numbers become those floats, in place: every way to a model passes here (the
    config's construction, `validate()`, saving and building a model)."""
    parameters = config.rope_parameters
    if not isinstance(parameters, dict):
        raise TypeError(
            f"`rope_parameters` must be a dict such as {{'rope_type': 'default', 'rope_theta': 10000.0}}, got "
            f"{shown(parameters)} ({type(parameters).__name__}); None is accepted only when the config is built."
        )
    rope_type = parameters.get("rope_type", "default")
    if not isinstance(rope_type, str) or rope_type not in ROPE_TYPE_RULES:
        raise ValueError(
            f"`rope_parameters['rope_type']` must be one of {list(ROPE_TYPE_RULES)}, got {shown(rope_type)}."
        )
    check_legacy_type(parameters)
    rules = ROPE_TYPE_RULES[rope_type]
    for key, rule in rules.required.items():
        if parameters.get(key) is None:
            raise ValueError(f"`rope_parameters['{key}']` is required for rope_type {rope_type!r}: {rule.allowed}.")
    read = {**rules.required, **rules.optional}
    for key, rule in read.items():
        if key not in parameters or (parameters[key] is None and rule.null_means_absent):
            continue
        value = parameters[key] = rule.held(parameters[key])
        if not rule.accepts(value):
            raise ValueError(
                f"`rope_parameters['{key}']` must be {rule.allowed} for rope_type {rope_type!r}, got {shown(value)}."
            )
    unread = set(parameters) - set(read) - {"rope_type", "type"}
    if unread:
        logger.warning(f"`rope_parameters` keys {sorted(map(str, unread))} are not read by rope_type {rope_type!r}.")
    if (error := _ordered_pair_errors(parameters, rope_type)) is not None:
        raise ValueError(error)
    _check_head_dim(config, rope_type, rules)
    _check_results(config, rope_type)


def _check_head_dim(config, rope_type: str, rules: RopeTypeRules) -> None:
    """Head-dimension needs of the type: NTK types need d >= 4, longrope's lists hold one factor per feature pair."""
    head_dim = config.head_dim
    if head_dim < rules.min_head_dim:
        raise ValueError(
            f"rope_type {rope_type!r} needs a head dimension of at least {rules.min_head_dim} (its base is scaled by "
            f"factor^(d / (d - 2))), got `hidden_size` / `num_attention_heads` = {config.hidden_size} / "
            f"{config.num_attention_heads} = {head_dim}."
        )
    if rope_type == "longrope":
        for key in ("short_factor", "long_factor"):
            count = len(config.rope_parameters[key])
            if count != head_dim // 2:
                raise ValueError(
                    f"`rope_parameters['{key}']` has {count} values; it needs head_dim / 2 = {head_dim // 2} "
                    f"(`hidden_size` {config.hidden_size} / `num_attention_heads` {config.num_attention_heads} / 2)."
                )


def _check_results(config, rope_type: str) -> None:
    """What the keys give together: a finite NTK base, and an attention factor in (0, MAX_ATTENTION_FACTOR]."""
    parameters = config.rope_parameters
    if rope_type == "ntk":
        try:
            base = ntk_base(parameters["rope_theta"], parameters["factor"], config.head_dim)
        except OverflowError:
            base = math.inf
        if not math.isfinite(base):
            raise ValueError(
                f"`rope_parameters['factor']` ({parameters['factor']}) is too large: the NTK base rope_theta * "
                f"factor^(d / (d - 2)) with rope_theta={parameters['rope_theta']} and d={config.head_dim} overflows."
            )
    factor = rope_attention_factor(config)
    if not 0 < factor <= MAX_ATTENTION_FACTOR:
        sources = ATTENTION_FACTOR_SOURCES if parameters.get("attention_factor") is None else ("attention_factor",)
        given = ", ".join(
            f"`rope_parameters['{key}']`={shown(parameters[key])}" for key in sources if key in parameters
        )
        raise ValueError(
            f"{given} give rope_type {rope_type!r} an attention factor of {factor:.6g}; it must lie in "
            f"(0, {MAX_ATTENTION_FACTOR:g}]."
        )


# The keys transformers derives an attention factor from when `attention_factor` is not given.
ATTENTION_FACTOR_SOURCES = ("factor", "mscale", "mscale_all_dim", "original_max_position_embeddings")


__all__ = [
    "FIELD_RULES",
    "LENGTH_DEPENDENT_TYPES",
    "ROPE_TYPE_RULES",
    "Rule",
    "is_length_dependent",
    "ntk_base",
    "original_length",
    "rope_attention_factor",
    "validate_rope_parameters",
]
