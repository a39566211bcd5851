"""Sequence lengths of a training run: the length a model was trained at travels with it (the tokenizer saved with
it truncates there), and a `max_seq_length` too small for the special tokens is refused before any work."""

from ...remote_code.config_rules_hf_roformer import ROPE_TYPE_RULES
from ...utils.errors import UsageError


def set_model_max_length(tokenizer, config, override: int | None = None) -> None:
    """Give `tokenizer` the length its model was trained at (`max_position_embeddings`), or `override`."""
    length = override or getattr(config, "max_position_embeddings", None)
    if length:
        tokenizer.model_max_length = int(length)


def check_sequence_length(tokenizer, max_seq_length: int, pairs: bool) -> None:
    """Refuse a `max_seq_length` that cannot hold one token (of each text of a pair) besides the special tokens."""
    special = tokenizer.num_special_tokens_to_add(pair=pairs)
    needed = special + (2 if pairs else 1)
    if max_seq_length < needed:
        what = "one token of each text of a pair" if pairs else "one token"
        raise UsageError(
            f"--max_seq_length {max_seq_length} is too small: it must hold {what} besides {special} special tokens "
            f"(at least {needed})"
        )


def record_trained_length(config, length: int) -> None:
    """Raise `config.max_position_embeddings` (the length the model has been trained at) to `length`, keeping its
    rotary frequencies: a rope type that takes the pre-training length from `max_position_embeddings` when
    `original_max_position_embeddings` is absent (dynamic NTK) gets the old length pinned there."""
    previous = getattr(config, "max_position_embeddings", None)
    if previous is None or length <= previous:
        return
    parameters = dict(getattr(config, "rope_parameters", None) or {})
    rules = ROPE_TYPE_RULES.get(parameters.get("rope_type", "default"))
    reads_length = rules is not None and "original_max_position_embeddings" in {**rules.required, **rules.optional}
    if reads_length and parameters.get("original_max_position_embeddings") is None:
        config.rope_parameters = {**parameters, "original_max_position_embeddings": previous}
    config.max_position_embeddings = length


def beyond_trained_length_note(
    config, max_length: int, longer_texts: int | None = None, texts: int | None = None
) -> str | None:
    """What to tell, once, at the start of a run whose inputs reach past the length the checkpoint was trained at (None
    when they do not): RoPE runs at any length, but distances past the trained length are new to the model; rope
    scaling maps them back into the trained range. `longer_texts` of `texts` reach past it (None: blocks packed to
    `max_length`, as in pre-training)."""
    trained = getattr(config, "max_position_embeddings", None)
    if trained is None or max_length <= trained or longer_texts == 0:
        return None
    parameters = getattr(config, "rope_parameters", None) or {}
    rope_type = parameters.get("rope_type", "default")
    if longer_texts is None:
        reach = f"the checkpoint was trained at {trained:,} tokens"
    else:
        reach = f"{longer_texts:,} of {texts:,} texts are longer than the {trained:,} tokens the checkpoint was "
        reach += "trained at"
    if rope_type != "default":
        factor = parameters.get("factor")
        return f"inputs up to {max_length:,} tokens: {reach}; rope scaling `{rope_type}` (factor {factor}) applies"
    factor = -(-max_length // trained)
    ntk = f'{{"rope_type": "ntk", "factor": {factor}.0}}'
    linear = f'{{"rope_type": "linear", "factor": {factor}.0}}'
    return (
        f"inputs up to {max_length:,} tokens: {reach}. RoPE has no position table, so the model runs at any length, "
        f"but distances past {trained:,} are new to it; rope scaling maps them into the trained range, e.g. "
        f"--rope_parameters '{ntk}' (NTK-aware: long wavelengths stretched, short ones kept) or '{linear}' (every "
        f"position divided by {factor}); docs/long-documents.md compares them"
    )


__all__ = ["beyond_trained_length_note", "check_sequence_length", "record_trained_length", "set_model_max_length"]
