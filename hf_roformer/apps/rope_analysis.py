"""Analytical properties of RoPE from the paper, used by tests and plots."""

import torch

from ..remote_code.rotary_hf_roformer import default_inverse_frequencies


def long_term_decay_bound(distances: torch.Tensor, head_dim: int = 128, rope_theta: float = 10000.0) -> torch.Tensor:
    """The relative upper bound (1 / (d/2)) * sum_{j=1}^{d/2} |S_j| of appendix C (eq. 37, figure 3) per distance.

    S_j = sum_{i<j} exp(1j * (m - n) * theta_i) are the partial sums of the rotations; the attention logit of two
    tokens at relative distance m - n is bounded by this value times max_i |h_{i+1} - h_i|, and it decays with
    distance for theta_i = 10000^(-2i/d).
    """
    inv_freq = default_inverse_frequencies(head_dim, rope_theta)
    angles = distances.to(torch.float64)[:, None] * inv_freq[None, :]
    partial_sums = torch.polar(torch.ones_like(angles), angles).cumsum(dim=-1)
    return partial_sums.abs().mean(dim=-1)
