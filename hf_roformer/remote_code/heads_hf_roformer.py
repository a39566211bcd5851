"""The task heads' own modules and loss helpers (vocabulary projection, sentence classifiers, choice flattening, span
loss): what the `HfRoFormerFor*` models in `modeling_hf_roformer` put on top of the encoder.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.loss.loss_utils import fixed_cross_entropy

from .configuration_hf_roformer import HfRoFormerConfig
from .input_checks_hf_roformer import check_tensor
from .layers_hf_roformer import real_token_states
from .memory_saving_hf_roformer import HfRoFormerDropout


class HfRoFormerPredictionHeadTransform(nn.Module):
    """Dense + activation + layer norm applied before the vocabulary projection of the language-modeling heads."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.lm_head_layer_norm_eps)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Transform hidden states into the embedding space."""
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class HfRoFormerOutputLinear(nn.Linear):
    """The `nn.Linear` of an output head (vocabulary logits, token labels), whose output is a tensor of its own, never a
    view: torch's linear with a bias returns, for inputs of more than two dimensions, a view of its 2-D product, and
    FSDP2 warns that an in-place op on a view output of a sharded module would skip its hooks (wrong gradients). The
    product without the bias is not a view; the bias is added to it. Same parameters and names as `nn.Linear`."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """`input @ weight.T + bias`, as a new tensor."""
        output = nn.functional.linear(input, self.weight)
        return output if self.bias is None else output + self.bias


class HfRoFormerLMPredictionHead(nn.Module):
    """Vocabulary logits: transform, then the (tied) embedding matrix plus an output-only bias; without
    `lm_head_transform` (RoFormer-V2) the bare tied embedding matrix (no transform, no bias)."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        if not config.lm_head_transform:
            self.decoder = HfRoFormerOutputLinear(config.embedding_size, config.vocab_size, bias=False)
            return
        self.transform = HfRoFormerPredictionHeadTransform(config)
        self.decoder = HfRoFormerOutputLinear(config.embedding_size, config.vocab_size, bias=True)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Logits over the vocabulary."""
        if hasattr(self, "transform"):
            hidden_states = self.transform(hidden_states)
        return self.decoder(hidden_states)


class HfRoFormerOnlyMLMHead(nn.Module):
    """Container giving the language-modeling head its checkpoint name `cls.predictions`."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.predictions = HfRoFormerLMPredictionHead(config)

    def forward(self, sequence_output: torch.Tensor) -> torch.Tensor:
        """Logits over the vocabulary."""
        return self.predictions(sequence_output)


def flatten_choices(shape, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds) -> tuple:
    """Multiple-choice inputs `(batch, choices, seq_len, ...)` as rows `(batch * choices, seq_len, ...)`; masks,
    segment ids and positions must have the ids' `shape` (positions may broadcast over the batch)."""
    given = {"attention_mask": attention_mask, "token_type_ids": token_type_ids, "position_ids": position_ids}
    kinds = {"attention_mask": "mask", "token_type_ids": "ids", "position_ids": "integer"}
    for name, tensor in given.items():
        if tensor is not None:
            expected = (None if name == "position_ids" else shape[0], *shape[1:])
            check_tensor(name, tensor, kind=kinds[name], dims=(3,), shape=expected)
    if position_ids is not None:
        if position_ids.shape[0] not in (1, shape[0]):
            rows = ", ".join(str(size) for size in shape[1:])
            raise ValueError(
                f"`position_ids` has shape {tuple(position_ids.shape)}, expected ({shape[0]}, {rows}) or (1, {rows}) "
                "(one row of positions for every question of the batch)."
            )
        position_ids = position_ids.expand(shape)
    tensors = (input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds)
    return tuple(None if tensor is None else tensor.flatten(0, 1) for tensor in tensors)


def labelled_token_count(labels: torch.Tensor, ignore_index: int = -100) -> torch.Tensor:
    """How many labels are not ignored, at least 1: a summed loss divided by it is their mean, and 0 (not 0/0 = NaN,
    which would poison the weights) when nothing is labelled. A device tensor, so no host sync."""
    return (labels != ignore_index).sum().clamp(min=1)


def with_labelled_token_count(labels: torch.Tensor, kwargs: dict) -> dict:
    """`kwargs` for transformers' token losses with `num_items_in_batch` at least 1: the labelled tokens of `labels`
    (-100 ignored) unless the Trainer passed its count across accumulated batches."""
    count = kwargs.get("num_items_in_batch")
    if count is None:
        count = labelled_token_count(labels)
    count = count.clamp(min=1) if torch.is_tensor(count) else max(count, 1)
    return {**kwargs, "num_items_in_batch": count}


class HfRoFormerClassificationHead(nn.Module):
    """Sentence-level head on the first real token ([CLS], also in a left-padded row): dropout, dense, activation,
    dropout, projection to labels."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)
        self.activation = ACT2FN[config.hidden_act]

    def forward(self, sequence_output: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label logits from the first real token's hidden state."""
        features = self.dropout(real_token_states(sequence_output, attention_mask))
        features = self.dropout(self.activation(self.dense(features)))
        return self.out_proj(features)


class HfRoFormerMeanPoolingHead(nn.Module):
    """Sentence-level head on the masked mean of all token states: dropout, then one projection to the labels."""

    def __init__(self, config: HfRoFormerConfig):
        super().__init__()
        self.dropout = HfRoFormerDropout(config.hidden_dropout_prob)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, sequence_output: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Label logits from the mean of the real tokens' hidden states."""
        if attention_mask is None or attention_mask.dim() != 2:
            pooled = sequence_output.mean(dim=1)
        else:
            weights = attention_mask.to(sequence_output.dtype).unsqueeze(-1)
            pooled = (sequence_output * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return self.out_proj(self.dropout(pooled))


def span_loss(start_logits, end_logits, start_positions, end_positions) -> torch.Tensor:
    """transformers' question-answering loss (positions past the input ignored), each cross-entropy a mean over the
    answers inside the input, 0 where there are none."""
    ignored = start_logits.size(1)
    losses = []
    for logits, positions in ((start_logits, start_positions), (end_logits, end_positions)):
        positions = positions.reshape(-1).to(logits.device).clamp(0, ignored)
        count = labelled_token_count(positions, ignore_index=ignored)
        losses.append(fixed_cross_entropy(logits, positions, count, ignore_index=ignored))
    return (losses[0] + losses[1]) / 2
