"""Rotary position embedding (RoPE) in RoFormer's interleaved layout (paper eq. 34).

RoFormer rotates consecutive feature pairs (x0, x1), (x2, x3), ... of each head by the angle `m * theta_i` of the
token's position `m`, with theta_i = rope_theta^(-2i/d). This differs from the "rotate-half" layout of Llama-style
models, so transformers' `apply_rotary_pos_emb` cannot be reused; the frequencies themselves come from transformers'
rope utilities for every scaled rope type.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import torch
from torch import nn
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS


def angle_dtype(device: torch.device) -> torch.dtype:
    """Dtype in which rotation angles are computed: float64 where the device has it.

    Angles grow with the position; in float32 `m * theta` has an absolute error of ~1e-2 rad at m = 1e5, so cos/sin of
    long positions would be wrong whatever dtype the model runs in. MPS has no float64 and falls back to float32.
    """
    return torch.float32 if device.type == "mps" else torch.float64


def default_inverse_frequencies(
    head_dim: int, rope_theta: float = 10000.0, device: torch.device | None = None
) -> torch.Tensor:
    """The paper's frequencies theta_i = rope_theta^(-2i/d), i = 0 .. d/2 - 1 (eq. 15).

    Written here rather than taken from transformers because its default computes them in float32 (see `angle_dtype`).
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    exponents = torch.arange(0, head_dim, 2, dtype=angle_dtype(device), device=device) / head_dim
    return rope_theta**-exponents


def inverse_frequencies(config, device: torch.device | None = None) -> tuple[torch.Tensor, float]:
    """Inverse frequencies (d/2 values) and attention factor for the config's `rope_parameters`."""
    rope_type = config.rope_parameters.get("rope_type", "default")
    if rope_type == "default":
        return default_inverse_frequencies(config.head_dim, config.rope_parameters["rope_theta"], device), 1.0
    if rope_type not in ROPE_INIT_FUNCTIONS:
        raise ValueError(
            f"`rope_parameters['rope_type']` {rope_type!r} is not supported; use 'default' or one of "
            f"{sorted(ROPE_INIT_FUNCTIONS)}."
        )
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[rope_type](config, device)
    return inv_freq.to(angle_dtype(inv_freq.device)), attention_factor


class HfRoFormerRotaryEmbedding(nn.Module):
    """Computes cos/sin of the RoPE angles of given token positions, once per forward, shared by all layers.

    The module holds no parameters and no buffers: frequencies are a pure function of the config, recomputed on the
    positions' device in float64 at each call (d/2 numbers). This keeps them out of the state dict, of
    `model.to(torch.bfloat16)` casts and of meta-device initialization, and makes any length work.
    """

    def __init__(self, config):
        super().__init__()
        self.config = config

    @torch.no_grad()
    def forward(self, position_ids: torch.LongTensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Float32 `(cos, sin)`, each `(batch, seq_len, head_dim // 2)`, for `position_ids` `(batch, seq_len)`."""
        inv_freq, _ = inverse_frequencies(self.config, position_ids.device)
        angles = position_ids[..., None].to(inv_freq.dtype) * inv_freq
        return angles.cos().float(), angles.sin().float()


def rotate_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each feature pair (x[2i], x[2i+1]) of `x` `(batch, heads, seq, d)` by the angle whose cos/sin are given.

    `cos`/`sin` have shape `(batch, seq, d // 2)`. Math runs in float32 and the result has the dtype of `x`. This is
    the reference implementation of paper eq. 34 and the CPU path.
    """
    if torch.compiler.is_compiling():
        return _rotate_pairs(x, cos.unsqueeze(1), sin.unsqueeze(1))
    return _rotate_complex(x, torch.complex(cos, sin).unsqueeze(1))


def _rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Eq. 34 in real arithmetic; compilers fuse it into one kernel (they do not generate code for complex math)."""
    even, odd = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    rotated = torch.stack((even * cos - odd * sin, odd * cos + even * sin), dim=-1)
    return rotated.flatten(-2).to(x.dtype)


def _rotate_complex(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    """Eq. 34 as a complex product (x[2i] + 1j * x[2i+1]) * e^(1j * m * theta_i) (the paper's eq. 33 form).

    In eager mode this is one fused kernel, an order of magnitude faster than the real-valued form's separate ops.
    """
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)))
    return torch.view_as_real(pairs * rotation).flatten(-2).to(x.dtype)


def apply_rotary_pos_emb(
    query: torch.Tensor,
    key: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    value: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Rotate queries and keys (and values when given, for `rotary_value`) by their positions' angles.

    The single entry point attention code calls, so faster implementations can be dispatched here without touching it.
    """
    query = rotate_interleaved(query, cos, sin)
    key = rotate_interleaved(key, cos, sin)
    if value is not None:
        value = rotate_interleaved(value, cos, sin)
    return query, key, value


__all__ = [
    "HfRoFormerRotaryEmbedding",
    "apply_rotary_pos_emb",
    "default_inverse_frequencies",
    "inverse_frequencies",
    "rotate_interleaved",
]
