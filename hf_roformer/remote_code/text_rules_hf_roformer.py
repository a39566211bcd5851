"""The text rules of the original RoFormer tokenizer (bert4keras' `Tokenizer`), in Python and as `tokenizers` steps.

- Normalization (`do_lower_case`): Python's `str.lower` of the whole text (final sigma included), NFD, then removal of
  non-spacing marks (category Mn only; spacing marks such as Devanagari vowel signs stay).
- Basic split: punctuation (ASCII symbols and Unicode P*) and CJK characters stand alone; spaces (space, tab, newline,
  carriage return, Zs, and the line/paragraph separators that the original's final `str.split()` splits on)
  separate words; NUL, U+FFFD and control/format characters (Cc, Cf) are dropped without separating.
- Decoding: CJK characters join without spaces, Latin words and numbers keep one between them.

The Python functions run the tokenizer; `original_normalizer` and `original_basic_pre_tokenizer` express the same
rules with built-in `tokenizers` steps, which is what a char-level `tokenizer.json` holds.

Hub-bound: copied next to saved tokenizers; imports only the standard library and `tokenizers`.
"""

import re
import unicodedata

from tokenizers import Regex, normalizers, pre_tokenizers


# Code point ranges the original treats as CJK characters.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
SEPARATORS = " \t\n\r\u2028\u2029"

# The same rules as Oniguruma patterns, for `tokenizers` steps.
ALONE_PATTERN = (
    r"[\x{21}-\x{2F}\x{3A}-\x{40}\x{5B}-\x{60}\x{7B}-\x{7E}\p{P}"
    + "".join(rf"\x{{{low:X}}}-\x{{{high:X}}}" for low, high in CJK_RANGES)
    + "]"
)
WHITESPACE_PATTERN = r"[ \t\n\r\p{Zs}\x{2028}\x{2029}]+"
DROPPED_PATTERN = r"[\x{0}\x{FFFD}[\p{Cc}\p{Cf}&&[^\t\n\r]]]"
# `tokenizers` lowercases character by character; Python writes a capital sigma that ends a word as final sigma.
FINAL_SIGMA_PATTERN = r"(?<=\p{Cased}\p{Case_Ignorable}*)\x{3A3}(?!\p{Case_Ignorable}*\p{Cased})"


def is_cjk_character(character: str) -> bool:
    """CJK unified ideographs and their extensions (the original's ranges)."""
    code = ord(character)
    return any(low <= code <= high for low, high in CJK_RANGES)


def is_punctuation(character: str) -> bool:
    """ASCII symbols and every Unicode punctuation category (BERT's definition)."""
    code = ord(character)
    return (
        33 <= code <= 47
        or 58 <= code <= 64
        or 91 <= code <= 96
        or 123 <= code <= 126
        or unicodedata.category(character).startswith("P")
    )


def is_whitespace(character: str) -> bool:
    """Space, tab, newline, carriage return, Unicode space separators (Zs), and the line and paragraph separators
    (the original's final `str.split()` splits on them)."""
    return character in SEPARATORS or unicodedata.category(character) == "Zs"


def is_dropped(character: str) -> bool:
    """Characters the basic split removes: NUL, U+FFFD and control/format characters."""
    return character in "\x00\ufffd" or unicodedata.category(character) in ("Cc", "Cf")


# What the basic split does with a character; memoized per character (a few thousand distinct ones in practice).
ALONE, SPACE, DROPPED, WORD = range(4)
_KINDS: dict[str, int] = {}
# Characters that lowercased text keeps as they are through NFD and mark removal (not decomposable, not a mark),
# and the others.
_UNCHANGED_BY_MARK_REMOVAL: set[str] = set()
_CHANGED_BY_MARK_REMOVAL: set[str] = set()
MEMO_LIMIT = 200_000


def character_kind(character: str) -> int:
    """`ALONE` (punctuation, CJK), `SPACE` (separates words), `DROPPED` or `WORD` (part of a word)."""
    kind = _KINDS.get(character)
    if kind is None:
        if is_punctuation(character) or is_cjk_character(character):
            kind = ALONE
        elif is_whitespace(character):
            kind = SPACE
        elif is_dropped(character):
            kind = DROPPED
        else:
            kind = WORD
        if len(_KINDS) < MEMO_LIMIT:
            _KINDS[character] = kind
    return kind


def basic_split(text: str) -> list[tuple[str, int, list[int] | None]]:
    """The original's basic split of `text` (already normalized): punctuation and CJK characters alone, whitespace
    separating, dropped characters removed without separating.

    Returns `(word, start, positions)` per word: `word` starts at `text[start]`; `positions[i]` is the index in
    `text` of `word[i]`, or `positions` is None when `word == text[start : start + len(word)]`.
    """
    words, start, end, dropped_inside = [], None, 0, False

    def close() -> None:
        if dropped_inside:
            positions = [index for index in range(start, end) if character_kind(text[index]) == WORD]
            words.append(("".join(text[index] for index in positions), start, positions))
        else:
            words.append((text[start:end], start, None))

    for index, kind in enumerate(map(character_kind, text)):
        if kind == WORD:
            if start is None:
                start, dropped_inside = index, False
            end = index + 1
        elif kind == DROPPED:
            dropped_inside = dropped_inside or start is not None
        else:
            if start is not None:
                close()
                start = None
            if kind == ALONE:
                words.append((text[index], index, None))
    if start is not None:
        close()
    return words


def _unchanged_by_mark_removal(characters: set[str]) -> bool:
    """Whether NFD and mark removal leave each of `characters` as it is (memoized per character)."""
    unknown = characters - _UNCHANGED_BY_MARK_REMOVAL
    if not unknown:
        return True
    if not unknown.isdisjoint(_CHANGED_BY_MARK_REMOVAL):
        return False
    for character in unknown:
        unchanged = (
            unicodedata.category(character) != "Mn"
            and unicodedata.combining(character) == 0
            and unicodedata.normalize("NFD", character) == character
        )
        memo = _UNCHANGED_BY_MARK_REMOVAL if unchanged else _CHANGED_BY_MARK_REMOVAL
        if len(memo) < MEMO_LIMIT:
            memo.add(character)
        if not unchanged:
            return False
    return True


def normalize_with_alignment(
    text: str, do_lower_case: bool, nfkc_normalize: bool = False
) -> tuple[str, list[int] | None]:
    """The original's normalization of `text` and where each character comes from.

    Returns `(normalized, origins)`: `origins[i]` is the index in `text` of the character that normalized character
    `i` comes from, or `origins` is None when normalized character `i` comes from `text[i]` (the common case, found
    without a per-character loop). With `nfkc_normalize`, NFKC runs first, character by character.
    """
    if nfkc_normalize and not unicodedata.is_normalized("NFKC", text):
        return _normalize_by_character(text, do_lower_case, nfkc_normalize)
    if not do_lower_case:
        return text, None
    lowered = text.lower()
    if len(lowered) == len(text) and _unchanged_by_mark_removal(set(lowered)):
        return lowered, None
    return _normalize_by_character(text, do_lower_case, nfkc_normalize)


def _normalize_by_character(text: str, do_lower_case: bool, nfkc_normalize: bool) -> tuple[str, list[int]]:
    """`normalize_with_alignment` with a character loop, each character carrying the index it comes from.
    Lowercasing runs on the whole text (so final sigma is Python's) and is aligned by each character's own expansion;
    NFD is each character's decomposition followed by the canonical ordering of combining marks (a stable sort by
    combining class of each run of marks), which is the whole-text NFD; then non-spacing marks are removed."""
    if nfkc_normalize:
        expanded = [unicodedata.normalize("NFKC", character) for character in text]
        source = "".join(expanded)
        source_origins = [index for index, piece in enumerate(expanded) for _ in piece]
    else:
        source, source_origins = text, range(len(text))
    if not do_lower_case:
        return source, list(source_origins)
    lowered = source.lower()
    decomposed, position = [], 0
    for character, origin in zip(source, source_origins, strict=True):
        width = len(character.lower())
        for lower in lowered[position : position + width]:
            decomposed += [(part, origin) for part in unicodedata.normalize("NFD", lower)]
        position += width
    start = 0
    while start < len(decomposed):  # canonical ordering of each run of combining marks
        if unicodedata.combining(decomposed[start][0]) == 0:
            start += 1
            continue
        end = start
        while end < len(decomposed) and unicodedata.combining(decomposed[end][0]) > 0:
            end += 1
        decomposed[start:end] = sorted(decomposed[start:end], key=lambda item: unicodedata.combining(item[0]))
        start = end
    kept = [(part, origin) for part, origin in decomposed if unicodedata.category(part) != "Mn"]
    return "".join(part for part, _ in kept), [origin for _, origin in kept]


def original_normalizer(
    do_lower_case: bool, nfkc_normalize: bool = False, drop_control_characters: bool = True
) -> normalizers.Normalizer:
    """The normalization as `tokenizers` steps (final sigma first, as Python lowercases), then, for the char-level
    pipeline, the dropped characters (which do not separate words, so dropping them first changes nothing)."""
    steps = [normalizers.NFKC()] if nfkc_normalize else []
    if do_lower_case:
        steps += [
            normalizers.Replace(Regex(FINAL_SIGMA_PATTERN), "\u03c2"),
            normalizers.Lowercase(),
            normalizers.NFD(),
            normalizers.Replace(Regex(r"\p{Mn}"), ""),
        ]
    if drop_control_characters:
        steps.append(normalizers.Replace(Regex(DROPPED_PATTERN), ""))
    return normalizers.Sequence(steps)


def original_basic_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """The basic split as `tokenizers` steps: whitespace separates words, punctuation and CJK characters stand
    alone."""
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(WHITESPACE_PATTERN), behavior="removed"),
            pre_tokenizers.Split(Regex(ALONE_PATTERN), behavior="isolated"),
        ]
    )


# Decoding (bert4keras' `Tokenizer.decode`): no space after CJK punctuation, opening brackets and `+-/=`.
CJK_PUNCTUATION = (
    "\uff02\uff03\uff04\uff05\uff06\uff07\uff08\uff09\uff0a\uff0b\uff0c\uff0d\uff0f\uff1a\uff1b\uff1c\uff1d\uff1e"
    "\uff20\uff3b\uff3c\uff3d\uff3e\uff3f\uff40\uff5b\uff5c\uff5d\uff5e\uff5f\uff60\uff62\uff63\uff64\u3000\u3001"
    "\u3003\u3008\u3009\u300a\u300b\u300c\u300d\u300e\u300f\u3010\u3011\u3014\u3015\u3016\u3017\u3018\u3019\u301a"
    "\u301b\u301c\u301d\u301e\u301f\u3030\u303e\u303f\u2013\u2014\u2018\u2019\u201b\u201c\u201d\u201e\u201f\u2026"
    "\u2027\ufe4f\ufe51\ufe54\u00b7\uff01\uff1f\uff61\u3002"
)
SPACES = re.compile(" +")
SPACE_IN_CONTRACTION = re.compile("' (re|m|s|t|ve|d|ll) ")
SPACE_AFTER_OPENING = re.compile("([" + re.escape(CJK_PUNCTUATION + "+-/={(<[") + "]) ")
SPACE_IN_DECIMAL = re.compile(r"(\d\.) (\d)")


def is_bracketed(token: str) -> bool:
    """Tokens the original treats as special when decoding: `[...]` (`[CLS]`, `[unused1]`, ...)."""
    return token[:1] == "[" and token[-1:] == "]"


def join_tokens(tokens: list[str]) -> str:
    """Text of word pieces by the original's rules: `##` pieces attach to the previous piece; CJK characters, and any
    token after a CJK character, attach without a space; a punctuation character is followed by a space; other tokens
    are preceded by one. Then runs of spaces collapse, and the spaces in `' s`, after CJK punctuation and opening
    brackets, and in `3. 5` are removed."""
    parts, last = [], ""
    for index, token in enumerate(tokens):
        if token.startswith("##"):
            piece = token[2:]
        elif len(token) == 1 and is_cjk_character(token):
            piece = token
        elif len(token) == 1 and is_punctuation(token):
            piece = token + " "
        elif index > 0 and last and is_cjk_character(last):
            piece = token
        else:
            piece = " " + token
        parts.append(piece)
        last = piece[-1:] or last
    text = SPACES.sub(" ", "".join(parts))
    text = SPACE_IN_CONTRACTION.sub(r"'\1 ", text)
    text = SPACE_AFTER_OPENING.sub(r"\1", text)
    text = SPACE_IN_DECIMAL.sub(r"\1\2", text)
    return text.strip()


def decode_tokens(tokens: list[str], special_tokens, skip_special_tokens: bool) -> str:
    """Decode as the original: text runs joined by `join_tokens`. Special and `[...]` tokens are dropped with
    `skip_special_tokens` (the original always drops them); otherwise each stands apart, separated by spaces."""
    parts, run = [], []
    for token in tokens:
        if token in special_tokens or is_bracketed(token):
            if not skip_special_tokens:
                parts += [join_tokens(run), token]
                run = []
        else:
            run.append(token)
    parts.append(join_tokens(run))
    return " ".join(part for part in parts if part)
