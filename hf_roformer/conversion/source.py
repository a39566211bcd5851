"""The files of a released directory, checked before any work: `bert_config.json` (keys, value types and that it
describes the checkpoint's tensors) and `vocab.txt` (present, with the special tokens, one line per embedding row and
each token on one line).
"""

import json
import math
import re
from pathlib import Path

from ..remote_code.tokenization_hf_roformer import load_vocab
from .errors import ConversionError


REQUIRED_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
INTEGER_KEYS = (*REQUIRED_KEYS, "embedding_size", "max_position_embeddings", "type_vocab_size")
NUMBER_KEYS = ("hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range")
STRING_KEYS = ("hidden_act",)
LAYER_VARIABLE = re.compile(r"^bert/encoder/layer_(\d+)/")
EMBEDDINGS = "bert/embeddings/word_embeddings"


def _check_value(path: Path, key: str, value) -> None:
    if key in INTEGER_KEYS:
        if key == "embedding_size" and value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConversionError(f"{path}: `{key}` must be an integer, got {value!r}")
        if value <= 0:
            raise ConversionError(f"{path}: `{key}` must be positive, got {value}")
    elif key in NUMBER_KEYS:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConversionError(f"{path}: `{key}` must be a number, got {value!r}")
    elif key in STRING_KEYS and not isinstance(value, str):
        raise ConversionError(f"{path}: `{key}` must be a string, got {value!r}")


def read_bert_config(path: Path) -> dict:
    """`bert_config.json` as a dict, with a `ConversionError` naming the file for a missing or malformed file, a
    missing key or a value of the wrong type."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConversionError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConversionError(f"{path}: cannot read ({error})") from None
    if not isinstance(config, dict):
        raise ConversionError(f"{path}: expected a JSON object, got {type(config).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in config]
    if missing:
        raise ConversionError(f"{path}: missing key(s) {missing}")
    for key, value in config.items():
        _check_value(path, key, value)
    return config


def check_layer_count(bert_config: dict, names, config_path: Path, index_path: str) -> None:
    """`num_hidden_layers` equals the layers the checkpoint holds (checked before anything is built from it)."""
    layers = {int(match.group(1)) for name in names if (match := LAYER_VARIABLE.match(name))}
    found = max(layers) + 1 if layers else 0
    if bert_config["num_hidden_layers"] != found:
        raise ConversionError(
            f"{config_path}: `num_hidden_layers` is {bert_config['num_hidden_layers']}, the checkpoint {index_path} "
            f"holds {found} layer(s)"
        )


def check_vocabulary(vocab: dict[str, int], vocab_path: Path, embedding_rows: int, index_path: str) -> None:
    """One vocabulary line per row of the embedding matrix, each token on one line: a line too few or too many would
    shift the ids of every token after it, and a repeated token (which the original's loader collapses into one id)
    is refused naming its lines."""
    try:
        load_vocab(vocab_path)  # refuses a token listed on more than one line
    except ValueError as error:
        raise ConversionError(str(error)) from None
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise ConversionError(f"{vocab_path}: the token ids are not 0 .. {len(vocab) - 1}, one per line")
    if len(vocab) != embedding_rows:
        raise ConversionError(
            f"{vocab_path}: {len(vocab)} tokens, but {EMBEDDINGS} in {index_path} has {embedding_rows} rows; "
            "the vocabulary does not belong to this checkpoint (a missing or extra line shifts every id after it)"
        )


__all__ = ["check_layer_count", "check_vocabulary", "read_bert_config"]
