"""The models pre-training compares RoFormer with: BERT's learned absolute positions (transformers' `BertForMaskedLM`
at the same sizes), with softmax attention or with the same linear attention as RoFormer's but without rotations.

The linear variant is registered with transformers' attention interface under `ABSOLUTE_LINEAR_ATTENTION`, so
BERT runs it through its ordinary attention dispatch; it computes the unrotated form of the paper's eq. 19 with the
same feature map, so "RoPE vs. absolute positions" is the only difference from a linear-attention RoFormer.
"""

import torch
from transformers import AttentionInterface, BertConfig, BertForMaskedLM
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ....remote_code.linear_attention_hf_roformer import bidirectional_linear_attention, linear_attention_features


ABSOLUTE_LINEAR_ATTENTION = "hf_roformer_absolute_linear"
LINEAR_EPS = 1e-6


def absolute_linear_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Bidirectional linear attention with elu(x) + 1 features and no rotation, in the attention interface's calling
    convention; `attention_mask` is the boolean padding mask transformers builds (True = attend)."""
    key_mask = None
    if attention_mask is not None:
        key_mask = attention_mask[:, 0].any(dim=-2) if attention_mask.dtype == torch.bool else None
    features = linear_attention_features(query, key, lambda x: x, "elu", "after_feature_map", key_mask)
    output = bidirectional_linear_attention(features, value, LINEAR_EPS).to(query.dtype)
    return output.transpose(1, 2).contiguous(), None


AttentionInterface.register(ABSOLUTE_LINEAR_ATTENTION, absolute_linear_attention)
AttentionMaskInterface.register(ABSOLUTE_LINEAR_ATTENTION, sdpa_mask)


def bert_for_masked_lm(
    vocab_size: int,
    hidden_size: int,
    num_hidden_layers: int,
    num_attention_heads: int,
    intermediate_size: int,
    max_position_embeddings: int,
    linear_attention: bool = False,
    **config,
) -> BertForMaskedLM:
    """transformers' BERT masked LM with learned absolute positions, at the given sizes (softmax attention through
    SDPA, or unrotated linear attention)."""
    bert_config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        **config,
    )
    model = BertForMaskedLM(bert_config)
    model.set_attn_implementation(ABSOLUTE_LINEAR_ATTENTION if linear_attention else "sdpa")
    return model
