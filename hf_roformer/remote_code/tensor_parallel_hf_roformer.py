"""Tensor parallelism of RoFormer models by whole attention heads: the refusal of a `tp_size` that would split a head
between ranks, and the plan of cross-attention layers (the self-attention plan is the config's
`base_model_tp_plan`).

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

# Tensor parallelism of cross-attention (decoders with `add_cross_attention`), as `base_model_tp_plan` splits
# self-attention: each rank holds the same heads of both.
CROSS_ATTENTION_TP_PLAN = {
    "encoder.layer.*.crossattention.self.query": "colwise",
    "encoder.layer.*.crossattention.self.key": "colwise",
    "encoder.layer.*.crossattention.self.value": "colwise",
    "encoder.layer.*.crossattention.output.dense": "rowwise",
}


class WholeHeadsPerRankMixin:
    """transformers' `maybe_distribute_model` of a model whose ranks must each hold whole attention heads."""

    @classmethod
    def maybe_distribute_model(cls, model, distributed_config, *args, **kwargs):
        """transformers' step that shards a model being loaded with a `distributed_config`, after refusing a
        tensor-parallel size that would split an attention head between ranks."""
        tp_size = getattr(distributed_config, "tp_size", None) or 1
        heads = model.config.num_attention_heads
        if tp_size > 1 and heads % tp_size:
            divisors = [size for size in range(2, heads + 1) if heads % size == 0]
            raise ValueError(
                f"Tensor parallelism gives each rank whole attention heads: `tp_size` {tp_size} must divide "
                f"`num_attention_heads` {heads}; use a tp_size among {divisors}."
            )
        return super().maybe_distribute_model(model, distributed_config, *args, **kwargs)


__all__ = ["CROSS_ATTENTION_TP_PLAN", "WholeHeadsPerRankMixin"]
