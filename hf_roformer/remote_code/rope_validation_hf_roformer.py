"""The validation of `rope_parameters` (the config's; the frequencies themselves: `rope_scaling_hf_roformer.py`).

Every key a rope type reads has a rule (`KeyRule`, one per key, gathered per type in `ROPE_TYPE_RULES`);
`validate_rope_parameters` applies the rules of the configured type and raises instead of warning, so a config that
passes cannot fail later (division by zero, math domain errors, `None` arithmetic) or give non-finite frequencies.
Keys a type does not read are only reported, as transformers does.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import math
import numbers
import reprlib
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from transformers.utils import logging

from .rope_scaling_hf_roformer import ntk_base, rope_attention_factor


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


class KeyRule(NamedTuple):
    """What one `rope_parameters` key accepts: `allowed` says it in words (errors and docs), `accepts` tests it.
    `null_means_absent`: the type's reader treats `None` like a missing key, so `null` in a config file is fine.
    `real`: the key holds a real number (or a list of them), so an int given for it is taken as that float."""

    allowed: str
    accepts: Callable[[Any], bool]
    null_means_absent: bool = False
    real: bool = False


class RopeTypeRules(NamedTuple):
    """The keys one rope type reads (required and optional), and the smallest head dimension it works with."""

    required: dict[str, KeyRule]
    optional: dict[str, KeyRule]
    min_head_dim: int = 2


def length_rule(minimum: int, allowed: str | None = None) -> KeyRule:
    """A length in positions: an integer >= `minimum` and < `MAX_LENGTH` (`allowed`: the words, if others)."""
    words = f"an integer >= {minimum} and < {MAX_LENGTH_TEXT}"
    return KeyRule(
        words if allowed is None else allowed.format(length=words),
        lambda value: is_integer(value) and minimum <= value < MAX_LENGTH,
    )


THETA = KeyRule("a finite number > 1", lambda value: is_real(value) and value > 1, real=True)
FACTOR = KeyRule("a finite number >= 1", lambda value: is_real(value) and value >= 1, real=True)
LENGTH = length_rule(1)
POSITIVE = KeyRule("a finite number > 0", lambda value: is_real(value) and value > 0, real=True)
NON_NEGATIVE = KeyRule("a finite number >= 0", lambda value: is_real(value) and value >= 0, real=True)
YARN_BETA = KeyRule(
    f"a number in [{YARN_BETA_RANGE[0]:g}, {YARN_BETA_RANGE[1]:g}] (a count of rotations)",
    lambda value: is_real(value) and YARN_BETA_RANGE[0] <= value <= YARN_BETA_RANGE[1],
    null_means_absent=True,
    real=True,
)
ATTENTION_FACTOR = KeyRule(
    f"a number in (0, {MAX_ATTENTION_FACTOR:g}]",
    lambda value: is_real(value) and 0 < value <= MAX_ATTENTION_FACTOR,
    null_means_absent=True,
    real=True,
)
FULL_ROTATION = KeyRule(
    "1 (RoFormer rotates every feature pair; use rope_type 'proportional' for partial rotation)",
    lambda value: is_real(value) and value == 1,
    real=True,
)


def _factor_list(values) -> bool:
    return isinstance(values, (list, tuple)) and all(
        is_real(value) and FLOAT32_TINY <= value <= FLOAT32_MAX for value in values
    )


FACTOR_LIST = KeyRule(
    f"a list of head_dim / 2 numbers in [{FLOAT32_TINY:.3g}, {FLOAT32_MAX:.3g}]", _factor_list, real=True
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
            "original_max_position_embeddings": length_rule(
                1,
                "the length the model was pre-trained at ({length}, e.g. 512 for the original RoFormer checkpoints; "
                "transformers would silently take `max_position_embeddings`)",
            ),
        },
        {
            "beta_fast": YARN_BETA,
            "beta_slow": YARN_BETA,
            "attention_factor": ATTENTION_FACTOR,
            "mscale": NON_NEGATIVE._replace(null_means_absent=True),
            "mscale_all_dim": NON_NEGATIVE._replace(null_means_absent=True),
            "truncate": KeyRule("true or false", lambda value: isinstance(value, bool)),
            "partial_rotary_factor": FULL_ROTATION,
        },
    ),
    "longrope": RopeTypeRules(
        {
            "rope_theta": THETA,
            "short_factor": FACTOR_LIST,
            "long_factor": FACTOR_LIST,
            # The default attention factor divides by ln(original_max_position_embeddings).
            "original_max_position_embeddings": length_rule(2),
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
            "partial_rotary_factor": KeyRule(
                "a number in (0, 1] (the fraction of feature pairs rotated)",
                lambda value: is_real(value) and 0 < value <= 1,
                real=True,
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


def _take_ints_as_floats(parameters: dict, rules: dict[str, KeyRule]) -> None:
    """Replace, in place, the ints of keys that hold real numbers by those floats (JSON writers write `2` for `2.0`;
    and torch cannot take an int past int64 where a float works). Ints too large for a float stay, and fail their
    rule."""

    def as_float(value):
        if not is_integer(value):
            return value
        try:
            return float(value)
        except OverflowError:
            return value

    for key, rule in rules.items():
        if rule.real and key in parameters:
            value = parameters[key]
            parameters[key] = [as_float(item) for item in value] if isinstance(value, list) else as_float(value)


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
    _take_ints_as_floats(parameters, {**rules.required, **rules.optional})
    for key, rule in rules.required.items():
        if parameters.get(key) is None:
            raise ValueError(f"`rope_parameters['{key}']` is required for rope_type {rope_type!r}: {rule.allowed}.")
    for key, rule in {**rules.required, **rules.optional}.items():
        if key not in parameters or (parameters[key] is None and rule.null_means_absent):
            continue
        value = parameters[key]
        if not rule.accepts(value):
            raise ValueError(
                f"`rope_parameters['{key}']` must be {rule.allowed} for rope_type {rope_type!r}, got {shown(value)}."
            )
    unread = set(parameters) - set(rules.required) - set(rules.optional) - {"rope_type", "type"}
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


def supported_rope_types() -> list[str]:
    """Every `rope_type` accepted: ours plus transformers' (those `ROPE_TYPE_RULES` has validation rules for)."""
    return list(ROPE_TYPE_RULES)


__all__ = [
    "FLOAT32_TINY",
    "MAX_LENGTH",
    "MAX_LENGTH_TEXT",
    "ROPE_TYPE_RULES",
    "check_explicit_original_length",
    "check_legacy_type",
    "is_integer",
    "shown",
    "supported_rope_types",
    "validate_rope_parameters",
]
