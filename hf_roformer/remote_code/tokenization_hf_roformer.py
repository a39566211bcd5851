"""Tokenizer of the original Chinese RoFormer checkpoints, identical to the original (bert4keras' `Tokenizer`).

Word level (vocab ~50,000, the `chinese_roformer_*` checkpoints): bert4keras'
`Tokenizer(vocab, do_lower_case=True, pre_tokenize=lambda s: jieba.cut(s, HMM=False))`. The text is lowercased and
accents are stripped; jieba segments it; a segment that is in the vocabulary is one token; any other segment is split
as BERT's basic tokenizer does (punctuation and CJK characters apart, on whitespace, control characters dropped) and
then by greedy longest-match WordPiece (`##`, words over 200 characters or without a match become `[UNK]`).

Char level (vocab ~12,000: char, sim, v2, gpt checkpoints): the same without jieba.

Inputs are `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]` with segment ids 0/1; pairs are truncated longest-first as
the original truncates them. Decoding writes CJK text without spaces, as the original decodes.

Texts are normalized, segmented and cut into word pieces in Python (`encoding_hf_roformer`), whole texts at a time;
`tokenizers` adds the special tokens, truncates with overflow and pads. The `tokenizers` pipeline of the tokenizer
(`backend_tokenizer`, saved as `tokenizer.json` at char level) is the char-level tokenizer written with built-in
steps; offsets map back to the original text.

Hub-bound: copied next to saved tokenizers with its siblings; imports only `transformers`, its `tokenizers`
dependency, the siblings and (optionally) `jieba` or `rjieba`.
"""

import os

from tokenizers import Tokenizer, decoders, processors
from tokenizers.models import WordPiece
from transformers.tokenization_utils_base import BatchEncoding, PaddingStrategy, TruncationStrategy
from transformers.tokenization_utils_tokenizers import TokenizersBackend

from .encoding_hf_roformer import (
    MAX_WORD_CHARS,
    SEGMENTERS,
    LazyEncodings,
    OriginalEncoder,
    OverflowPipeline,
    Padding,
    encode_columns,
    original_pair_lengths,
    resolve_segmenter,
    split_pair,
    truncated_lengths,
)
from .releases_hf_roformer import backend_encode_plus, with_tokenizers_pipeline
from .text_rules_hf_roformer import (
    decode_tokens,
    is_cjk_character,
    original_basic_pre_tokenizer,
    original_normalizer,
)


VOCAB_FILES_NAMES = {"vocab_file": "vocab.txt", "tokenizer_file": "tokenizer.json"}
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(vocab_file: str | os.PathLike) -> dict[str, int]:
    """Read a BERT-style `vocab.txt` (one token per line, id = line number) the way the original loader does.

    Raises a `ValueError` naming the file when it cannot be read, is empty, or lists a token on more than one line
    (the original loader then gives two tokens one id and shifts every id after the repeat).
    """
    try:
        with open(vocab_file, encoding="utf-8") as reader:
            lines = reader.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{vocab_file}: cannot read the vocabulary ({error}).") from error
    tokens = []
    for line in lines:
        fields = line.split()
        tokens.append(fields[0] if fields else line.strip())
    if not tokens:
        raise ValueError(f"{vocab_file}: the vocabulary is empty.")
    check_tokens_listed_once(tokens, str(vocab_file))
    return {token: index for index, token in enumerate(tokens)}


def check_tokens_listed_once(tokens: list[str], source: str, shown: int = 5) -> None:
    """Raise a `ValueError` naming `source`, the repeated tokens and their line numbers (from 1) when a token of the
    vocabulary lines `tokens` appears more than once."""
    lines: dict[str, list[int]] = {}
    for number, token in enumerate(tokens, start=1):
        lines.setdefault(token, []).append(number)
    repeated = [(token, numbers) for token, numbers in lines.items() if len(numbers) > 1]
    if not repeated:
        return

    def where(numbers: list[int]) -> str:
        return ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}"

    listed = ", ".join(f"{token!r} on lines {where(numbers)}" for token, numbers in repeated[:shown])
    more = f" (and {len(repeated) - shown} more)" if len(repeated) > shown else ""
    raise ValueError(
        f"{source}: {len(repeated)} token(s) listed on more than one line: {listed}{more}; each token must have one "
        "line, whose number gives its id."
    )


def check_special_tokens(vocab: dict[str, int], special_tokens, source: str) -> None:
    """Raise a `ValueError` naming the source when a special token is missing from the vocabulary."""
    missing = [token for token in special_tokens if token not in vocab]
    if missing:
        raise ValueError(f"{source}: the vocabulary lacks the special token(s) {missing}.")


def is_word_level_vocab(vocab: dict[str, int]) -> bool:
    """Whether a vocabulary holds multi-character Chinese words (the jieba word-level checkpoints) rather than only
    characters (the char-level ones)."""
    return any(len(token) > 1 and all(is_cjk_character(character) for character in token) for token in vocab)


def build_backend(vocab: dict[str, int], do_lower_case: bool, unk_token: str, nfkc_normalize: bool = False):
    """The char-level `tokenizers` pipeline (normalizer, basic split, WordPiece, decoder; the post-processor is set
    later), every step built in, so it saves to `tokenizer.json`."""
    backend = Tokenizer(WordPiece(vocab, unk_token=unk_token, max_input_chars_per_word=MAX_WORD_CHARS))
    backend.normalizer = original_normalizer(do_lower_case, nfkc_normalize)
    backend.pre_tokenizer = original_basic_pre_tokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    return backend


def check_text_and_pair(text, text_pair, is_split_into_words: bool) -> bool:
    """Whether `text` is a batch. Raises `TypeError` when `text_pair` does not have the shape of `text` (a batch
    paired with one text, one text paired with a list) and `ValueError` when batch lengths differ."""
    if is_split_into_words:
        batched = isinstance(text, (list, tuple)) and len(text) > 0 and isinstance(text[0], (list, tuple))
        one = "list of words"

        def is_one(value) -> bool:
            return isinstance(value, (list, tuple)) and all(isinstance(word, str) for word in value)
    else:
        batched = isinstance(text, (list, tuple))
        one = "text (str)"

        def is_one(value) -> bool:
            return isinstance(value, str)

    if text_pair is None:
        return batched
    if batched:
        if not isinstance(text_pair, (list, tuple)) or (is_split_into_words and is_one(text_pair) and text_pair):
            raise TypeError(
                f"`text` is a batch of {len(text)} but `text_pair` is a single {type(text_pair).__name__}: "
                f"pass a list of {len(text)} second sequences (one {one} each)."
            )
        if len(text_pair) != len(text):
            raise ValueError(
                f"`text` is a batch of {len(text)} but `text_pair` a batch of {len(text_pair)}: "
                "each text needs exactly one second text."
            )
    elif not is_one(text_pair):
        raise TypeError(
            f"`text` is a single {one} but `text_pair` is {type(text_pair).__name__}: pass one {one} as "
            "`text_pair`, or lists of the same length as `text` and `text_pair` for a batch of pairs."
        )
    return batched


def unbatched(encoded: BatchEncoding) -> BatchEncoding:
    """The outputs of a batch of one as `TokenizersBackend` returns a single input: without the batch axis."""
    return BatchEncoding(
        {key: value[0] if value and isinstance(value[0], list) else value for key, value in encoded.items()},
        encoded.encodings,
        n_sequences=encoded.n_sequences,
    )


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
        segmenter: "auto" (default: rjieba when installed, else jieba), "jieba" (the original's segmenter, in Python)
            or "rjieba" (its Rust port; the same words on every text checked, several times faster).
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
    # Saving copies this file (and its siblings) next to the tokenizer and records it under `auto_map`.
    _auto_class = "AutoTokenizer"

    def __init__(
        self,
        vocab: str | os.PathLike | dict[str, int] | None = None,
        vocab_file: str | None = None,
        do_lower_case: bool = True,
        nfkc_normalize: bool = False,
        word_level: bool | None = None,
        segmenter: str = "auto",
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
        # The segmenter that runs (word level); resolved now, so a missing package fails at load time.
        self.segmenter_in_use = resolve_segmenter(segmenter) if word_level else None
        self._encoder = None
        self._tokenizer = build_backend(vocab, do_lower_case, str(unk_token), nfkc_normalize)
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

    def __getstate__(self):
        # The encoder holds memos and is rebuilt on first use: pickles stay small and hash the same over time.
        state = self.__dict__.copy()
        state["_encoder"] = None
        return state

    def _original_encoder(self) -> OriginalEncoder:
        if self._encoder is None:
            self._encoder = OriginalEncoder(
                self._tokenizer, self.segmenter_in_use, self.do_lower_case, self.nfkc_normalize
            )
        return self._encoder

    def _encode_plus(self, text, text_pair=None, **kwargs) -> BatchEncoding:
        """Encode as `TokenizersBackend` does (same arguments, same outputs), with the original's text rules
        (`OriginalEncoder`) in place of the `tokenizers` pipeline, the original's pair truncation, strict checks of
        the input shapes and of `max_length`, and an empty second text encoded as a pair. The model inputs are built
        from the token lists; the `tokenizers` `Encoding`s only when read. Calls asking for overflowing tokens (or a
        stride) build `Encoding`s and let `tokenizers` truncate them."""
        is_split_into_words = kwargs.get("is_split_into_words", False)
        batched = check_text_and_pair(text, text_pair, is_split_into_words)
        if batched:
            items = list(text) if text_pair is None else list(zip(text, text_pair, strict=True))
        else:
            items = [text if text_pair is None else (text, text_pair)]
        pairs = [split_pair(item, is_split_into_words, index) for index, item in enumerate(items)]
        self._check_max_length(any(second is not None for _, second in pairs), kwargs)
        if kwargs.get("return_overflowing_tokens") or kwargs.get("stride"):
            return self._encode_with_overflow(text, text_pair, batched, kwargs)
        encoded = self._encode_columns(pairs, kwargs)
        if batched or kwargs.get("return_tensors") is not None:
            return encoded
        return unbatched(encoded)

    def _encode_columns(self, pairs: list[tuple], kwargs: dict) -> BatchEncoding:
        """The batch of `(first, second_or_None)` sequences as a `BatchEncoding` with lazily built `Encoding`s."""
        add_special_tokens = kwargs.get("add_special_tokens", True)
        split_special_tokens = kwargs.get("split_special_tokens")
        if split_special_tokens is None:
            split_special_tokens = self.split_special_tokens
        is_split_into_words = kwargs.get("is_split_into_words", False)
        encoder = self._original_encoder()
        firsts = encoder.token_lists([first for first, _ in pairs], is_split_into_words, split_special_tokens)
        present = iter(
            encoder.token_lists(
                [second for _, second in pairs if second is not None], is_split_into_words, split_special_tokens
            )
        )
        seconds = [next(present) if second is not None else None for _, second in pairs]
        strategy = kwargs.get("truncation_strategy", TruncationStrategy.DO_NOT_TRUNCATE)
        max_length = kwargs.get("max_length")
        if strategy != TruncationStrategy.DO_NOT_TRUNCATE and max_length is not None:
            for index, (first, second) in enumerate(zip(firsts, seconds, strict=True)):
                specials = self._tokenizer.num_special_tokens_to_add(second is not None) if add_special_tokens else 0
                kept_first, kept_second = truncated_lengths(
                    len(first), None if second is None else len(second), max_length - specials, strategy.value
                )
                firsts[index] = first.kept(kept_first, self.truncation_side)
                if second is not None:
                    seconds[index] = second.kept(kept_second, self.truncation_side)
        padding, length = None, None
        padding_strategy = kwargs.get("padding_strategy", PaddingStrategy.DO_NOT_PAD)
        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            padding = Padding(
                length=max_length if padding_strategy == PaddingStrategy.MAX_LENGTH else None,
                multiple=kwargs.get("pad_to_multiple_of"),
                side=kwargs.get("padding_side") or self.padding_side,
                pad_id=self.pad_token_id,
                pad_type_id=self.pad_token_type_id,
                pad_token=str(self.pad_token),
            )
            specials = [self._tokenizer.num_special_tokens_to_add(second is not None) for second in seconds]
            length = padding.target(
                [
                    len(first) + (len(second) if second is not None else 0) + (count if add_special_tokens else 0)
                    for first, second, count in zip(firsts, seconds, specials, strict=True)
                ]
            )
        columns = self._output_columns(kwargs)
        data = encode_columns(
            firsts, seconds, self.cls_token_id, self.sep_token_id, add_special_tokens, padding, length, columns,
            end_with_sep=self.end_with_sep,
        )
        encodings = LazyEncodings(
            firsts, seconds, add_special_tokens, padding, length, encoder.post_processing_tokenizer()
        )
        n_sequences = 2 if pairs and pairs[0][1] is not None else 1
        return BatchEncoding(data, encodings, tensor_type=kwargs.get("return_tensors"), n_sequences=n_sequences)

    def _output_columns(self, kwargs: dict) -> tuple[str, ...]:
        """The outputs asked for, in the order `TokenizersBackend` returns them."""
        wanted = {
            "input_ids": True,
            "token_type_ids": kwargs.get("return_token_type_ids"),
            "attention_mask": kwargs.get("return_attention_mask"),
            "special_tokens_mask": kwargs.get("return_special_tokens_mask", False),
            "offset_mapping": kwargs.get("return_offsets_mapping", False),
            "length": kwargs.get("return_length", False),
        }
        for name in ("token_type_ids", "attention_mask"):
            if wanted[name] is None:
                wanted[name] = name in self.model_input_names
        return tuple(name for name, asked in wanted.items() if asked)

    def _encode_with_overflow(self, text, text_pair, batched: bool, kwargs: dict) -> BatchEncoding:
        """Encode through `TokenizersBackend._encode_plus`, its `tokenizers` pipeline replaced by
        `OverflowPipeline`."""
        view = self._with_backend(OverflowPipeline(self._tokenizer, self._original_encoder()))
        if batched or text_pair is None:
            return backend_encode_plus(view, text, text_pair, **kwargs)
        # a single pair goes as a batch of one: `TokenizersBackend` reads an empty `text_pair` as no pair
        encoded = backend_encode_plus(view, [text], [text_pair], **kwargs)
        if kwargs.get("return_tensors") is not None or kwargs.get("return_overflowing_tokens"):
            return encoded
        return unbatched(encoded)

    def _with_backend(self, backend) -> "HfRoFormerTokenizer":
        """A view of this tokenizer (same attributes, shared objects) whose `tokenizers` pipeline is `backend`: the
        encoding code of `TokenizersBackend` then runs unchanged on the original's encoding, without touching
        `self`, so concurrent calls stay independent."""
        return with_tokenizers_pipeline(self, backend)

    def _eventual_warn_about_too_long_sequence(self, ids, max_length, verbose) -> None:
        """Never warn that a text longer than `model_max_length` "will result in indexing errors": transformers says
        so for models with a position table, and RoFormer has none (positions are rotations, any length runs). This
        method emits only that warning; `model_max_length` still sets where truncation cuts."""

    def _check_max_length(self, is_pair: bool, kwargs: dict) -> None:
        """Raise a `ValueError` when truncation asks for fewer tokens than the special tokens alone take."""
        truncating = kwargs.get("truncation_strategy", TruncationStrategy.DO_NOT_TRUNCATE)
        max_length = kwargs.get("max_length")
        if truncating == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None:
            return
        specials = self._tokenizer.num_special_tokens_to_add(is_pair) if kwargs.get("add_special_tokens", True) else 0
        if max_length < specials:
            layout = "[CLS] A [SEP] B [SEP]" if is_pair else "[CLS] A [SEP]"
            raise ValueError(
                f"max_length={max_length} cannot hold the {specials} special tokens of {layout}: "
                f"use max_length >= {specials}, or add_special_tokens=False."
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
        jieba step, and any loader that read it without this class would silently tokenize at char level."""
        file_names = tuple(file_names) + self.save_vocabulary(str(save_directory), filename_prefix)
        if not self.word_level:
            file_names = super()._save_pretrained(save_directory, file_names, legacy_format, filename_prefix)
        return file_names


__all__ = ["HfRoFormerTokenizer", "check_tokens_listed_once", "load_vocab", "original_pair_lengths"]
