"""Rotary frequencies for every rope type (what the rope parameters accept: `config_rules_hf_roformer.py`).

RoFormer's interleaved layout changes how frequencies are applied, not which frequencies: the scaled types are those of
transformers' rope utilities (`ROPE_INIT_FUNCTIONS`: linear, yarn, llama3, longrope, ...), reused as they are. Written
here are only what transformers lacks or gets in a way that breaks long inputs:

- `default` and static `ntk` (base * s^(d/(d-2))), in float64 so angles stay exact at long positions;
- `dynamic` NTK, vectorized over lengths (one frequency set per sequence in encoders, per query in decoders, so that
  cached decoding is exact) and measured against `original_max_position_embeddings` when it is given.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import torch
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from .config_rules_hf_roformer import ntk_base, original_length


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
        return default_inverse_frequencies(head_dim, ntk_base(base, parameters["factor"], head_dim), device)
    if rope_type == "dynamic":
        return _dynamic_inverse_frequencies(config, lengths, device)
    if rope_type == "longrope":
        return _longrope_inverse_frequencies(config, lengths, device)
    inv_freq, _ = ROPE_INIT_FUNCTIONS[rope_type](config, device)
    return inv_freq.to(angle_dtype(device))


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


__all__ = ["angle_dtype", "default_inverse_frequencies", "rope_inverse_frequencies"]
