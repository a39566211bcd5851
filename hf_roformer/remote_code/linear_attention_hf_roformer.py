"""RoPE with linear attention (paper sec. 3.3, eq. 17-19): O(N) time and memory in the sequence length.

With non-negative feature maps phi, the paper's eq. 19 rotates the mapped queries and keys in the numerator only:

    Attention_m = sum_n (R_m phi(q_m))^T (R_n phi(k_n)) v_n / sum_n phi(q_m)^T phi(k_n)

The denominator stays unrotated, so it never vanishes; the weights are not a normalized distribution and may be
negative, as the paper notes. The "before_feature_map" order instead rotates q and k before the feature map and uses
the same features in both sums (what performer-pytorch does): a different model, offered for comparison.

Both are computed through the associative form: bidirectional with sum_n R_n phi(k_n) v_n^T, causal with chunked
prefix sums (intra-chunk products are masked C x C blocks), and decoding with a recurrent state per layer. Sums
accumulate in float32 whatever the model dtype.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from typing import NamedTuple

import torch
from torch import nn
from transformers.cache_utils import Cache, DynamicLayer

from .config_rules_hf_roformer import FEATURE_MAPS, ROTATION_ORDERS


# exp() of keys above this is clamped (softmax feature map), so float32 sums over very long inputs stay finite.
MAX_KEY_EXPONENT = 60.0


def feature_maps(query: torch.Tensor, key: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-negative feature maps for queries and keys, in float32.

    - `elu`: elu(x) + 1 for both (Katharopoulos et al., the paper's [17]).
    - `relu`: relu(x) for both.
    - `softmax`: softmax over features for queries and exp for keys (Shen et al., the paper's [33]).
    """
    query, key = query.float(), key.float()
    if name == "elu":
        return nn.functional.elu(query) + 1, nn.functional.elu(key) + 1
    if name == "relu":
        return nn.functional.relu(query), nn.functional.relu(key)
    if name == "softmax":
        return query.softmax(dim=-1), key.clamp(max=MAX_KEY_EXPONENT).exp()
    raise ValueError(f"`linear_feature_map` {name!r} is not one of {FEATURE_MAPS}.")


class LinearAttentionFeatures(NamedTuple):
    """The four feature sets of one forward, `(B, H, N, d)` float32: rotated ones for the numerator, unrotated (or
    rotated, in the "before_feature_map" order) for the denominator; keys of padding tokens are zero."""

    numerator_query: torch.Tensor
    numerator_key: torch.Tensor
    denominator_query: torch.Tensor
    denominator_key: torch.Tensor


def linear_attention_features(
    query: torch.Tensor,
    key: torch.Tensor,
    rotate,
    feature_map: str,
    rotation_order: str,
    key_mask: torch.Tensor | None,
) -> LinearAttentionFeatures:
    """Build the features of eq. 19 (or of the rotate-first order) from projected `query`/`key` `(B, H, N, d)`.

    `rotate(x)` applies each token's rotation R_n; `key_mask` `(B, N)` is 1 for real tokens.
    """
    if rotation_order == "after_feature_map":
        mapped_query, mapped_key = feature_maps(query, key, feature_map)
        if key_mask is not None:
            mapped_key = mapped_key * key_mask[:, None, :, None].to(torch.float32)
        return LinearAttentionFeatures(rotate(mapped_query), rotate(mapped_key), mapped_query, mapped_key)
    if rotation_order == "before_feature_map":
        mapped_query, mapped_key = feature_maps(rotate(query.float()), rotate(key.float()), feature_map)
        if key_mask is not None:
            mapped_key = mapped_key * key_mask[:, None, :, None].to(torch.float32)
        return LinearAttentionFeatures(mapped_query, mapped_key, mapped_query, mapped_key)
    raise ValueError(f"`linear_rotation_order` {rotation_order!r} is not one of {ROTATION_ORDERS}.")


def bidirectional_linear_attention(features: LinearAttentionFeatures, value: torch.Tensor, eps: float) -> torch.Tensor:
    """Every query attends to every (real) key: num_m = q~_m S with S = sum_n k~_n v_n^T. Output `(B, H, N, d_v)`."""
    value = value.float()
    key_value = features.numerator_key.transpose(-1, -2) @ value  # (B, H, d, d_v)
    key_sum = features.denominator_key.sum(dim=-2)  # (B, H, d)
    numerator = features.numerator_query @ key_value
    denominator = (features.denominator_query * key_sum[..., None, :]).sum(-1, keepdim=True)
    return numerator / denominator.clamp(min=eps)


def causal_linear_attention(
    features: LinearAttentionFeatures,
    value: torch.Tensor,
    eps: float,
    chunk_size: int,
    state: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Each query attends to itself and earlier keys, through chunked prefix sums: O(N) memory.

    `state` is the running `(S, z)` of earlier tokens (S = sum k~ v^T `(B, H, d, d_v)`, z = sum k `(B, H, d)`), e.g.
    from a cache. Returns the output `(B, H, N, d_v)` and the state after the last token.
    """
    value = value.float()
    batch, heads, length, dim = features.numerator_query.shape
    value_dim = value.shape[-1]
    if state is None:
        state = (
            value.new_zeros(batch, heads, dim, value_dim),
            value.new_zeros(batch, heads, dim),
        )
    chunks = -(-length // chunk_size)
    padded = chunks * chunk_size

    def split(tensor):  # (B, H, N, x) -> (B, H, chunks, C, x), zero-padded at the end
        tensor = nn.functional.pad(tensor, (0, 0, 0, padded - length))
        return tensor.reshape(batch, heads, chunks, chunk_size, tensor.shape[-1])

    numerator_query, numerator_key = split(features.numerator_query), split(features.numerator_key)
    denominator_query, denominator_key = split(features.denominator_query), split(features.denominator_key)
    values = split(value)

    chunk_key_value = numerator_key.transpose(-1, -2) @ values  # (B, H, chunks, d, d_v)
    chunk_key_sum = denominator_key.sum(dim=-2)  # (B, H, chunks, d)
    key_value_before = state[0][:, :, None] + chunk_key_value.cumsum(dim=2) - chunk_key_value
    key_sum_before = state[1][:, :, None] + chunk_key_sum.cumsum(dim=2) - chunk_key_sum

    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=value.device).tril()
    within = (numerator_query @ numerator_key.transpose(-1, -2)).masked_fill(~causal, 0.0)
    numerator = numerator_query @ key_value_before + within @ values
    within_denominator = (denominator_query @ denominator_key.transpose(-1, -2)).masked_fill(~causal, 0.0).sum(-1)
    denominator = (denominator_query * key_sum_before[..., None, :]).sum(-1) + within_denominator
    output = numerator / denominator.clamp(min=eps)[..., None]
    output = output.reshape(batch, heads, padded, value_dim)[:, :, :length]
    final_state = (
        state[0] + chunk_key_value.sum(dim=2),
        state[1] + chunk_key_sum.sum(dim=2),
    )
    return output, final_state


class HfRoFormerLinearAttentionCache(Cache):
    """Decoding state of linear-attention layers: per layer S = sum_n R_n phi(k_n) v_n^T and z = sum_n phi(k_n), in
    float32, plus the number of tokens seen (so positions continue). Constant size whatever the length.

    The states sit in the `keys`/`values` of standard cache layers, so beam search reordering and batch expansion work
    as for any transformers cache.
    """

    def __init__(self, num_layers: int):
        super().__init__(layers=[DynamicLayer() for _ in range(num_layers)])
        self.seen_tokens = 0

    def get_seq_length(self, layer_idx: int | None = 0) -> int:
        """Number of tokens folded into the state."""
        return self.seen_tokens

    def get_state(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """`(S, z)` of a layer, or None before its first token."""
        layer = self.layers[layer_idx]
        return (layer.keys, layer.values) if layer.is_initialized else None

    def set_state(self, layer_idx: int, state: tuple[torch.Tensor, torch.Tensor]) -> None:
        """Store the `(S, z)` of a layer after a forward."""
        layer = self.layers[layer_idx]
        layer.keys, layer.values = state
        layer.dtype, layer.device = state[0].dtype, state[0].device
        layer.is_initialized = True


__all__ = [
    "HfRoFormerLinearAttentionCache",
    "bidirectional_linear_attention",
    "causal_linear_attention",
    "feature_maps",
    "linear_attention_features",
]
