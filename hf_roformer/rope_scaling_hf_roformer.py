"""Rotary frequencies for every rope type, and the validation of `rope_parameters`.

RoFormer's interleaved layout changes how frequencies are applied, not which frequencies: the scaled types are those of
transformers' rope utilities (`ROPE_INIT_FUNCTIONS`: linear, yarn, llama3, longrope, ...), reused as they are. Written
here are only what transformers lacks or gets in a way that breaks long inputs:

- `default` and static `ntk` (base * s^(d/(d-2))), in float64 so angles stay exact at long positions;
- `dynamic` NTK, vectorized over lengths (one frequency set per sequence in encoders, per query in decoders, so that
  cached decoding is exact) and measured against `original_max_position_embeddings` when it is given;
- validation that raises instead of warning.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import math
import numbers

import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS


OWN_TYPES = ("default", "ntk", "dynamic")
# Types whose frequencies depend on the length of the input.
LENGTH_DEPENDENT_TYPES = ("dynamic", "longrope")


def supported_rope_types() -> list[str]:
    """Every `rope_type` accepted: ours plus every type transformers' rope utilities know."""
    return sorted(set(OWN_TYPES) | set(ROPE_INIT_FUNCTIONS))


def angle_dtype(device: torch.device) -> torch.dtype:
    """Dtype in which frequencies and rotation angles are computed: float64 where the device has it.

    Angles grow with the position; in float32 `m * theta` has an absolute error of ~1e-2 rad at m = 1e5, so cos/sin of
    long positions would be wrong whatever dtype the model runs in. MPS has no float64 and falls back to float32.
    """
    return torch.float32 if device.type == "mps" else torch.float64


def default_inverse_frequencies(
    head_dim: int, rope_theta: float = 10000.0, device: torch.device | None = None
) -> torch.Tensor:
    """The paper's frequencies theta_i = rope_theta^(-2i/d), i = 0 .. d/2 - 1 (eq. 15), in float64."""
    device = torch.device("cpu") if device is None else torch.device(device)
    exponents = torch.arange(0, head_dim, 2, dtype=angle_dtype(device), device=device) / head_dim
    return rope_theta**-exponents


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


def rope_inverse_frequencies(
    config, lengths: torch.Tensor | None = None, device: torch.device | None = None
) -> torch.Tensor:
    """Inverse frequencies for `config.rope_parameters`, in float64 (float32 on MPS).

    Static types return shape `(head_dim // 2,)`. Length-dependent types (`dynamic`, `longrope`) return
    `(*lengths.shape, head_dim // 2)`: the frequencies for an input of each given length (`lengths=None` means the
    original length, i.e. unscaled).
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    parameters = config.rope_parameters
    rope_type = parameters.get("rope_type", "default")
    head_dim = config.head_dim
    base = parameters["rope_theta"]
    if rope_type == "default":
        return default_inverse_frequencies(head_dim, base, device)
    if rope_type == "ntk":
        return default_inverse_frequencies(head_dim, _ntk_base(base, parameters["factor"], head_dim), device)
    if rope_type == "dynamic":
        return _dynamic_inverse_frequencies(config, lengths, device)
    if rope_type == "longrope":
        return _longrope_inverse_frequencies(config, lengths, device)
    inv_freq, _ = ROPE_INIT_FUNCTIONS[rope_type](config, device)
    return inv_freq.to(angle_dtype(device))


def _ntk_base(base: float, factor: float, head_dim: int) -> float:
    """NTK-aware base: base * s^(d / (d - 2)) (the seed article's static NTK scaling)."""
    return base * factor ** (head_dim / (head_dim - 2))


def _dynamic_inverse_frequencies(config, lengths: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """Dynamic NTK: for an input of length L' > L the base becomes base * ((s * L' / L) - (s - 1))^(d / (d - 2));
    up to L the original frequencies are used.

    Hand-written rather than transformers' function because that one takes one scalar length and always uses
    `max_position_embeddings` as L; here every length of a batch (or every query of a decoder) gets its own set.
    """
    parameters = config.rope_parameters
    head_dim, base, factor = config.head_dim, parameters["rope_theta"], parameters["factor"]
    trained = original_length(config)
    dtype = angle_dtype(device)
    if lengths is None:
        lengths = torch.tensor(trained, device=device)
    lengths = lengths.to(device=device, dtype=dtype).clamp(min=trained)
    bases = base * ((factor * lengths / trained) - (factor - 1)) ** (head_dim / (head_dim - 2))
    exponents = torch.arange(0, head_dim, 2, dtype=dtype, device=device) / head_dim
    return bases[..., None] ** -exponents


def _longrope_inverse_frequencies(config, lengths: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    """LongRoPE from transformers: the short factors up to the original length, the long factors beyond it."""
    compute = ROPE_INIT_FUNCTIONS["longrope"]
    trained = original_length(config)
    short, _ = compute(config, device, seq_len=None)
    if lengths is None:
        return short.to(angle_dtype(device))
    long, _ = compute(config, device, seq_len=trained + 1)
    dtype = angle_dtype(device)
    use_long = (lengths.to(device) > trained)[..., None]
    return torch.where(use_long, long.to(dtype), short.to(dtype))


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def check_explicit_original_length(rope_parameters: dict | None) -> None:
    """YaRN needs the pre-training length spelled out: transformers silently takes `max_position_embeddings`, which
    is wrong whenever that field already holds the extended length."""
    if not rope_parameters:
        return
    rope_type = rope_parameters.get("rope_type", rope_parameters.get("type"))
    if rope_type == "yarn" and rope_parameters.get("original_max_position_embeddings") is None:
        raise ValueError(
            "`rope_parameters['original_max_position_embeddings']` is required for rope_type 'yarn': the length the "
            "model was pre-trained at (e.g. 512 for the original RoFormer checkpoints)."
        )


def validate_rope_parameters(rope_parameters: dict, head_dim: int) -> None:
    """Raise a `ValueError` naming the key for `rope_parameters` that cannot describe a rotary embedding."""
    rope_type = rope_parameters.get("rope_type", "default")
    if rope_type not in supported_rope_types():
        raise ValueError(f"`rope_parameters['rope_type']` {rope_type!r} is not one of {supported_rope_types()}.")
    partial = rope_parameters.get("partial_rotary_factor")
    if partial not in (None, 1, 1.0) and rope_type != "proportional":
        raise ValueError(
            f"`rope_parameters['partial_rotary_factor']` {partial!r} is not supported: RoFormer rotates every feature "
            "pair (use rope_type 'proportional' for partial rotation)."
        )
    theta = rope_parameters.get("rope_theta")
    if not _is_number(theta) or theta <= 0:
        raise ValueError(f"`rope_parameters['rope_theta']` must be a positive number, got {theta!r}.")
    if rope_type != "default":
        factor = rope_parameters.get("factor")
        factor_optional = rope_type in ("longrope", "proportional")
        if factor is None and not factor_optional:
            raise ValueError(f"`rope_parameters['factor']` is required for rope_type {rope_type!r}.")
        if factor is not None and (not _is_number(factor) or factor < 1):
            raise ValueError(f"`rope_parameters['factor']` must be a number >= 1, got {factor!r}.")
    original = rope_parameters.get("original_max_position_embeddings")
    if original is not None and (not isinstance(original, int) or isinstance(original, bool) or original <= 0):
        raise ValueError(
            f"`rope_parameters['original_max_position_embeddings']` must be a positive integer, got {original!r}."
        )
    attention_factor = rope_parameters.get("attention_factor")
    if attention_factor is not None and (not _is_number(attention_factor) or attention_factor < 0):
        raise ValueError(f"`rope_parameters['attention_factor']` must be a number >= 0, got {attention_factor!r}.")
    if rope_type == "yarn":
        check_explicit_original_length(rope_parameters)
        beta_fast = rope_parameters.get("beta_fast", 32)
        beta_slow = rope_parameters.get("beta_slow", 1)
        for key, value in (("beta_fast", beta_fast), ("beta_slow", beta_slow)):
            if not _is_number(value):
                raise ValueError(f"`rope_parameters['{key}']` must be a number, got {value!r}.")
        if beta_fast <= beta_slow:
            raise ValueError(
                f"`rope_parameters['beta_fast']` ({beta_fast}) must be greater than `beta_slow` ({beta_slow})."
            )
    if rope_type == "longrope":
        for key in ("short_factor", "long_factor"):
            values = rope_parameters.get(key)
            if not isinstance(values, (list, tuple)) or not all(_is_number(value) for value in values):
                raise ValueError(f"`rope_parameters['{key}']` must be a list of numbers, got {values!r}.")
            if len(values) != head_dim // 2:
                raise ValueError(
                    f"`rope_parameters['{key}']` has {len(values)} values; it needs head_dim / 2 = {head_dim // 2}."
                )
    if rope_type == "llama3":
        for key in ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings"):
            if rope_parameters.get(key) is None:
                raise ValueError(f"`rope_parameters['{key}']` is required for rope_type 'llama3'.")
        if rope_parameters["high_freq_factor"] <= rope_parameters["low_freq_factor"]:
            raise ValueError("`rope_parameters['high_freq_factor']` must be greater than `low_freq_factor`.")


__all__ = [
    "LENGTH_DEPENDENT_TYPES",
    "angle_dtype",
    "default_inverse_frequencies",
    "is_length_dependent",
    "original_length",
    "rope_attention_factor",
    "rope_inverse_frequencies",
    "supported_rope_types",
    "validate_rope_parameters",
]
