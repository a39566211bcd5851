"""Shared fixtures: tiny configurations and inputs, so every test builds its models in milliseconds."""

import os

import torch


# Without a GPU, Triton kernels are exercised through Triton's interpreter (it must be chosen before they are defined).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import transformers  # noqa: E402

import hf_roformer  # noqa: E402


TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def tiny_config(**overrides) -> hf_roformer.HfRoFormerConfig:
    """A two-layer RoFormer config (head dim 8) with dropout off, so outputs are deterministic."""
    return hf_roformer.HfRoFormerConfig(**{**TINY, **overrides})


def tiny_reference_config(**overrides) -> transformers.RoFormerConfig:
    """The same hyper-parameters as `tiny_config`, for transformers' own RoFormer."""
    return transformers.RoFormerConfig(**{**TINY, **overrides})


@pytest.fixture
def batch():
    """Two sequences of length 9 with mixed segment ids; the second is right-padded after 6 tokens."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, TINY["vocab_size"], (2, 9), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0
    input_ids[1, 6:] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 4:] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def randomize_norms(model: torch.nn.Module, seed: int = 0) -> None:
    """Give layer norms and biases random values, so tests are not blind to a missing or swapped bias/gain."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1 + ("weight" in name))
