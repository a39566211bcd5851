"""Extractive question answering with a RoFormer QA head: the best answer span of a context, as characters.

transformers 5 removed its `question-answering` pipeline, which did this decoding; what remains to do by hand is
small but easy to get wrong (spans inside the question, end before start, token vs character positions), so it lives
here once. RoPE has no length limit, so the whole context is encoded in one pass, without the pipeline's windows.
"""

import torch


def best_span(
    start_logits: torch.Tensor, end_logits: torch.Tensor, allowed: torch.Tensor, max_answer_tokens: int
) -> tuple[int, int, float]:
    """The token span (start, end inclusive) maximizing p(start) * p(end) among `allowed` tokens, with
    start <= end < start + max_answer_tokens, and its probability (softmax over the allowed tokens)."""
    if not bool(allowed.any()):
        raise ValueError("no context token to answer from (is the context empty?)")
    if max_answer_tokens < 1:
        raise ValueError(f"`max_answer_tokens` must be at least 1, got {max_answer_tokens}")
    start = start_logits.float().masked_fill(~allowed, float("-inf")).log_softmax(-1)
    end = end_logits.float().masked_fill(~allowed, float("-inf")).log_softmax(-1)
    scores = start[:, None] + end[None, :]
    offsets = torch.arange(len(start))
    length = offsets[None, :] - offsets[:, None]
    scores = scores.masked_fill((length < 0) | (length >= max_answer_tokens), float("-inf"))
    best = int(scores.argmax())
    first, last = divmod(best, len(start))
    return first, last, float(scores[first, last].exp())


@torch.no_grad()
def answer_question(model, tokenizer, question: str, context: str, max_answer_tokens: int = 30) -> dict:
    """Answer `question` from `context` with a question-answering model; returns `{"answer", "start", "end",
    "score"}` where `context[start:end] == answer` (the fields of transformers' former QA pipeline)."""
    encoded = tokenizer(question, context, return_offsets_mapping=True, return_tensors="pt")
    offsets = encoded.pop("offset_mapping")[0]
    outputs = model(**encoded.to(model.device))
    # context tokens: the second segment, without its closing [SEP] (special tokens have empty offsets)
    allowed = (encoded["token_type_ids"][0] == 1).cpu() & (offsets[:, 1] > offsets[:, 0])
    first, last, score = best_span(
        outputs.start_logits[0].cpu(), outputs.end_logits[0].cpu(), allowed, max_answer_tokens
    )
    start, end = int(offsets[first, 0]), int(offsets[last, 1])
    return {"answer": context[start:end], "start": start, "end": end, "score": score}
