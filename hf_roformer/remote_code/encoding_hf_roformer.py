"""Encoding texts as the original RoFormer tokenizer does, in Python, into `tokenizers` `Encoding`s.

The word-level step (jieba) cannot run inside the `tokenizers` pipeline cheaply: a Python pre-tokenizer costs a
Rust/Python round trip per piece and slices the text once per piece (quadratic in the text length). So each text
is normalized, segmented and cut into word pieces here, in one pass over whole texts: each segment's tokens are
memoized, other pieces go through the WordPiece model of `tokenizers`. The model inputs are built from the token
lists (`encode_columns`); the `Encoding`s behind `word_ids()` and friends are built from the same lists when read
(`LazyEncodings`), through the `tokenizers` post-processor and padding. Calls that ask for overflowing tokens build
the `Encoding`s and let `tokenizers` truncate them (`OverflowPipeline`).

Truncation that returns no overflow is applied to the token lists, so a long text or pair builds only what it keeps;
pairs truncated longest-first follow the original's rule (`original_pair_lengths`).

Hub-bound: copied next to saved tokenizers; imports only the standard library, `tokenizers`, its siblings and
(optionally) `jieba` or `rjieba`.
"""

import functools
import importlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain, compress
from json.encoder import encode_basestring
from operator import sub

from tokenizers import Encoding, Tokenizer
from tokenizers.models import WordLevel

from .releases_hf_roformer import encoding_from_state, encoding_state_fields
from .text_rules_hf_roformer import basic_split, normalize_with_alignment


@functools.cache
def segmenter_module(name: str):
    """The module `jieba` or `rjieba`, imported when a word-level tokenizer first needs it (None where it is not
    installed): char-level tokenizers never import either."""
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    if name == "jieba":
        module.setLogLevel(logging.WARNING)  # its dictionary loading prints progress lines on the first segmentation
    return module


SEGMENTERS = ("auto", "jieba", "rjieba")
MAX_WORD_CHARS = 200
MEMO_LIMIT = 100_000


def cut_with_jieba(text: str) -> list[str]:
    """jieba's exact mode without HMM, as the original segments."""
    return segmenter_module("jieba").lcut(text, HMM=False)


def cut_with_rjieba(text: str) -> list[str]:
    """rjieba's exact mode without HMM (a Rust port of jieba; same words on every text checked)."""
    return segmenter_module("rjieba").cut(text, hmm=False)


def resolve_segmenter(segmenter: str) -> str:
    """The segmenter that runs: "auto" is rjieba when installed, jieba otherwise. Raises `ImportError` naming the
    package to install, `ValueError` for an unknown name."""
    if segmenter not in SEGMENTERS:
        raise ValueError(f"`segmenter` {segmenter!r} is not one of {SEGMENTERS}.")
    if segmenter == "auto":
        segmenter = "rjieba" if segmenter_module("rjieba") is not None else "jieba"
    if segmenter == "rjieba" and segmenter_module("rjieba") is None:
        raise ImportError("segmenter='rjieba' needs rjieba: pip install rjieba")
    if segmenter == "jieba" and segmenter_module("jieba") is None:
        raise ImportError("The word-level RoFormer tokenizer needs jieba (or rjieba): pip install jieba")
    return segmenter


SEGMENTER_FUNCTIONS = {"jieba": cut_with_jieba, "rjieba": cut_with_rjieba}


@dataclass
class TokenLists:
    """Tokens of one sequence, column by column; `starts`/`ends` are character offsets in the encoded text."""

    ids: list[int] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)
    words: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def kept(self, count: int, direction: str) -> "TokenLists":
        """The first (`direction="right"`) or last `count` tokens."""
        if count >= len(self.ids):
            return self
        window = slice(len(self.ids) - count, None) if direction == "left" else slice(0, count)
        return TokenLists(
            self.ids[window], self.tokens[window], self.starts[window], self.ends[window], self.words[window]
        )


ENCODING_STATE_FIELDS = (
    "ids",
    "type_ids",
    "tokens",
    "words",
    "offsets",
    "special_tokens_mask",
    "attention_mask",
    "overflowing",
    "sequence_ranges",
)
_TUPLES_AS_LISTS = str.maketrans("()", "[]")


def check_encoding_state_format() -> None:
    """`tokenizers` has no constructor for an `Encoding` with given contents; its pickle state (the JSON of the
    Rust struct) is one. Raise a `RuntimeError` naming the fields if this version of `tokenizers` stores others."""
    fields = encoding_state_fields()
    if fields != ENCODING_STATE_FIELDS:
        raise RuntimeError(
            f"tokenizers stores an Encoding as the fields {fields}, not {ENCODING_STATE_FIELDS}: this version of "
            "tokenizers is not supported by the RoFormer tokenizer."
        )


def encoding_from_tokens(lists: TokenLists, type_id: int = 0) -> Encoding:
    """An `Encoding` of the tokens of `lists` without special tokens; `type_id` is 1 for the second sequence of a
    pair, as `tokenizers` encodes it (its overflowing parts keep it)."""
    offsets = str(list(zip(lists.starts, lists.ends, strict=True))).translate(_TUPLES_AS_LISTS)
    zeros = "[" + ",".join("0" * len(lists)) + "]"
    ones = "[" + ",".join("1" * len(lists)) + "]"
    state = (
        f'{{"ids":{lists.ids},"type_ids":{ones if type_id else zeros},'
        f'"tokens":[{",".join(map(encode_basestring, lists.tokens))}],"words":{lists.words},'
        f'"offsets":{offsets},"special_tokens_mask":{zeros},"attention_mask":{ones},'
        '"overflowing":[],"sequence_ranges":{}}'
    )
    return encoding_from_state(state)


class AddedTokenSplitter:
    """Finds the added tokens (`[CLS]`, `[MASK]`, tokens added by the user) in a text exactly as `tokenizers` does
    (normalized or not, lstrip/rstrip/single_word, `encode_special_tokens`), by running a Rust tokenizer that holds
    the same added vocabulary and normalizer and a one-entry model for the text between them."""

    TEXT = "\x00text"

    def __init__(self, backend: Tokenizer):
        added = backend.get_added_tokens_decoder()
        self.key = added_tokens_key(added)
        self.helper = Tokenizer(WordLevel({self.TEXT: 0}, unk_token=self.TEXT))
        self.helper.normalizer = backend.normalizer
        self.backend_ids = {}
        for backend_id, token in sorted(added.items()):
            (self.helper.add_special_tokens if token.special else self.helper.add_tokens)([token])
            self.backend_ids[self.helper.token_to_id(token.content)] = backend_id
        self.raw_contents = [token.content for token in added.values() if not token.normalized]
        self.normalized_contents = [
            backend.normalizer.normalize_str(token.content) if backend.normalizer else token.content
            for token in added.values()
            if token.normalized
        ]
        self.normalizer = backend.normalizer

    def may_occur(self, text: str) -> bool:
        """Whether an added token may occur in `text` (a cheap test before the exact split)."""
        if any(content in text for content in self.raw_contents):
            return True
        if self.normalized_contents:
            normalized = self.normalizer.normalize_str(text) if self.normalizer else text
            return any(content in normalized for content in self.normalized_contents)
        return False

    def split(self, text: str, encode_special_tokens: bool) -> list[tuple[int, int, int | None]]:
        """`(start, end, token_id)` spans of `text` in order: an added token with its id, or text (`None`)."""
        self.helper.encode_special_tokens = encode_special_tokens
        encoding = self.helper.encode(text, add_special_tokens=False)
        return [
            (start, end, self.backend_ids.get(token_id))
            for token_id, (start, end) in zip(encoding.ids, encoding.offsets, strict=True)
        ]


def added_tokens_key(added: dict) -> tuple:
    """What identifies an added vocabulary (to rebuild the splitter when tokens are added)."""
    return tuple(
        (index, token.content, token.special, token.normalized, token.lstrip, token.rstrip, token.single_word)
        for index, token in sorted(added.items())
    )


class OriginalEncoder:
    """Encodes texts with the original's rules: normalization, the word segmenter (word level) and the basic split,
    then WordPiece. Texts become `TokenLists` (offsets into the text, one word id per piece)."""

    def __init__(self, backend: Tokenizer, segmenter: str | None, do_lower_case: bool, nfkc_normalize: bool):
        check_encoding_state_format()
        self.backend = backend
        self.model = backend.model
        self.vocab = backend.get_vocab(with_added_tokens=False)
        self.unk_token = self.model.unk_token
        self.unk_id = self.vocab[self.unk_token]
        self.cut = SEGMENTER_FUNCTIONS[segmenter] if segmenter is not None else None
        self.do_lower_case = do_lower_case
        self.nfkc_normalize = nfkc_normalize
        self.token_of_id = {token_id: token for token, token_id in self.vocab.items()}
        self.units: dict[str, tuple] = {}  # segment of the word segmenter -> its units (`add_segmented_text`)
        self.splitter: AddedTokenSplitter | None = None
        self.post = Tokenizer(WordLevel({self.unk_token: 0}, unk_token=self.unk_token))

    def post_processing_tokenizer(self) -> Tokenizer:
        """A tokenizer holding only the post-processor of the backend (no truncation or padding settings), to build
        `Encoding`s later whatever the backend is set to then."""
        self.post.post_processor = self.backend.post_processor
        return self.post

    def token_lists(self, sequences: list, is_pretokenized: bool, encode_special_tokens: bool) -> list[TokenLists]:
        """Tokens of each sequence: a text, or (pre-tokenized) a list of words, each encoded alone, its tokens
        carrying the word's index and offsets within the word (as `tokenizers` does). With `encode_special_tokens`,
        special tokens written in the text are read as text."""
        splitter = self.added_token_splitter()
        result = []
        for sequence in sequences:
            lists = TokenLists()
            if is_pretokenized:
                for index, word in enumerate(sequence):
                    self.add_text(word, lists, splitter, encode_special_tokens, word_id=index)
            else:
                self.add_text(sequence, lists, splitter, encode_special_tokens)
            result.append(lists)
        return result

    def added_token_splitter(self) -> AddedTokenSplitter:
        added = self.backend.get_added_tokens_decoder()
        if self.splitter is None or self.splitter.key != added_tokens_key(added):
            self.splitter = AddedTokenSplitter(self.backend)
        return self.splitter

    def add_text(self, text: str, lists: TokenLists, splitter, encode_special_tokens: bool, word_id=None) -> None:
        """Append the tokens of `text` to `lists`; added tokens are cut out first, each one token and one word."""
        if not splitter.may_occur(text):
            self.add_plain_text(text, 0, lists, word_id)
            return
        for start, end, token_id in splitter.split(text, encode_special_tokens):
            if token_id is None:
                self.add_plain_text(text[start:end], start, lists, word_id)
                continue
            lists.ids.append(token_id)
            lists.tokens.append(self.backend.id_to_token(token_id))
            lists.starts.append(start)
            lists.ends.append(end)
            lists.words.append(word_id if word_id is not None else next_word_id(lists))

    def add_plain_text(self, text: str, base: int, lists: TokenLists, word_id) -> None:
        """Append the tokens of `text` (no added tokens in it), its offsets shifted by `base`."""
        normalized, origins = normalize_with_alignment(text, self.do_lower_case, self.nfkc_normalize)
        first = len(lists)
        if self.cut is None:
            ids, _, starts, ends, words, _ = self.segment_pieces(normalized)
            lists.ids += ids
            lists.tokens += map(self.token_of_id.__getitem__, ids)
            lists.starts += starts
            lists.ends += ends
            lists.words += map(next_word_id(lists).__add__, words)
        else:
            self.add_segmented_text(normalized, lists)
        if word_id is not None:
            lists.words[first:] = [word_id] * (len(lists) - first)
        if origins is not None:
            lists.starts[first:] = [origins[start] for start in lists.starts[first:]]
            lists.ends[first:] = [origins[end - 1] + 1 for end in lists.ends[first:]]
        if base:
            lists.starts[first:] = [start + base for start in lists.starts[first:]]
            lists.ends[first:] = [end + base for end in lists.ends[first:]]

    def add_segmented_text(self, text: str, lists: TokenLists) -> None:
        """Append the tokens of `text` (normalized) cut by the word segmenter: a segment that is a vocabulary word is
        one token, whatever it holds; any other goes through the basic split and WordPiece. Each segment is looked
        up in a memo of its units `(id, token, characters spanned, starts a word)` (a gap of dropped characters is
        a unit with id None), so a text costs a few list operations over its segments."""
        segments = self.cut(text)
        try:
            units = list(chain.from_iterable(map(self.units.__getitem__, segments)))
        except KeyError:
            unseen = set(segments).difference(self.units)
            if len(self.units) + len(unseen) > MEMO_LIMIT:  # start the memo again, keeping what this text needs
                self.units.clear()
                unseen = set(segments)
            for segment in unseen:
                self.learn_units(segment)
            units = list(chain.from_iterable(map(self.units.__getitem__, segments)))
        if not units:
            if text:
                raise RuntimeError(f"The word segmenter lost the characters of {text[:50]!r}.")
            return
        ids, tokens, lengths, new_words = zip(*units, strict=True)
        ends = list(accumulate(lengths))
        if ends[-1] != len(text):
            raise RuntimeError(f"The word segmenter lost characters of {text[:50]!r}.")
        starts = map(sub, ends, lengths)
        words = accumulate(new_words, initial=next_word_id(lists) - 1)
        next(words)
        if None in ids:  # drop the gaps
            kept = [token_id is not None for token_id in ids]
            ids, tokens, starts, ends, words = (compress(column, kept) for column in (ids, tokens, starts, ends, words))
        lists.ids += ids
        lists.tokens += tokens
        lists.starts += starts
        lists.ends += ends
        lists.words += words

    def learn_units(self, segment: str) -> None:
        """Memoize the units of `segment` (see `add_segmented_text`)."""
        token_id = self.vocab.get(segment)
        if token_id is not None:
            self.units[segment] = ((token_id, segment, len(segment), 1),)
            return
        ids, tokens, starts, ends, words, _ = self.segment_pieces(segment)
        units, position, previous_word = [], 0, None
        for piece_id, token, start, end, word in zip(ids, tokens, starts, ends, words, strict=True):
            if start > position:
                units.append((None, None, start - position, 0))
            units.append((piece_id, token, end - start, int(word != previous_word)))
            position, previous_word = end, word
        if position < len(segment):
            units.append((None, None, len(segment) - position, 0))
        self.units[segment] = tuple(units)

    def segment_pieces(self, text: str) -> tuple:
        """Tokens of the basic split and WordPiece of `text`: ids, tokens, starts, ends, word ids (from 0), and the
        number of words."""
        ids, tokens, starts, ends, words = [], [], [], [], []
        split = basic_split(text)
        for index, (word, start, positions) in enumerate(split):
            for piece_id, piece, low, high in self.word_pieces_of(word):
                ids.append(piece_id)
                tokens.append(piece)
                starts.append(start + low if positions is None else positions[low])
                ends.append(start + high if positions is None else positions[high - 1] + 1)
                words.append(index)
        return ids, tokens, starts, ends, words, len(split)

    def word_pieces_of(self, word: str) -> tuple:
        """WordPiece tokens of `word` from the `tokenizers` model: `(id, token, start, end)` in characters."""
        token_id = self.vocab.get(word) if len(word) <= MAX_WORD_CHARS else None
        if token_id is not None:
            return ((token_id, word, 0, len(word)),)
        tokens = self.model.tokenize(word)
        if len(tokens) == 1 and tokens[0].value == self.unk_token and word != self.unk_token:
            return ((tokens[0].id, tokens[0].value, 0, len(word)),)
        pieces, start = [], 0
        for index, token in enumerate(tokens):
            length = len(token.value) - (2 if index and token.value.startswith("##") else 0)
            pieces.append((token.id, token.value, start, start + length))
            start += length
        return tuple(pieces)


def next_word_id(lists: TokenLists) -> int:
    return lists.words[-1] + 1 if lists.words else 0


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


def truncated_lengths(first: int, second: int | None, budget: int, strategy: str) -> tuple[int, int | None]:
    """Lengths a sequence (and its pair) keep within `budget` tokens: longest-first pairs by the original's rule,
    only_first/only_second by cutting that side. Raises `ValueError` when the side to cut cannot absorb the excess
    (the case `tokenizers` rejects as "Sequence to truncate too short")."""
    if second is None:
        return min(first, budget), None
    if first + second <= budget:
        return first, second
    if strategy == "longest_first":
        return original_pair_lengths(first, second, budget)
    side, length, other = ("first", first, second) if strategy == "only_first" else ("second", second, first)
    if length <= first + second - budget:
        raise ValueError(
            f"truncation={strategy!r} cannot fit this pair: the {side} text would have to drop "
            f"{first + second - budget} of its {length} tokens to fit max_length (the other text has {other} "
            "tokens, plus the special tokens); use truncation='longest_first' or a larger max_length."
        )
    excess = first + second - budget
    return (first - excess, second) if side == "first" else (first, second - excess)


@dataclass
class Padding:
    """Where and with what a batch is padded (`length` None: to the longest row), as `tokenizers` pads."""

    length: int | None
    multiple: int | None
    side: str
    pad_id: int
    pad_type_id: int
    pad_token: str

    def target(self, lengths) -> int:
        """The padded length of rows of `lengths`."""
        length = self.length if self.length is not None else max(lengths, default=0)
        if self.multiple and length % self.multiple:
            length += self.multiple - length % self.multiple
        return length


def encode_columns(
    firsts: list[TokenLists],
    seconds: list[TokenLists | None],
    cls_id: int,
    sep_id: int,
    add_special_tokens: bool,
    padding: Padding | None,
    length: int | None,
    columns: tuple[str, ...],
    end_with_sep: bool = True,
) -> dict[str, list]:
    """The model inputs of a batch (`[CLS] A [SEP] B [SEP]`, segment ids 0/1; without `end_with_sep` the last
    `[SEP]` is left out: `[CLS] A`, `[CLS] A [SEP] B`) as `TokenizersBackend` returns them, built from the token lists
    without `tokenizers` `Encoding`s, padded to `length`; `columns` names the outputs asked for."""
    rows = {name: [] for name in ("input_ids", "token_type_ids", "special_tokens_mask", "offset_mapping")}
    with_offsets = "offset_mapping" in columns
    for first, second in zip(firsts, seconds, strict=True):
        tokens = len(first) + (len(second) if second is not None else 0)
        if add_special_tokens:
            first_sep = second is not None or end_with_sep
            ids = [cls_id, *first.ids, *([sep_id] if first_sep else [])]
            special = [1, *[0] * len(first), *([1] if first_sep else [])]
            offsets = [(0, 0), *zip(first.starts, first.ends, strict=True)] if with_offsets else None
            if with_offsets and first_sep:
                offsets.append((0, 0))
            type_ids = [0] * len(ids)
            if second is not None:
                ids += [*second.ids, *([sep_id] if end_with_sep else [])]
                special += [*[0] * len(second), *([1] if end_with_sep else [])]
                type_ids += [1] * (len(second) + end_with_sep)
                if with_offsets:
                    offsets += [*zip(second.starts, second.ends, strict=True), *([(0, 0)] if end_with_sep else [])]
        else:
            ids = first.ids + (second.ids if second is not None else [])
            special = [0] * tokens
            offsets = list(zip(first.starts, first.ends, strict=True)) if with_offsets else None
            if second is not None and with_offsets:
                offsets += zip(second.starts, second.ends, strict=True)
            type_ids = [0] * len(first) + ([1] * len(second) if second is not None else [])
        rows["input_ids"].append(ids)
        rows["token_type_ids"].append(type_ids)
        rows["special_tokens_mask"].append(special)
        rows["offset_mapping"].append(offsets)
    rows["attention_mask"] = [[1] * len(ids) for ids in rows["input_ids"]]
    if padding is not None:
        fills = {
            "input_ids": padding.pad_id,
            "token_type_ids": padding.pad_type_id,
            "attention_mask": 0,
            "special_tokens_mask": 1,
            "offset_mapping": (0, 0),
        }
        for name, fill in fills.items():
            if name in columns:
                rows[name] = [pad_row(row, length, fill, padding.side) for row in rows[name]]
    data = {name: rows[name] for name in columns if name != "length"}
    if "length" in columns:
        data["length"] = [len(ids) for ids in rows["input_ids"]]
    return data


def pad_row(row: list, length: int, fill, side: str) -> list:
    if len(row) >= length:
        return row
    padding = [fill] * (length - len(row))
    return padding + row if side == "left" else row + padding


class LazyEncodings(Sequence):
    """The `tokenizers` `Encoding`s of a batch, each built when first read (`word_ids()`, `tokens()`,
    `char_to_token()`, ...): most callers read only the model inputs, which `encode_columns` built without them. Each
    is built as `tokenizers` builds it: the token lists, then the post-processor (special tokens), then padding."""

    def __init__(self, firsts, seconds, add_special_tokens: bool, padding: Padding | None, length, post: Tokenizer):
        self.firsts, self.seconds = firsts, seconds
        self.add_special_tokens = add_special_tokens
        self.padding, self.length = padding, length  # `length`: what the batch is padded to
        self.post = post
        self.built: list[Encoding | None] = [None] * len(firsts)

    def __len__(self) -> int:
        return len(self.firsts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[position] for position in range(*index.indices(len(self)))]
        if self.built[index] is None:
            second = self.seconds[index]
            encoding = self.post.post_process(
                encoding_from_tokens(self.firsts[index]),
                None if second is None else encoding_from_tokens(second, type_id=1),
                self.add_special_tokens,
            )
            if self.padding is not None:
                encoding.pad(
                    self.length,
                    direction=self.padding.side,
                    pad_id=self.padding.pad_id,
                    pad_type_id=self.padding.pad_type_id,
                    pad_token=self.padding.pad_token,
                )
            self.built[index] = encoding
        return self.built[index]


class OverflowPipeline:
    """Stands in for the `tokenizers.Tokenizer` of a `TokenizersBackend` during one call that asks for overflowing
    tokens (or a stride): `encode_batch` encodes with `OriginalEncoder` and builds full `Encoding`s; the real tokenizer
    truncates them (with its own longest-first rule and overflow), adds the special tokens and pads. Everything else
    goes to the real tokenizer."""

    __slots__ = ("backend", "encoder")

    def __init__(self, backend: Tokenizer, encoder: OriginalEncoder):
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "encoder", encoder)

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def __setattr__(self, name, value):
        setattr(self.backend, name, value)

    def encode_batch(self, inputs, add_special_tokens: bool = True, is_pretokenized: bool = False) -> list[Encoding]:
        """`tokenizers.Tokenizer.encode_batch` with the original's encoding."""
        pairs = [split_pair(item, is_pretokenized, index) for index, item in enumerate(inputs)]
        special = self.backend.encode_special_tokens
        firsts = self.encoder.token_lists([first for first, _ in pairs], is_pretokenized, special)
        seconds = self.encoder.token_lists(
            [second for _, second in pairs if second is not None], is_pretokenized, special
        )
        seconds = iter(seconds)
        encodings = []
        for (_, second_text), first in zip(pairs, firsts, strict=True):
            second = encoding_from_tokens(next(seconds), type_id=1) if second_text is not None else None
            try:
                encodings.append(self.backend.post_process(encoding_from_tokens(first), second, add_special_tokens))
            except Exception as error:  # tokenizers raises a bare Exception for truncation it cannot do
                if "Truncation error" not in str(error):
                    raise
                raise ValueError(f"{error} (truncation: {self.backend.truncation}).") from error
        padding = self.backend.padding
        if padding and padding["length"] is None and encodings:
            length = Padding(None, padding["pad_to_multiple_of"], "right", 0, 0, "").target(map(len, encodings))
            for encoding in encodings:
                encoding.pad(
                    length,
                    direction=padding["direction"],
                    pad_id=padding["pad_id"],
                    pad_type_id=padding["pad_type_id"],
                    pad_token=padding["pad_token"],
                )
        return encodings


def split_pair(item, is_pretokenized: bool, index: int) -> tuple:
    """`(first, second_or_None)` of one batch item; raises `TypeError` naming the item when it is neither a
    sequence nor a pair of sequences."""

    def is_sequence(value) -> bool:
        if is_pretokenized:
            return isinstance(value, (list, tuple)) and all(isinstance(word, str) for word in value)
        return isinstance(value, str)

    if is_sequence(item):
        return item, None
    if isinstance(item, (list, tuple)) and len(item) == 2 and is_sequence(item[0]) and is_sequence(item[1]):
        return item[0], item[1]
    kind = "a list of words" if is_pretokenized else "a text (str)"
    raise TypeError(f"Input {index} of the batch is {type(item).__name__}, not {kind} or a pair of them: {item!r:.80}")
