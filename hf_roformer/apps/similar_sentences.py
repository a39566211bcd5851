"""Similar-sentence generation with RoFormer-Sim, as the original's `gen_synonyms` (roformer-sim's `generate.py`).

For each source text the model generates candidates as the target segment after `[CLS] text [SEP]` under the UniLM
mask (generated tokens are segment 1, each sees the source and the tokens before it), by nucleus sampling (`top_p`
0.95, as the original) with the key/value cache; then every candidate is encoded with the same model's sentence
encoder (the [CLS] state through the linear pooler) and ranked by cosine similarity to the source. Duplicates and the
source itself are dropped, as the original drops them.

Unlike the original loop (one text at a time), all `n` candidates of all texts come from one batched `generate` call
(sources left-padded); the ranking encodes all candidates in batches.
"""

from dataclasses import dataclass

import torch


MAX_LENGTH = 64  # the original's maxlen: longest source, and longest candidate


@dataclass(frozen=True)
class SimilarSentence:
    """A generated candidate and its cosine similarity to the source."""

    text: str
    similarity: float


def sentence_encoder(model):
    """The base model whose `pooler_output` is the sentence vector (a RoFormer-Sim's own base model by default)."""
    encoder = getattr(model, getattr(model, "base_model_prefix", ""), model)
    if getattr(encoder, "pooler", None) is None:
        raise ValueError(
            "ranking needs a model with a pooler (a converted RoFormer-Sim has a linear one); pass `encoder=` a model "
            "whose output has `pooler_output`"
        )
    return encoder


@torch.no_grad()
def generate_candidates(
    model,
    tokenizer,
    texts: list[str],
    n: int = 20,
    do_sample: bool = True,
    top_p: float | None = 0.95,
    top_k: int | None = None,
    max_new_tokens: int = MAX_LENGTH,
    max_length: int = MAX_LENGTH,
) -> list[list[str]]:
    """`n` generated continuations (decoded, special tokens removed) of every text, from one `generate` call."""
    if n < 1:
        raise ValueError(f"`n` must be a positive number of candidates, got {n}")
    inputs = tokenizer(
        texts, padding=True, truncation=True, max_length=max_length, padding_side="left", return_tensors="pt"
    )
    inputs = {key: value.to(model.device) for key, value in inputs.items() if key in ("input_ids", "attention_mask")}
    # greedy decoding gives one candidate per text, repeated `n` times (transformers refuses greedy with n > 1)
    sampling = {"do_sample": False, "num_return_sequences": 1}
    if do_sample:
        top_p = 1.0 if top_p is None else top_p
        sampling = {"do_sample": True, "top_p": top_p, "top_k": top_k or 0, "num_return_sequences": n}
    sequences = model.generate(
        **inputs,
        **sampling,
        max_new_tokens=max_new_tokens,
        eos_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if not do_sample:
        sequences = sequences.repeat_interleave(n, dim=0)
    generated = sequences[:, inputs["input_ids"].shape[1] :]
    decoded = tokenizer.batch_decode(generated, skip_special_tokens=True)
    return [[text.strip() for text in decoded[index * n : (index + 1) * n]] for index in range(len(texts))]


@torch.no_grad()
def sentence_vectors(encoder, tokenizer, texts: list[str], batch_size: int = 64, max_length: int = MAX_LENGTH):
    """Unit-length sentence vectors (pooler outputs) of `texts`, as the original normalizes them for similarity."""
    vectors = []
    device = next(encoder.parameters()).device
    for start in range(0, len(texts), batch_size):
        inputs = tokenizer(
            texts[start : start + batch_size], padding=True, truncation=True, max_length=max_length,
            return_tensors="pt",
        )  # fmt: skip
        inputs = {key: value.to(device) for key, value in inputs.items()}
        pooled = encoder(**inputs, use_cache=False).pooler_output.float()
        vectors.append(torch.nn.functional.normalize(pooled, dim=-1))
    return torch.cat(vectors)


def rank_candidates(
    encoder, tokenizer, texts: list[str], candidates: list[list[str]], batch_size: int = 64
) -> list[list[SimilarSentence]]:
    """For each text, its distinct candidates (not the text itself) sorted by cosine similarity to it, best first."""
    distinct = [
        [c for c in dict.fromkeys(cands) if c and c != text] for text, cands in zip(texts, candidates, strict=True)
    ]
    flat = [sentence for text, cands in zip(texts, distinct, strict=True) for sentence in [text, *cands]]
    vectors = sentence_vectors(encoder, tokenizer, flat, batch_size)
    ranked, start = [], 0
    for cands in distinct:
        source, others = vectors[start], vectors[start + 1 : start + 1 + len(cands)]
        start += 1 + len(cands)
        similarity = (others @ source).tolist()
        order = sorted(range(len(cands)), key=lambda index: -similarity[index])
        ranked.append([SimilarSentence(cands[index], similarity[index]) for index in order])
    return ranked


def generate_similar(
    model,
    tokenizer,
    texts: str | list[str],
    n: int = 20,
    k: int | None = None,
    *,
    do_sample: bool = True,
    top_p: float | None = 0.95,
    top_k: int | None = None,
    max_new_tokens: int = MAX_LENGTH,
    max_length: int = MAX_LENGTH,
    encoder=None,
    batch_size: int = 64,
) -> list[SimilarSentence] | list[list[SimilarSentence]]:
    """Sentences similar to `texts`, as roformer-sim's `gen_synonyms(text, n, k)`: generate `n` candidates per text
    (all texts in one batched `generate` call), drop duplicates and the text itself, rank by the cosine similarity of
    sentence vectors to the text and keep the best `k` (all when None).

    Args:
        model: A RoFormer-Sim `HfRoFormerForCausalLM` (`unilm=True`, with its linear pooler).
        tokenizer: Its tokenizer.
        texts: One text (the result is one list) or a list of texts (one list per text).
        n: Candidates generated per text.
        k: Best candidates kept per text.
        do_sample: Sample (the original) or decode greedily (then the `n` candidates coincide).
        top_p: Nucleus sampling threshold (the original's 0.95).
        top_k: Also sample only among the `top_k` likeliest tokens (the original does not).
        max_new_tokens: Longest candidate in tokens; generation also stops at `[SEP]`.
        max_length: Sources longer than this many tokens are truncated.
        encoder: The model giving sentence vectors (`pooler_output`); the model's own base model by default.
        batch_size: Sentences per forward when ranking.

    Sampling uses torch's global generator: call `torch.manual_seed` first for repeatable candidates.
    """
    single = isinstance(texts, str)
    texts = [texts] if single else list(texts)
    encoder = encoder if encoder is not None else sentence_encoder(model)
    candidates = generate_candidates(
        model, tokenizer, texts, n, do_sample, top_p, top_k, max_new_tokens=max_new_tokens, max_length=max_length
    )
    ranked = rank_candidates(encoder, tokenizer, texts, candidates, batch_size)
    ranked = [results[:k] if k is not None else results for results in ranked]
    return ranked[0] if single else ranked


__all__ = ["SimilarSentence", "generate_candidates", "generate_similar", "rank_candidates", "sentence_vectors"]
