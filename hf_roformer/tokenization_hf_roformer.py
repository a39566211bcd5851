"""Tokenizer of the original Chinese RoFormer checkpoints, backed by the `tokenizers` library.

Word level (vocab ~50,000, the `chinese_roformer_*` checkpoints): bert4keras'
`Tokenizer(vocab, do_lower_case=True, pre_tokenize=lambda s: jieba.cut(s, HMM=False))`. The text is lowercased and
accents are stripped; jieba segments it; a segment that is in the vocabulary is one token; any other segment is split
as BERT's basic tokenizer does (punctuation and CJK characters apart, on whitespace, control characters dropped) and
then by greedy longest-match WordPiece (`##`, words over 200 characters or without a match become `[UNK]`).

Char level (vocab ~12,000: char, sim, v2, gpt checkpoints): the same without jieba, which is BERT's tokenizer.

Inputs are `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]` with segment ids 0/1; pairs are truncated longest-first.
Normalization runs in `tokenizers`, so offsets map back to the original text.

Hub-bound: copied next to saved tokenizers; imports only `transformers`, its `tokenizers` dependency and (optionally)
`jieba` or `rjieba`.
"""

import contextlib
import os
import re
import unicodedata

from tokenizers import (
    NormalizedString,
    PreTokenizedString,
    Regex,
    Tokenizer,
    decoders,
    normalizers,
    pre_tokenizers,
    processors,
)
from tokenizers.models import WordPiece
from transformers.tokenization_utils_base import BatchEncoding, PaddingStrategy, TruncationStrategy
from transformers.tokenization_utils_tokenizers import TokenizersBackend


try:
    import jieba
except ImportError:  # only word-level tokenizers with the default segmenter need it
    jieba = None
try:
    import rjieba
except ImportError:
    rjieba = None


VOCAB_FILES_NAMES = {"vocab_file": "vocab.txt", "tokenizer_file": "tokenizer.json"}
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
SEGMENTERS = ("jieba", "rjieba")
MAX_WORD_CHARS = 200


def load_vocab(vocab_file: str | os.PathLike) -> dict[str, int]:
    """Read a BERT-style `vocab.txt` (one token per line, id = line number) the way the original loader does.

    Raises a `ValueError` naming the file when it cannot be read or is empty.
    """
    try:
        with open(vocab_file, encoding="utf-8") as reader:
            lines = reader.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{vocab_file}: cannot read the vocabulary ({error}).") from error
    vocab: dict[str, int] = {}
    for line in lines:
        fields = line.split()
        vocab[fields[0] if fields else line.strip()] = len(vocab)
    if not vocab:
        raise ValueError(f"{vocab_file}: the vocabulary is empty.")
    return vocab


def check_special_tokens(vocab: dict[str, int], special_tokens, source: str) -> None:
    """Raise a `ValueError` naming the source when a special token is missing from the vocabulary."""
    missing = [token for token in special_tokens if token not in vocab]
    if missing:
        raise ValueError(f"{source}: the vocabulary lacks the special token(s) {missing}.")


def is_cjk_character(character: str) -> bool:
    """CJK unified ideographs and their extensions (the ranges of BERT and bert4keras)."""
    code = ord(character)
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


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


# The ranges of `is_cjk_character` and the characters of `is_punctuation` as a regex class of `tokenizers` (Oniguruma).
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
ALONE_PATTERN = (
    r"[\x{21}-\x{2F}\x{3A}-\x{40}\x{5B}-\x{60}\x{7B}-\x{7E}\p{P}"
    + "".join(rf"\x{{{low:X}}}-\x{{{high:X}}}" for low, high in CJK_RANGES)
    + "]"
)
# Separators: the original's spaces, and the line/paragraph separators its final `str.split()` also splits on.
WHITESPACE_PATTERN = r"[ \t\n\r\p{Zs}\x{2028}\x{2029}]+"
DROPPED_PATTERN = r"[\x{0}\x{FFFD}[\p{Cc}\p{Cf}&&[^\t\n\r]]]"
# Python's `str.lower` writes a capital sigma that ends a word as final sigma; `tokenizers` lowercases per character.
FINAL_SIGMA_PATTERN = r"(?<=\p{Cased}\p{Case_Ignorable}*)\x{3A3}(?!\p{Case_Ignorable}*\p{Cased})"


def is_whitespace(character: str) -> bool:
    """Space, tab, newline, carriage return, Unicode space separators (Zs), and the line and paragraph separators
    (the original's final `str.split()` splits on them)."""
    return character in " \t\n\r\u2028\u2029" or unicodedata.category(character) == "Zs"


def is_dropped(character: str) -> bool:
    """Characters the basic tokenizer removes: NUL, U+FFFD and control/format characters."""
    return character in "\x00\ufffd" or unicodedata.category(character) in ("Cc", "Cf")


def basic_split_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of BERT's basic split of `text`: punctuation and CJK characters alone, whitespace separating,
    dropped characters removed (bert4keras' `Tokenizer._tokenize` without pre-tokenization)."""
    spans, start = [], None
    for index, character in enumerate(text):
        alone = is_punctuation(character) or is_cjk_character(character)
        if alone or is_whitespace(character) or is_dropped(character):
            if start is not None:
                spans.append((start, index))
                start = None
            if alone:
                spans.append((index, index + 1))
        elif start is None:
            start = index
    if start is not None:
        spans.append((start, len(text)))
    return spans


def segment_with_positions(segmenter: str):
    """A function text -> [(word, start, end)] cutting text with jieba's exact mode without HMM (the original)."""
    if segmenter == "jieba":
        if jieba is None:
            raise ImportError("The word-level RoFormer tokenizer needs jieba: pip install jieba")
        return lambda text: jieba.tokenize(text, HMM=False)
    if segmenter == "rjieba":
        if rjieba is None:
            raise ImportError("segmenter='rjieba' needs rjieba: pip install rjieba")
        return lambda text: rjieba.tokenize(text, hmm=False)
    raise ValueError(f"`segmenter` {segmenter!r} is not one of {SEGMENTERS}.")


class JiebaWordPreTokenizer:
    """Pre-tokenizer of the word-level RoFormer: jieba segments that are vocabulary words stay whole, any other
    segment is split by BERT's basic rules (so WordPiece then sees what bert4keras' fallback sees)."""

    def __init__(self, vocab: dict[str, int], segmenter: str = "jieba"):
        self.vocab = vocab
        self.segment = segment_with_positions(segmenter)

    def split(self, index: int, normalized: NormalizedString) -> list[NormalizedString]:
        """Cut one normalized string into the pieces WordPiece tokenizes, keeping alignment to the original."""
        pieces = []
        for word, start, end in self.segment(str(normalized)):
            if word in self.vocab:
                pieces.append(normalized[start:end])
            else:
                pieces.extend(normalized[start + low : start + high] for low, high in basic_split_spans(word))
        return pieces

    def pre_tokenize(self, pretokenized: PreTokenizedString) -> None:
        """`tokenizers` custom pre-tokenizer hook."""
        pretokenized.split(self.split)


@contextlib.contextmanager
def sequential_encoding():
    """Run `tokenizers` batch encoding on one thread: with a Python pre-tokenizer its worker threads only contend for
    the GIL (measured 1.6x faster sequential). `tokenizers` reads this variable at every call."""
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = previous


def original_pair_lengths(first: int, second: int, budget: int) -> tuple[int, int]:
    """Lengths bert4keras truncates a pair to: drop the last token of the longer side (the first on ties) until the
    two fit in `budget` tokens. `tokenizers`' longest-first gives the odd token to the other side when both are cut."""
    excess = first + second - budget
    if excess <= 0:
        return first, second
    if first > second:
        cut = min(excess, first - second)
        first, excess = first - cut, excess - cut
    elif second > first:
        cut = min(excess, second - first)
        second, excess = second - cut, excess - cut
    # now equal: the first loses the first token of every remaining pair of removals
    return first - (excess + 1) // 2, second - excess // 2


def is_word_level_vocab(vocab: dict[str, int]) -> bool:
    """Whether a vocabulary holds multi-character Chinese words (the jieba word-level checkpoints) rather than only
    characters (the char-level ones)."""
    return any(len(token) > 1 and all(is_cjk_character(character) for character in token) for token in vocab)


def original_normalizer(
    do_lower_case: bool, nfkc_normalize: bool = False, drop_control_characters: bool = True
) -> normalizers.Normalizer:
    """bert4keras' text normalization as `tokenizers` steps: with `do_lower_case`, Python's `str.lower` (final sigma
    included), NFD and removal of non-spacing marks (category Mn only); then NUL, U+FFFD and control/format characters
    other than tab, newline and carriage return are dropped (the word level drops them after segmenting, as the
    original does). `nfkc_normalize` adds NFKC first (not in the original)."""
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
    """bert4keras' basic split as `tokenizers` steps: whitespace (space, tab, newline, carriage return, Zs) separates
    words; punctuation and CJK characters stand alone."""
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(WHITESPACE_PATTERN), behavior="removed"),
            pre_tokenizers.Split(Regex(ALONE_PATTERN), behavior="isolated"),
        ]
    )


def build_backend(
    vocab: dict[str, int],
    word_level: bool,
    do_lower_case: bool,
    segmenter: str,
    unk_token: str,
    nfkc_normalize: bool = False,
):
    """The `tokenizers` pipeline: normalizer, pre-tokenizer, WordPiece model and decoder (post-processor set later).
    Every step but the jieba one is a built-in step, so a char-level pipeline saves to `tokenizer.json`."""
    backend = Tokenizer(WordPiece(vocab, unk_token=unk_token, max_input_chars_per_word=MAX_WORD_CHARS))
    backend.normalizer = original_normalizer(do_lower_case, nfkc_normalize, drop_control_characters=not word_level)
    if word_level:
        backend.pre_tokenizer = pre_tokenizers.PreTokenizer.custom(JiebaWordPreTokenizer(vocab, segmenter))
    else:
        backend.pre_tokenizer = original_basic_pre_tokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    return backend


# Decoding as the original (bert4keras' `Tokenizer.decode`): CJK characters and words join without spaces, Latin words
# and numbers keep a space between them, no space after CJK punctuation, opening brackets and `+-/=`.
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


class HfRoFormerTokenizer(TokenizersBackend):
    r"""Tokenizer of the Chinese RoFormer checkpoints (word level with jieba, or char level), identical to the original.

    Args:
        vocab: A `vocab.txt` path or a token -> id dict.
        vocab_file: Path of `vocab.txt` (what `from_pretrained` passes).
        do_lower_case: Lowercase and strip accents, as all original checkpoints do.
        nfkc_normalize: Apply Unicode NFKC first, so full-width letters, digits and punctuation (`１２，ＡＢ`) read as
            their ASCII forms. Off for the original checkpoints, which were trained without it.
        word_level: Segment with jieba first (word-level checkpoints). Default: detected from the vocabulary, which
            holds multi-character Chinese words only for word-level checkpoints.
        segmenter: "jieba" (the original, default) or "rjieba" (faster Rust port; see the README for where it
            differs).
        end_with_sep: End an encoded text with `[SEP]` (`[CLS] text [SEP]`, pairs `[CLS] A [SEP] B [SEP]`). False
            for a language model that continues the text (RoFormer-GPT): `[CLS] text` and `[CLS] A [SEP] B`, as the
            original prompts it (`tokenizer.encode(text)[0][:-1]`).

    Example:

    ```python
    >>> from hf_roformer import HfRoFormerTokenizer
    >>> tokenizer = HfRoFormerTokenizer.from_pretrained("path/to/chinese_roformer_L-12_H-768_A-12")  # vocab.txt only
    >>> tokenizer("今天天气非常好。")["input_ids"]
    ```
    """

    vocab_files_names = VOCAB_FILES_NAMES
    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    model = WordPiece
    # Saving copies this file next to the tokenizer and records it under `auto_map`.
    _auto_class = "AutoTokenizer"

    def __init__(
        self,
        vocab: str | os.PathLike | dict[str, int] | None = None,
        vocab_file: str | None = None,
        do_lower_case: bool = True,
        nfkc_normalize: bool = False,
        word_level: bool | None = None,
        segmenter: str = "jieba",
        end_with_sep: bool = True,
        unk_token: str = "[UNK]",
        sep_token: str = "[SEP]",
        pad_token: str = "[PAD]",
        cls_token: str = "[CLS]",
        mask_token: str = "[MASK]",
        **kwargs,
    ):
        tokenizer_object = kwargs.pop("tokenizer_object", None)
        tokenizer_file = kwargs.pop("tokenizer_file", None)
        if vocab is None:
            if tokenizer_object is not None:
                vocab = tokenizer_object.get_vocab()
            elif tokenizer_file is not None and os.path.isfile(tokenizer_file):
                vocab = Tokenizer.from_file(tokenizer_file).get_vocab()
            else:
                vocab = vocab_file
        if vocab is None:
            raise ValueError("HfRoFormerTokenizer needs a vocabulary: pass `vocab` (a vocab.txt path or a dict).")
        source = "vocab"
        if isinstance(vocab, (str, os.PathLike)):
            source = str(vocab)
            vocab_file = source
            vocab = load_vocab(vocab)
        specials = [str(token) for token in (unk_token, sep_token, pad_token, cls_token, mask_token)]
        check_special_tokens(vocab, specials, source)
        if word_level is None:
            word_level = is_word_level_vocab(vocab)
        if segmenter not in SEGMENTERS:
            raise ValueError(f"`segmenter` {segmenter!r} is not one of {SEGMENTERS}.")
        self.do_lower_case = do_lower_case
        self.nfkc_normalize = nfkc_normalize
        self.word_level = word_level
        self.segmenter = segmenter
        self.end_with_sep = end_with_sep
        self._tokenizer = build_backend(vocab, word_level, do_lower_case, segmenter, str(unk_token), nfkc_normalize)
        super().__init__(
            vocab_file=vocab_file,
            do_lower_case=do_lower_case,
            nfkc_normalize=nfkc_normalize,
            word_level=word_level,
            segmenter=segmenter,
            end_with_sep=end_with_sep,
            unk_token=unk_token,
            sep_token=sep_token,
            pad_token=pad_token,
            cls_token=cls_token,
            mask_token=mask_token,
            **kwargs,
        )
        cls, sep = str(self.cls_token), str(self.sep_token)
        self._tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{cls}:0 $A:0" + (f" {sep}:0" if end_with_sep else ""),
            pair=f"{cls}:0 $A:0 {sep}:0 $B:1" + (f" {sep}:1" if end_with_sep else ""),
            special_tokens=[(cls, self.cls_token_id), (sep, self.sep_token_id)],
        )

    def _attach_segmenter(self) -> None:
        if self.word_level:
            vocab = self._tokenizer.get_vocab()
            self._tokenizer.pre_tokenizer = pre_tokenizers.PreTokenizer.custom(
                JiebaWordPreTokenizer(vocab, self.segmenter)
            )

    def __getstate__(self):
        # The jieba step is Python code, which `tokenizers` cannot serialize: pickle a placeholder, re-attach on load.
        state = self.__dict__.copy()
        if self.word_level:
            jieba_step = self._tokenizer.pre_tokenizer
            self._tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
            try:
                state["_tokenizer"] = Tokenizer.from_str(self._tokenizer.to_str())
            finally:
                self._tokenizer.pre_tokenizer = jieba_step
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._attach_segmenter()

    def _encode_plus(self, text, text_pair=None, **kwargs) -> BatchEncoding:
        """Encode as `TokenizersBackend` does, except that pairs truncated longest-first are cut as the original
        (bert4keras) cuts them, and that word-level batches run on one thread."""
        batched = isinstance(text, (list, tuple)) and not (
            kwargs.get("is_split_into_words") and text and isinstance(text[0], str)
        )
        if not batched and text_pair is not None and len(text_pair) == 0:
            # An empty second text is still a pair ([CLS] A [SEP] [SEP], as the original encodes it); transformers
            # drops a falsy `text_pair` of a single input, so encode it as a batch of one.
            encoded = self._encode_plus([text], [text_pair], **kwargs)
            if kwargs.get("return_tensors") is not None or kwargs.get("return_overflowing_tokens"):
                return encoded
            return BatchEncoding({key: value[0] for key, value in encoded.items()}, encoded.encodings)
        with sequential_encoding() if self.word_level else contextlib.nullcontext():
            if not self._uses_original_pair_truncation(text_pair, kwargs):
                return super()._encode_plus(text, text_pair, **kwargs)
            return self._encode_pairs_as_the_original(text, text_pair, kwargs)

    def _encode_pairs_as_the_original(self, text, text_pair, kwargs) -> BatchEncoding:
        """Pairs with longest-first truncation: both sides encoded alone, cut by `original_pair_lengths`, joined by
        the post-processor, padded as requested."""
        batched = isinstance(text, (list, tuple))
        firsts, seconds = (list(text), list(text_pair)) if batched else ([text], [text_pair])
        if len(firsts) != len(seconds):
            raise ValueError(f"batch length of `text` ({len(firsts)}) differs from `text_pair` ({len(seconds)}).")
        backend = self._tokenizer
        backend.no_truncation()
        backend.no_padding()
        split_special_tokens = kwargs.get("split_special_tokens")
        backend.encode_special_tokens = (
            self.split_special_tokens if split_special_tokens is None else split_special_tokens
        )
        first_encodings = backend.encode_batch(firsts, add_special_tokens=False)
        second_encodings = backend.encode_batch(seconds, add_special_tokens=False)
        budget = kwargs["max_length"] - backend.post_processor.num_special_tokens_to_add(True)
        encodings = []
        for first, second in zip(first_encodings, second_encodings, strict=True):
            first_length, second_length = original_pair_lengths(len(first), len(second), budget)
            first.truncate(first_length)
            second.truncate(second_length)
            encodings.append(backend.post_processor.process(first, second, add_special_tokens=True))
        self._pad_encodings(encodings, kwargs)
        converted = [
            self._convert_encoding(
                encoding=encoding,
                return_token_type_ids=kwargs.get("return_token_type_ids"),
                return_attention_mask=kwargs.get("return_attention_mask"),
                return_special_tokens_mask=kwargs.get("return_special_tokens_mask", False),
                return_offsets_mapping=kwargs.get("return_offsets_mapping", False),
                return_length=kwargs.get("return_length", False),
            )[0]
            for encoding in encodings
        ]
        data = {key: [item[key][0] for item in converted] for key in converted[0]}
        if not batched:
            data = {key: values[0] for key, values in data.items()}
        return BatchEncoding(data, encodings, tensor_type=kwargs.get("return_tensors"), prepend_batch_axis=not batched)

    @staticmethod
    def _uses_original_pair_truncation(text_pair, kwargs) -> bool:
        return (
            text_pair is not None
            and kwargs.get("truncation_strategy") == TruncationStrategy.LONGEST_FIRST
            and kwargs.get("max_length") is not None
            and kwargs.get("add_special_tokens", True)
            and not kwargs.get("is_split_into_words", False)
            and not kwargs.get("return_overflowing_tokens", False)
            and not kwargs.get("stride", 0)
        )

    def _pad_encodings(self, encodings: list, kwargs: dict) -> None:
        """Pad encodings in place as requested (longest in the batch, or `max_length`), on the tokenizer's side."""
        strategy = kwargs.get("padding_strategy", PaddingStrategy.DO_NOT_PAD)
        if strategy == PaddingStrategy.DO_NOT_PAD:
            return
        length = kwargs["max_length"] if strategy == PaddingStrategy.MAX_LENGTH else max(map(len, encodings))
        multiple = kwargs.get("pad_to_multiple_of")
        if multiple:
            length = -(-length // multiple) * multiple
        side = kwargs.get("padding_side") or self.padding_side
        for encoding in encodings:
            encoding.pad(
                length,
                direction=side,
                pad_id=self.pad_token_id,
                pad_type_id=self.pad_token_type_id,
                pad_token=str(self.pad_token),
            )

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        """Join tokens into text as the original decodes (no spaces between CJK characters)."""
        return decode_tokens(tokens, set(self.all_special_tokens), skip_special_tokens=False)

    def _decode(
        self,
        token_ids,
        skip_special_tokens: bool = False,
        clean_up_tokenization_spaces: bool | None = None,
        **kwargs,
    ) -> str:
        """Ids to text as the original (bert4keras' `Tokenizer.decode`) writes it: CJK characters and words without
        spaces between them, Latin words and numbers separated by a space. With `skip_special_tokens=True` the result
        equals the original's; without, special tokens are kept and set apart by spaces."""
        kwargs.pop("use_source_tokenizer", None)
        if isinstance(token_ids, int):
            token_ids = [token_ids]
        if isinstance(token_ids, dict):
            token_ids = token_ids["input_ids"]
        tokens = [token for token in map(self._tokenizer.id_to_token, token_ids) if token is not None]
        text = decode_tokens(tokens, set(self.all_special_tokens), skip_special_tokens)
        if clean_up_tokenization_spaces is None:
            clean_up_tokenization_spaces = self.clean_up_tokenization_spaces
        if clean_up_tokenization_spaces:
            text = self.clean_up_tokenization(text)
        return text

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple[str]:
        """Write `vocab.txt` (tokens in id order) from the tokenizer's own vocabulary."""
        path = os.path.join(save_directory, (filename_prefix + "-" if filename_prefix else "") + "vocab.txt")
        vocab = self._tokenizer.get_vocab(with_added_tokens=False)
        tokens = sorted(vocab, key=vocab.get)
        if [vocab[token] for token in tokens] != list(range(len(tokens))):
            raise ValueError("The vocabulary ids are not contiguous; it cannot be written as vocab.txt.")
        with open(path, "w", encoding="utf-8") as writer:
            writer.write("\n".join(tokens) + "\n")
        return (path,)

    def _save_pretrained(self, save_directory, file_names, legacy_format=None, filename_prefix=None):
        """Save `vocab.txt`, and `tokenizer.json` only at char level: a word-level `tokenizer.json` cannot hold the
        jieba step, and any loader that read it without this class would silently tokenize differently."""
        file_names = tuple(file_names) + self.save_vocabulary(str(save_directory), filename_prefix)
        if not self.word_level:
            file_names = super()._save_pretrained(save_directory, file_names, legacy_format, filename_prefix)
        return file_names


__all__ = ["HfRoFormerTokenizer", "JiebaWordPreTokenizer", "load_vocab"]
