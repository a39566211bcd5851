"""RoFormer with a GlobalPointer head: named entities as scored spans, nested and overlapping ones included.

GlobalPointer (Su, 2021) scores every span (start i, end j) of every entity type; the efficient variant (Su, 2022),
written here, shares one pair of start/end projections across types: `q = W_q h`, `k = W_k h`, both rotated with
RoPE (the interleaved pairs of the paper's eq. 34) so the score depends on the distance j - i, then
`score[t, i, j] = q_i . k_j / sqrt(d) + (b_start[t] . h_i + b_end[t] . h_j) / 2`. Spans with j < i and spans touching
padding score minus infinity (a large negative). Training uses the multi-label categorical cross-entropy over all
spans of a type (positives above 0, negatives below), so any number of entities, nested or not, can be gold.
`decode_spans` returns the spans scoring above 0.

Labels are `(batch, entities, 3)` integers `(type, start, end)`, token positions, `end` inclusive, rows of -1 padding.
Saving writes this class into the checkpoint's `auto_map` under `AutoModelForTokenClassification`, so
`AutoModelForTokenClassification.from_pretrained(path, trust_remote_code=True)` loads it where hf_roformer is not
installed. Where it is, that Auto class keeps meaning the softmax tagger (transformers' Auto mappings choose one class
per configuration class; a tuple of two breaks `from_config` for configurations without `architectures`): load
with `HfRoFormerForGlobalPointer.from_pretrained(path)`.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

import torch
from torch import nn
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.utils.generic import can_return_tuple

from .configuration_hf_roformer import HfRoFormerConfig
from .modeling_hf_roformer import HfRoFormerModel, HfRoFormerPreTrainedModel
from .rotary_hf_roformer import rotate_interleaved, rotation_cos_sin


DEFAULT_HEAD_SIZE = 64
ROPE_BASE = 10000.0


class HfRoFormerForGlobalPointer(HfRoFormerPreTrainedModel):
    """RoFormer with an efficient GlobalPointer head (see the module): `logits` `(batch, types, seq, seq)` span
    scores; `config.num_labels` entity types (`id2label` their names), `config.global_pointer_head_size` the width of
    the start/end projections (default 64)."""

    _auto_class = "AutoModelForTokenClassification"
    pipeline_tag = "token-classification"

    def __init__(self, config: HfRoFormerConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.head_size = getattr(config, "global_pointer_head_size", None) or DEFAULT_HEAD_SIZE
        self.roformer = HfRoFormerModel(config)
        self.span_projection = nn.Linear(config.hidden_size, 2 * self.head_size)
        self.type_bias = nn.Linear(2 * self.head_size, 2 * config.num_labels)
        self.post_init()

    def span_logits(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Scores `(batch, types, seq, seq)` of every span, masked below the diagonal and on padding."""
        projected = self.span_projection(hidden_states)
        starts, ends = projected[..., ::2].contiguous(), projected[..., 1::2].contiguous()
        positions = torch.arange(hidden_states.shape[1], device=hidden_states.device)[None]
        inv_freq = ROPE_BASE ** (
            -torch.arange(0, self.head_size, 2, dtype=torch.float64, device=hidden_states.device) / self.head_size
        )
        cos, sin = rotation_cos_sin(positions, inv_freq)
        starts = rotate_interleaved(starts[:, None], cos, sin)[:, 0]
        ends = rotate_interleaved(ends[:, None], cos, sin)[:, 0]
        scores = torch.einsum("bmd,bnd->bmn", starts, ends) / self.head_size**0.5
        bias = self.type_bias(projected).transpose(1, 2) / 2  # (batch, 2 * types, seq)
        logits = scores[:, None] + bias[:, 0::2, :, None] + bias[:, 1::2, None, :]
        length = hidden_states.shape[1]
        allowed = torch.ones(length, length, dtype=torch.bool, device=logits.device).triu()[None, None]
        if attention_mask is not None:
            real = attention_mask.bool()
            allowed = allowed & real[:, None, :, None] & real[:, None, None, :]
        return logits.masked_fill(~allowed, torch.finfo(logits.dtype).min / 4)

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        **kwargs,
    ) -> TokenClassifierOutput:
        """Span scores; with `labels` (see the module) also the multi-label categorical cross-entropy."""
        kwargs.pop("num_items_in_batch", None)
        outputs = self.roformer(
            input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, position_ids=position_ids,
            inputs_embeds=inputs_embeds, return_dict=True, **kwargs,
        )  # fmt: skip
        logits = self.span_logits(outputs.last_hidden_state, attention_mask)
        loss = None
        if labels is not None:
            loss = multilabel_categorical_crossentropy(logits, span_targets(labels, logits.shape))
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=outputs.hidden_states, attentions=outputs.attentions
        )


def span_targets(labels: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Dense 0/1 targets of `shape` `(batch, types, seq, seq)` from `(batch, entities, 3)` labels (-1 rows padding)."""
    if labels.dim() != 3 or labels.shape[-1] != 3:
        raise ValueError(
            f"GlobalPointer labels must be (batch, entities, 3) (type, start, end), got {tuple(labels.shape)}"
        )
    targets = torch.zeros(shape, device=labels.device)
    types, length = shape[1], shape[2]
    rows, entities = (labels[..., 0] >= 0).nonzero(as_tuple=True)
    kind, start, end = labels[rows, entities].unbind(-1)
    if len(kind) and (kind.max() >= types or end.max() >= length or (start > end).any() or start.min() < 0):
        raise ValueError(f"GlobalPointer labels outside {types} types, {length} positions or with start > end")
    targets[rows, kind, start, end] = 1
    return targets


def multilabel_categorical_crossentropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Su's multi-label categorical cross-entropy over all spans of each (sequence, type): log(1 + sum exp(s_neg)) +
    log(1 + sum exp(-s_pos)), in float32, averaged over sequences and types."""
    scores = logits.flatten(2).float()
    targets = targets.flatten(2)
    scores = (1 - 2 * targets) * scores
    large = torch.finfo(scores.dtype).max / 4
    negatives = scores - targets * large
    positives = scores - (1 - targets) * large
    zeros = torch.zeros_like(scores[..., :1])
    negatives = torch.logsumexp(torch.cat([negatives, zeros], dim=-1), dim=-1)
    positives = torch.logsumexp(torch.cat([positives, zeros], dim=-1), dim=-1)
    return (negatives + positives).mean()


def decode_spans(logits: torch.Tensor, threshold: float = 0.0) -> list[list[tuple[int, int, int, float]]]:
    """The spans of each sequence scoring above `threshold`: `(type, start, end, score)` token positions, `end`
    inclusive, in order of start, end and type."""
    batch, kind, start, end = (logits > threshold).nonzero(as_tuple=True)
    scores = logits[batch, kind, start, end].tolist()
    found: list[list[tuple[int, int, int, float]]] = [[] for _ in range(logits.shape[0])]
    for row, item in zip(
        batch.tolist(), zip(kind.tolist(), start.tolist(), end.tolist(), scores, strict=True), strict=True
    ):
        found[row].append(item)
    return [sorted(spans, key=lambda span: (span[1], span[2], span[0])) for spans in found]


def decoded_span_tensor(logits: torch.Tensor, threshold: float = 0.0) -> torch.Tensor:
    """The spans of `decode_spans` as one `(batch, most spans, 3)` tensor of (type, start, end), -1 rows padding (what
    evaluation keeps instead of the `(batch, types, seq, seq)` scores)."""
    spans = decode_spans(logits, threshold)
    width = max(1, max(map(len, spans)))
    packed = torch.full((len(spans), width, 3), -1, dtype=torch.long)
    for row, items in enumerate(spans):
        for column, (kind, start, end, _) in enumerate(items):
            packed[row, column] = torch.tensor([kind, start, end])
    return packed


__all__ = ["HfRoFormerForGlobalPointer", "decode_spans", "decoded_span_tensor", "multilabel_categorical_crossentropy"]
