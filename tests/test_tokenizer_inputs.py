"""How the RoFormer tokenizer takes its inputs: texts and pairs of every shape (refused with the errors BERT's fast
tokenizer gives where they do not pair up), truncation as the original truncates without building what it drops,
long texts, added tokens, and the `tokenizers` `Encoding`s it builds lazily, which must equal the returned columns."""

import random
import sys
from pathlib import Path

import pytest
from tokenizers import AddedToken

from hf_roformer.remote_code.encoding_hf_roformer import original_pair_lengths
from hf_roformer.remote_code.tokenization_hf_roformer import HfRoFormerTokenizer


FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from make_decode_and_char_golden import FUZZ_ALPHABET  # noqa: E402
from make_tokenizer_golden import corpus_lines  # noqa: E402


pytestmark = [  # see setup.cfg
    pytest.mark.releases("remote_code.encoding_hf_roformer", "remote_code.tokenization_hf_roformer"),
]


@pytest.fixture(scope="module")
def word():
    return HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"))


@pytest.fixture(scope="module")
def char():
    return HfRoFormerTokenizer(str(FIXTURES / "char_vocab.txt"))


@pytest.fixture(scope="module")
def lines():
    return [line for line in corpus_lines() if line][:1200]


def test_a_batch_paired_with_one_text_is_refused(word):
    with pytest.raises(TypeError, match=r"`text` is a batch of 2 but `text_pair` is a single str: pass a list of 2"):
        word(["今天", "天气"], "好的", truncation=True, max_length=16)


def test_batches_of_different_lengths_are_refused(word):
    with pytest.raises(ValueError, match=r"`text` is a batch of 1 but `text_pair` a batch of 2"):
        word(["今天"], ["好的", "天气"])


def test_one_text_paired_with_a_list_is_refused(word):
    with pytest.raises(TypeError, match=r"`text` is a single text \(str\) but `text_pair` is list"):
        word("今天", ["好的"])


def test_word_lists_paired_with_one_word_list_are_refused(word):
    with pytest.raises(TypeError, match=r"`text` is a batch of 2 but `text_pair` is a single list"):
        word([["今天"], ["天气"]], ["好的", "很好"], is_split_into_words=True)


def test_a_batch_item_that_is_not_a_text_is_refused(word):
    with pytest.raises(TypeError, match=r"Input 1 of the batch is int, not a text \(str\) or a pair of them"):
        word(["今天", 5])


@pytest.mark.parametrize("truncation", ["longest_first", "only_first", "only_second"])
def test_max_length_below_the_special_tokens_of_a_pair_is_refused(word, truncation):
    message = r"max_length=2 cannot hold the 3 special tokens of \[CLS\] A \[SEP\] B \[SEP\]"
    with pytest.raises(ValueError, match=message):
        word("今天天气", "好的", truncation=truncation, max_length=2)


def test_max_length_below_the_special_tokens_of_a_text_is_refused(word):
    with pytest.raises(ValueError, match=r"max_length=1 cannot hold the 2 special tokens of \[CLS\] A \[SEP\]"):
        word("今天天气", truncation=True, max_length=1)


def test_max_length_of_the_special_tokens_alone_empties_both_texts(word):
    """As the original truncates a pair to `maxlen=3`: `[CLS] [SEP] [SEP]`."""
    encoded = word("今天天气", "好的", truncation=True, max_length=3)
    assert encoded["input_ids"] == [word.cls_token_id, word.sep_token_id, word.sep_token_id]
    assert encoded["token_type_ids"] == [0, 0, 1]


def test_truncating_only_one_text_that_cannot_absorb_the_excess_is_refused(word):
    with pytest.raises(ValueError, match=r"truncation='only_first' cannot fit this pair: the first text would have to"):
        word("今天", "今天天气很好，我们去公园散步吧", truncation="only_first", max_length=6)


@pytest.mark.parametrize("level", ["word", "char"])
def test_an_empty_second_text_is_a_pair_with_and_without_truncation(level, word, char):
    """The original encodes `("今天天气", "")` as `[CLS] 今天天气 [SEP] [SEP]`, truncated or not."""
    tokenizer = word if level == "word" else char
    alone = tokenizer("今天天气")
    expected = alone["input_ids"] + [tokenizer.sep_token_id]
    for encoded in (
        tokenizer("今天天气", ""),
        tokenizer("今天天气", "", truncation=True, max_length=16),
        {key: value[0] for key, value in tokenizer(["今天天气"], [""], truncation=True, max_length=16).items()},
    ):
        assert encoded["input_ids"] == expected
        assert encoded["token_type_ids"] == [0] * len(alone["input_ids"]) + [1]


def test_a_long_pair_truncates_as_the_original_and_builds_only_what_it_keeps(word, lines):
    """Two texts of ~57k characters cut to 512 tokens: the lengths follow the original's rule, and the `Encoding`
    holds the 512 tokens and no overflowing parts."""
    first, second = "".join(lines[:600]), "".join(lines[600:1200])
    encoded = word(first, second, truncation=True, max_length=512, return_offsets_mapping=True)
    first_ids = word(first, add_special_tokens=False)["input_ids"]
    second_ids = word(second, add_special_tokens=False)["input_ids"]
    kept_first, kept_second = original_pair_lengths(len(first_ids), len(second_ids), 509)
    cls, sep = word.cls_token_id, word.sep_token_id
    assert encoded["input_ids"] == [cls, *first_ids[:kept_first], sep, *second_ids[:kept_second], sep]
    encoding = encoded.encodings[0]
    assert encoding.ids == encoded["input_ids"] and encoding.overflowing == []
    assert encoding.offsets == [tuple(offsets) for offsets in encoded["offset_mapping"]]


def test_left_truncation_keeps_the_ends(word):
    """The original's pair lengths, cut from the end (default) or, with `truncation_side="left"`, from the start."""
    encoded = word("一二三四五六七八九十", "甲乙丙", truncation=True, max_length=9)
    assert "".join(word.convert_ids_to_tokens(encoded["input_ids"])) == "[CLS]一二三[SEP]甲乙丙[SEP]"
    word.truncation_side = "left"
    try:
        encoded = word("一二三四五六七八九十", "甲乙丙", truncation=True, max_length=9)
    finally:
        word.truncation_side = "right"
    assert "".join(word.convert_ids_to_tokens(encoded["input_ids"])) == "[CLS]八九十[SEP]甲乙丙[SEP]"


@pytest.mark.parametrize("level", ["word", "char"])
def test_a_long_text_is_its_lines(level, word, char, lines):
    """One text of 1,000 lines tokenizes as the lines one by one (the segmenter cuts at newlines), offsets shifted."""
    tokenizer = word if level == "word" else char
    text = "\n".join(lines[:1000])
    whole = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    parts = tokenizer(lines[:1000], add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets, position = [], [], 0
    for line, line_ids, line_offsets in zip(lines, parts["input_ids"], parts["offset_mapping"], strict=False):
        ids += line_ids
        offsets += [(start + position, end + position) for start, end in line_offsets]
        position += len(line) + 1
    assert whole["input_ids"] == ids
    assert [tuple(pair) for pair in whole["offset_mapping"]] == offsets


OPTIONS = [
    {},
    {"add_special_tokens": False},
    {"padding": True, "pad_to_multiple_of": 8},
    {"padding": "max_length", "max_length": 40, "truncation": True, "padding_side": "left"},
    {"truncation": "only_second", "max_length": 160, "padding": True},
    {"truncation": True, "max_length": 20, "add_special_tokens": False, "padding": True},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items()))
@pytest.mark.parametrize("pairs", [False, True], ids=["single", "pair"])
def test_the_encodings_equal_the_returned_columns(word, lines, options, pairs):
    """The lazily built `Encoding`s (what `word_ids()`, `tokens()`, `char_to_token()` read) hold exactly the
    returned model inputs, as `tokenizers` post-processing and padding make them."""
    texts = lines[:12] + ["今天[MASK]很好", "", "Hello, World! 你好。"]
    second = (lines[20:32] + ["明天", "", "好的"]) if pairs else None
    encoded = word(
        texts,
        second,
        return_special_tokens_mask=True,
        return_offsets_mapping=True,
        return_length=True,
        **options,
    )
    assert encoded.n_sequences == (2 if pairs else 1)
    for index, encoding in enumerate(encoded.encodings):
        assert encoding.ids == encoded["input_ids"][index]
        assert encoding.type_ids == encoded["token_type_ids"][index]
        assert encoding.attention_mask == encoded["attention_mask"][index]
        assert encoding.special_tokens_mask == encoded["special_tokens_mask"][index]
        assert encoding.offsets == [tuple(pair) for pair in encoded["offset_mapping"][index]]
        assert len(encoding) == encoded["length"][index]
        assert encoded.tokens(index) == word.convert_ids_to_tokens(encoded["input_ids"][index])
        masks = zip(encoded.word_ids(index), encoded["special_tokens_mask"][index], strict=True)
        assert all((word_id is None) == bool(special) for word_id, special in masks)


def test_asking_for_overflow_gives_what_the_other_path_gives_when_nothing_overflows(word, lines):
    """Calls with `return_overflowing_tokens` build `Encoding`s and let `tokenizers` truncate; without overflow they
    equal the column path."""
    texts = lines[:20] + ["今天[MASK]很好", ""]
    plain = word(texts, padding=True, return_offsets_mapping=True, truncation=True, max_length=512)
    overflow = word(
        texts,
        padding=True,
        return_offsets_mapping=True,
        truncation=True,
        max_length=512,
        return_overflowing_tokens=True,
    )
    assert overflow["overflow_to_sample_mapping"] == list(range(len(texts)))
    for key in plain:
        assert overflow[key] == plain[key], key
    strided = word(lines[6], truncation=True, max_length=16, stride=4, return_overflowing_tokens=True)
    ids = word(lines[6], add_special_tokens=False)["input_ids"]
    assert [row[1:-1] for row in strided["input_ids"][:2]] == [ids[:14], ids[10:24]]


def test_special_tokens_written_in_the_text_are_tokens_unless_split(word):
    text = "今天[MASK]很好"
    encoded = word(text, return_offsets_mapping=True)
    position = encoded["input_ids"].index(word.mask_token_id)
    assert text[slice(*encoded["offset_mapping"][position])] == "[MASK]"
    assert word.mask_token_id not in word(text, split_special_tokens=True)["input_ids"]


def test_added_tokens_are_found_as_tokenizers_finds_them(char):
    """Added tokens (normalized or not, with lstrip) split the text exactly as the `tokenizers` pipeline splits it."""
    tokenizer = HfRoFormerTokenizer(str(FIXTURES / "char_vocab.txt"))
    tokenizer.add_tokens([AddedToken("RoFormer", normalized=True), AddedToken("好天气", lstrip=True, normalized=False)])
    texts = ["ROFORMER 今天 好天气，roformer好天气", "没有添加的词", "  好天气"]
    encoded = tokenizer(texts, return_offsets_mapping=True, add_special_tokens=False)
    for index, text in enumerate(texts):
        expected = tokenizer.backend_tokenizer.encode(text, add_special_tokens=False)
        assert encoded["input_ids"][index] == expected.ids, text
        assert [tuple(pair) for pair in encoded["offset_mapping"][index]] == expected.offsets, text
    assert tokenizer.convert_tokens_to_ids("RoFormer") in encoded["input_ids"][0]


def test_char_level_equals_its_tokenizer_json_pipeline_on_random_text(char):
    """The tokenizer encodes in Python; the pipeline it saves as `tokenizer.json` is built-in `tokenizers` steps.
    Both give the same ids and offsets on 2,000 random strings of hard characters (without the spacing combining
    mark U+1D165, whose offsets differ: see the next test)."""
    alphabet = FUZZ_ALPHABET.replace("\U0001d165", "")
    rng = random.Random(1)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    encoded = char(texts, add_special_tokens=False, return_offsets_mapping=True)
    for index, expected in enumerate(char.backend_tokenizer.encode_batch(texts, add_special_tokens=False)):
        assert encoded["input_ids"][index] == expected.ids, repr(texts[index])
        assert [tuple(pair) for pair in encoded["offset_mapping"][index]] == expected.offsets, repr(texts[index])


def test_marks_reordered_by_nfd_keep_the_offsets_of_their_characters(char):
    """NFD puts U+1D165 (combining class 216) before U+0301 (230), which is then removed. The ids are the same as
    `tokenizers`' (and the original's); the offsets point at U+1D165 itself, where `tokenizers` points at the
    position it moved to."""
    text = "好\u0301\U0001d165《"
    encoded = char(text, add_special_tokens=False, return_offsets_mapping=True)
    expected = char.backend_tokenizer.encode(text, add_special_tokens=False)
    assert encoded["input_ids"] == expected.ids == char.convert_tokens_to_ids(["好", "[UNK]", "《"])
    assert encoded["offset_mapping"] == [(0, 1), (2, 3), (3, 4)]
    assert expected.offsets == [(0, 1), (1, 2), (3, 4)]


def test_pre_tokenized_words_are_encoded_one_by_one(word):
    """`is_split_into_words`: each word alone, word ids are the words' indices, offsets within each word."""
    words = ["今天天气", "Hello", "很好"]
    encoded = word(words, is_split_into_words=True, return_offsets_mapping=True)
    for index, text in enumerate(words):
        alone = word(text, add_special_tokens=False, return_offsets_mapping=True)
        positions = [position for position, word_id in enumerate(encoded.word_ids()) if word_id == index]
        assert [encoded["input_ids"][position] for position in positions] == alone["input_ids"]
        assert [tuple(encoded["offset_mapping"][position]) for position in positions] == alone["offset_mapping"]


def test_the_memos_start_again_when_full_without_changing_the_output(monkeypatch, lines):
    """The per-segment and per-character memos are bounded; filling them mid-batch changes nothing."""
    from hf_roformer.remote_code import encoding_hf_roformer, text_rules_hf_roformer

    expected = HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"))(lines[:300])["input_ids"]
    monkeypatch.setattr(encoding_hf_roformer, "MEMO_LIMIT", 50)
    monkeypatch.setattr(text_rules_hf_roformer, "MEMO_LIMIT", 50)
    tokenizer = HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"))
    assert tokenizer(lines[:300])["input_ids"] == expected
    assert len(tokenizer._original_encoder().units) <= 50 + max(
        len(set(tokenizer._original_encoder().cut(line))) for line in lines[:300]
    )
