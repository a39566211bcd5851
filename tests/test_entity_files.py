"""Named-entity files: each format read, turned into tags and written back byte for byte; every malformed file gets
one line naming the file, the line and the value."""

import json

import pytest

from hf_roformer.training.tasks.token_classification.files import CLUENER, CONLL, JSON_LINES, read_entity_file
from hf_roformer.training.tasks.token_classification.tags import (
    BIOES,
    IOB2,
    Span,
    TagError,
    spans_to_tags,
    tags_to_spans,
)
from hf_roformer.utils.errors import DataError


CONLL_IOB2 = "张 B-PER\n三 I-PER\n在 O\n北 B-LOC\n京 I-LOC\n\n新 B-ORG\n华 I-ORG\n社 I-ORG\n"
CONLL_BIOES = (
    "-DOCSTART- -X- O\n\nEU\tNNP\tS-ORG\nrejects\tVBZ\tO\nGerman\tJJ\tS-MISC\n\n"
    "Peter\tNNP\tB-PER\nBlackburn\tNNP\tE-PER\n"
)
RUN_NER = [
    {"id": "0", "tokens": ["李", "四", "去", "上", "海"], "ner_tags": ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"]},
    {"id": "1", "tokens": ["今", "天"], "ner_tags": ["O", "O"]},
]
CLUENER_RECORDS = [
    {
        "text": "浙商银行企业信贷部叶老桂博士",
        "label": {"name": {"叶老桂": [[9, 11]]}, "company": {"浙商银行": [[0, 3]]}},
    },
    {"text": "生生不息CSOL生化狂潮", "label": {"game": {"CSOL": [[4, 7]]}}},
]


def json_lines(records) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


@pytest.mark.parametrize(
    ("name", "content", "format_", "scheme"),
    [
        ("people.txt", CONLL_IOB2, CONLL, IOB2),
        ("conll03.conll", CONLL_BIOES, CONLL, BIOES),
        ("train.json", json_lines(RUN_NER), JSON_LINES, IOB2),
        ("cluener.json", json_lines(CLUENER_RECORDS), CLUENER, None),
    ],
)
def test_each_format_is_read_and_written_back_identical(tmp_path, name, content, format_, scheme):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    read = read_entity_file(path)
    assert (read.format, read.scheme, read.labelled) == (format_, scheme, True)
    for sentence in read.sentences:  # through tags and back
        tags = spans_to_tags(sentence.spans, len(sentence.tokens), scheme or IOB2)
        assert tags_to_spans(tags, scheme or IOB2) == sorted(sentence.spans)
    read.write(tmp_path / "out", [sentence.spans for sentence in read.sentences])
    assert (tmp_path / "out").read_text(encoding="utf-8") == content


def test_the_format_comes_from_the_structure_not_the_name(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text(json_lines(CLUENER_RECORDS), encoding="utf-8")
    read = read_entity_file(path)
    assert read.format == CLUENER
    first = read.sentences[0]
    assert [first.text[start:end] for start, end, _ in first.character_spans()] == ["叶老桂", "浙商银行"]


def test_words_join_into_text_with_spaces_only_between_non_cjk_tokens(tmp_path):
    path = tmp_path / "words.conll"
    path.write_text("在 O\n New B-LOC\nYork I-LOC\n工作 O\n", encoding="utf-8")
    sentence = read_entity_file(path).sentences[0]
    assert sentence.text == "在New York工作"
    assert [sentence.text[s:e] for s, e, _ in sentence.character_spans()] == ["New York"]


def test_predictions_of_the_first_sentences_are_written_in_the_input_format(tmp_path):
    path = tmp_path / "people.txt"
    path.write_text(CONLL_IOB2, encoding="utf-8")
    read = read_entity_file(path)
    read.write(tmp_path / "out.txt", [[Span(3, 5, "LOC")]])
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "张 O\n三 O\n在 O\n北 B-LOC\n京 I-LOC\n"
    cluener = tmp_path / "c.json"
    cluener.write_text(json_lines([{"id": 3, "text": "去上海"}]), encoding="utf-8")
    read = read_entity_file(cluener)
    assert not read.labelled
    read.write(tmp_path / "out.json", [[Span(1, 3, "address")]])
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8")) == {
        "id": 3, "text": "去上海", "label": {"address": {"上海": [[1, 2]]}}
    }  # fmt: skip


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("a.txt", "张 B-PER\n三 I-LOC\n", "a.txt:2: the tag 'I-LOC' continues no LOC entity (IOB2)"),
        ("a.txt", "张 O\n三 I-PER\n", "a.txt:2: the tag 'I-PER' continues no PER entity (IOB2)"),
        ("a.txt", "张 B-PER\n三 PER\n",
         "a.txt:2: the tag 'PER' is neither O nor B-/I-/E-/S- followed by a type (IOB2)"),
        ("a.txt", "张 B-PER\n三 E-PER\n\n李 S-PER\n四 B-PER\n",
         "a.txt:5: the tag 'B-PER' opens a PER entity that never ends (E-) (BIOES)"),
        ("a.txt", "张 S-PER\n\n李 B-PER\n四 O\n",
         "a.txt:4: the tag 'O' comes before the open PER entity ends (E-) (BIOES)"),
        ("a.txt", "张 B-PER\n三\n", "a.txt:2: '三' has 1 column(s) where lines above differ"),
        ("a.json", '{"tokens": ["张", "三"], "ner_tags": ["B-PER"]}\n', "a.json:1: 2 tokens but 1 tags"),
        ("a.json", '{"tokens": ["张"], "ner_tags": [1]}\n',
         "a.json:1: 'ner_tags' must be a non-empty list of strings, found [1]"),
        ("a.json", '{"tokens": ["张"], "tags": ["O"]}\n{"tokens": ["张"]}\n',
         "a.json:2: no key 'tags' (keys: 'tokens')"),
        ("a.json", '{"text": "上海", "label": {"LOC": {"上海": [[0, 2]]}}}\n',
         "a.json:1: LOC '上海': [0, 2] is outside the text (2 characters, end inclusive)"),
        ("a.json", '{"text": "去上海", "label": {"LOC": {"上海": [[0, 1]]}}}\n',
         "a.json:1: LOC '上海': [0, 1] holds '去上'"),
        ("a.json", '{"text": "上海市", "label": {"LOC": {"上海": [[0, 1]], "上海市": [[0, 2]]}}}\n',
         "a.json:1: the entities '上海' and '上海市' overlap, which tags cannot hold (--head global_pointer reads "
         "nested entities)"),
        ("a.json", '{"text": "上海"}\n{"text": "上海", "label": {"LOC": {"上海": [[0, 1]]}}}\n',
         "a.json:1: no 'label' where records above have one"),
        ("a.json", '{"text": "上海"}\n{"text": \n', "a.json:2: not valid JSON (Expecting value): '{\"text\":'"),
        ("a.txt", "\n\n", "a.txt: empty file (no sentences)"),
    ],
)  # fmt: skip
def test_every_malformed_file_gets_one_line_naming_file_line_and_value(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as error:
        read_entity_file(path, tag_column="tags" if 'tags"' in content and "ner_tags" not in content else None)
    assert str(error.value) == f"{tmp_path}/{message}"


def test_nested_spans_are_read_when_the_head_holds_them(tmp_path):
    path = tmp_path / "nested.json"
    path.write_text(json_lines([{"text": "上海市", "label": {"LOC": {"上海": [[0, 1]], "上海市": [[0, 2]]}}}]), "utf-8")
    assert read_entity_file(path, overlaps=True).sentences[0].spans == [Span(0, 2, "LOC"), Span(0, 3, "LOC")]


def test_bioes_tags_convert_exactly():
    tags = ["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "B-ORG", "E-ORG"]
    spans = tags_to_spans(tags, BIOES)
    assert spans == [Span(0, 1, "PER"), Span(2, 5, "LOC"), Span(5, 7, "ORG")]
    assert spans_to_tags(spans, 7, BIOES) == tags
    with pytest.raises(TagError, match="BIOES, in an IOB2 sequence"):
        tags_to_spans(tags, IOB2)
