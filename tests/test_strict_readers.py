"""Every data file is read exactly as written or refused with one line naming the file, the line (or JSON path) and
the value: the cases fuzzing users' own files found (crashes, silent changes, valid files refused), each read by its
task's own reader, and a seeded fuzz test per format asserting only clean refusals or exact reads."""

import json
import random
from pathlib import Path

import pytest

from hf_roformer.training.run.fine_tuning_task import SampleLimits
from hf_roformer.training.tasks.cail.files import read_cail_split
from hf_roformer.training.tasks.glue.files import GLUE_TASKS, read_glue
from hf_roformer.training.tasks.multiple_choice.files import read_multiple_choice_file
from hf_roformer.training.tasks.question_answering.files import read_question_answering_file
from hf_roformer.training.tasks.question_answering.task import QuestionFiles, question_answering_task_data
from hf_roformer.training.tasks.sentence_embedding.files import read_sentence_pairs
from hf_roformer.training.tasks.text_classification.files import read_text_classification
from hf_roformer.training.tasks.token_classification.alignment import tokenized
from hf_roformer.training.tasks.token_classification.files import read_entity_file
from hf_roformer.training.tasks.token_classification.task import check_every_entity_has_a_token, paragraphs_of
from hf_roformer.utils.errors import DataError


def write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def refusal(read, *args) -> str:
    """The one-line message `read(*args)` refuses with."""
    with pytest.raises(DataError) as refused:
        read(*args)
    message = str(refused.value)
    assert "\n" not in message, message
    return message


def classification(path: Path):
    """The training examples and labels of a text-classification file, as the fine-tuning run reads them."""
    examples, labels, _ = read_text_classification({"train": path})
    return examples["train"].to_dict(), labels


def swag(path: Path):
    return read_multiple_choice_file(path, need_labels=True).to_dict()


def questions(path: Path, with_negative: bool = False):
    return read_question_answering_file(path, with_negative, need_answers=True).to_dict()


def pairs(path: Path):
    return read_sentence_pairs(path).to_dict()


def entities(path: Path):
    read = read_entity_file(path)
    return [(sentence.tokens, sentence.spans) for sentence in read.sentences], read.format


# -- crashes: each now one line


def test_a_json_file_holding_null_is_refused_before_any_third_party_reader(tmp_path):
    path = write(tmp_path / "T.json", "null\n")
    assert (
        refusal(classification, path) == f"{path}:1: expected a JSON array of objects or one object a line, found null"
    )


def test_an_empty_sentence_pair_file_is_refused(tmp_path):
    path = write(tmp_path / "pairs.tsv", "")
    assert refusal(read_sentence_pairs, path) == f"{path}: no sentence pairs"


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_cr_only_line_endings_read_as_lf(suffix, tmp_path):
    separator = "," if suffix == ".csv" else "\t"
    lines = [f"text{separator}label", f"好{separator}正面", f"坏{separator}负面"]
    expected = classification(write(tmp_path / f"lf{suffix}", "\n".join(lines) + "\n"))
    assert classification(write(tmp_path / f"cr{suffix}", "\r".join(lines) + "\r")) == expected
    assert expected[0]["text_a"] == ["好", "坏"]


def test_an_infinite_swag_label_is_refused(tmp_path):
    record = '{"sent1": "他", "sent2": "走", "ending0": "了", "ending1": "开", "label": Infinity}\n'
    path = write(tmp_path / "swag.jsonl", record)
    assert refusal(swag, path) == f"{path}:1: label is Infinity, not a finite number"


def test_pretty_printed_json_lines_are_read_as_their_records(tmp_path):
    records = [{"text": "好吃", "label": "正面"}, {"text": "难吃", "label": "负面"}]
    compact = write(tmp_path / "compact.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    pretty = write(
        tmp_path / "pretty.jsonl", "".join(json.dumps(r, ensure_ascii=False, indent=2) + "\n" for r in records)
    )
    assert classification(pretty) == classification(compact)
    with_lines = write(tmp_path / "bad.jsonl", json.dumps(records[0], indent=2) + "\n" + '{\n  "text": 1,\n}\n')
    assert refusal(classification, with_lines).startswith(f"{with_lines}:7: not valid JSON")


def test_question_answering_with_negatives_needs_an_answerable_training_question(tmp_path):
    record = {
        "id": "q1",
        "context": "北京是首都。",
        "question": "上海在哪？",
        "answers": {"text": [], "answer_start": []},
    }
    train = write(tmp_path / "train.jsonl", json.dumps(record, ensure_ascii=False) + "\n")
    files = QuestionFiles(str(train), str(train), "zh", version_2_with_negative=True)
    assert refusal(question_answering_task_data, files, SampleLimits()) == (
        f"{train}: none of the 1 questions trained on has an answer; the training loss needs answerable questions "
        "(unanswerable ones are learned beside them)"
    )


# -- data that was trained on differently from the file: now refused


def test_a_row_with_a_field_more_than_the_header_is_refused(tmp_path):
    path = write(tmp_path / "train.csv", "text,label\n这家,餐厅很好吃,正面\n很差,负面\n")
    assert refusal(classification, path) == f"{path}:2: expected 2 fields, found 3"


def test_the_header_repeated_as_a_record_is_refused(tmp_path):
    path = write(tmp_path / "train.csv", "text,label\n好,正面\ntext,label\n坏,负面\n")
    assert refusal(classification, path) == f"{path}:3: the header repeated as a record"


def test_scores_with_underscores_are_refused_everywhere(tmp_path):
    own = write(tmp_path / "train.csv", "text,label\n好,1.5\n坏,1_0\n")
    assert refusal(classification, own).startswith(f"{own}:3: the label '1_0' is not a number")
    pairs = write(tmp_path / "sts.tsv", "sentence1\tsentence2\tscore\n一\t二\t4_2\n")
    assert refusal(read_sentence_pairs, pairs) == f"{pairs}:2: the label '4_2' is not a number"
    glue = tmp_path / "glue" / "STS-B"
    glue.mkdir(parents=True)
    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
    write(glue / "train.tsv", header + "0\tg\tf\t2012\t0\ts\ts\ta\tb\t4_2\n")
    write(glue / "dev.tsv", header + "0\tg\tf\t2012\t0\ts\ts\ta\tb\t4.2\n")
    assert refusal(read_glue, GLUE_TASKS["stsb"], tmp_path / "glue").endswith(":2: the score '4_2' is not a number")


@pytest.mark.parametrize(("label", "shown"), [("1.5", "1.5"), ("true", "true"), ('"1.0"', "'1.0'")])
def test_a_swag_label_is_an_integer_written_as_one(label, shown, tmp_path):
    path = write(
        tmp_path / "swag.jsonl", f'{{"sent1": "a", "sent2": "b", "ending0": "c", "ending1": "d", "label": {label}}}\n'
    )
    assert refusal(swag, path) == f"{path}:1: the label {shown} is not an integer"


def test_swag_endings_are_numbered_without_a_gap(tmp_path):
    path = write(tmp_path / "swag.csv", "sent1,sent2,ending0,ending1,ending3,label\na,b,c,d,e,0\n")
    assert refusal(swag, path) == f"{path}:2: the endings skip ending2 (they are numbered from ending0 without a gap)"


@pytest.mark.parametrize("paragraph", [{"context": "文"}, {"context": "文", "qa": []}, {"context": "文", "qas": None}])
def test_a_squad_paragraph_without_its_qas_list_is_refused(paragraph, tmp_path):
    path = write(tmp_path / "squad.json", json.dumps({"data": [{"paragraphs": [paragraph]}]}))
    keys = ", ".join(sorted(map(repr, paragraph)))
    assert (
        refusal(questions, path) == f"{path}: data[0].paragraphs[0] has no `qas` list of questions (its keys: {keys})"
    )


def test_an_impossible_squad_question_with_answers_is_refused(tmp_path):
    question = {"id": "q", "question": "谁？", "is_impossible": True, "answers": [{"text": "文", "answer_start": 0}]}
    path = write(
        tmp_path / "squad.json", json.dumps({"data": [{"paragraphs": [{"context": "文", "qas": [question]}]}]})
    )
    assert refusal(questions, path, True) == (
        f"{path}: question 'q' (data[0].paragraphs[0].qas[0]): marked is_impossible but has answers"
    )


def test_an_entity_the_tokenizer_cannot_carry_is_refused(tmp_path):
    from hf_roformer import HfRoFormerTokenizer

    tokenizer = HfRoFormerTokenizer(str(Path(__file__).parent / "fixtures" / "char_vocab.txt"))
    path = write(tmp_path / "train.txt", "张 B-PER\n三 I-PER\n\u3000 B-LOC\n说 O\n")
    read = read_entity_file(path)
    data = paragraphs_of(read, read.entity_types())
    paragraphs = [
        tokenized(tokenizer, text, [tuple(unit) for unit in units])
        for text, units in zip(data["text"], data["units"], strict=True)
    ]
    assert refusal(check_every_entity_has_a_token, data, paragraphs, read.entity_types()) == (
        f"{path}:1: the LOC entity {chr(0x3000)!r} is made of characters the tokenizer drops, so no token can carry "
        "it; remove it or its tag"
    )


def test_a_conll_line_with_a_column_more_is_refused(tmp_path):
    path = write(tmp_path / "train.txt", "张 B-PER\n三 X I-PER\n说 O\n")
    assert refusal(read_entity_file, path) == f"{path}:2: '三 X I-PER' has 3 column(s) where lines above differ"


@pytest.mark.parametrize(
    ("text", "column"), [("text,label\n好,正面\n,负面\n", "text"), ("text,label\n好,正面\n  ,负面\n", "text")]
)
def test_empty_texts_are_refused_as_the_other_readers_refuse_them(text, column, tmp_path):
    path = write(tmp_path / "train.csv", text)
    assert refusal(classification, path) == f"{path}:3: column {column!r} is empty (every example needs its text)"


# -- valid files that were refused: now read exactly


def test_a_conll_file_whose_first_token_is_a_brace_is_conll(tmp_path):
    path = write(tmp_path / "train.txt", "{ O\n张 B-PER\n} O\n")
    assert entities(path) == ([(["{", "张", "}"], [(1, 2, "PER")])], "CoNLL columns")


def test_an_ideographic_space_is_a_conll_token(tmp_path):
    path = write(tmp_path / "train.txt", "张 B-PER\n\u3000 O\n三 B-PER\n")
    assert entities(path) == ([(["张", "\u3000", "三"], [(0, 1, "PER"), (2, 3, "PER")])], "CoNLL columns")


def test_question_answering_json_lines_of_one_record(tmp_path):
    record = {
        "id": "q1",
        "context": "北京是首都。",
        "question": "首都是？",
        "answers": {"text": ["北京"], "answer_start": [0]},
    }
    path = write(tmp_path / "train.jsonl", json.dumps(record, ensure_ascii=False) + "\n")
    assert questions(path)["id"] == ["q1"] and questions(path)["answers"] == [record["answers"]]


def test_a_truncated_json_document_is_named_where_it_breaks(tmp_path):
    document = {
        "data": [{"paragraphs": [{"context": "北京", "qas": [{"id": str(i), "question": "?"} for i in range(5)]}]}]
    }
    text = json.dumps(document, ensure_ascii=False, indent=1)
    path = write(tmp_path / "squad.json", text[: text.index('"3"')])
    cut_on = text[: text.index('"3"')].count("\n") + 1  # the line the file now ends on
    assert refusal(questions, path).startswith(f"{path}:{cut_on}: not valid JSON")


# -- fuzzing: a valid seed per format, mutated; every read is exact or one clean line naming the file


SEEDS = {
    "conll.txt": ("张 B-PER\n三 I-PER\n在 O\n北 B-LOC\n京 I-LOC\n\n他 O\n好 O\n", entities),
    "run_ner.jsonl": (
        '{"tokens": ["张", "三", "在"], "ner_tags": ["B-PER", "I-PER", "O"]}\n{"tokens": ["他"], "ner_tags": ["O"]}\n',
        entities,
    ),
    "cluener.json": (
        '{"text": "张三在北京", "label": {"name": {"张三": [[0, 1]]}, "address": {"北京": [[3, 4]]}}}\n',
        entities,
    ),
    "squad.json": (
        json.dumps(
            {
                "data": [
                    {
                        "title": "t",
                        "paragraphs": [
                            {
                                "context": "北京是首都。",
                                "qas": [
                                    {"id": "q1", "question": "首都？", "answers": [{"text": "北京", "answer_start": 0}]}
                                ],
                            }
                        ],
                    }
                ]
            },
            ensure_ascii=False,
        ),
        questions,
    ),  # fmt: skip
    "flat_qa.json": (
        json.dumps(
            {
                "data": [
                    {
                        "id": "q1",
                        "context": "北京是首都。",
                        "question": "首都？",
                        "answers": {"text": ["北京"], "answer_start": [0]},
                    }
                ]
            },
            ensure_ascii=False,
        ),
        questions,
    ),  # fmt: skip
    "qa.jsonl": (
        '{"id": "q1", "context": "北京是首都。", "question": "首都？",\n'
        ' "answers": {"text": ["北京"], "answer_start": [0]}}\n'
        '{"id": "q2", "context": "上海很大。", "question": "大？",\n'
        ' "answers": {"text": ["上海"], "answer_start": [0]}}\n',
        questions,
    ),
    "c3.json": (
        json.dumps(
            [[["男：你好。"], [{"question": "他说什么？", "choice": ["你好", "再见"], "answer": "你好"}], "d1"]],
            ensure_ascii=False,
        ),
        swag,
    ),  # fmt: skip
    "swag.csv": ("sent1,sent2,ending0,ending1,label\n他,走,了,开,0\n她,来,过,去,1\n", swag),
    "swag.jsonl": ('{"sent1": "他", "sent2": "走", "ending0": "了", "ending1": "开", "label": 1}\n', swag),
    "pairs.tsv": ("今天好\t今天不错\t1\n下雨了\t天晴了\t0\n", pairs),
    "stsb.tsv": ("sentence1\tsentence2\tscore\n一个人\t一个男人\t4.2\n猫\t狗\t0.5\n", pairs),
    "pairs.jsonl": ('{"sentence1": "今天好", "sentence2": "不错", "label": "1"}\n', pairs),
    "text.csv": ('text,label\n好吃,正面\n"难吃,贵",负面\n', classification),
    "text.tsv": ("text\tlabel\n好吃\t正面\n难吃\t负面\n", classification),
    "text.jsonl": ('{"text": "好吃", "label": 1}\n{"text": "难吃", "label": 0}\n', classification),
    "text.json": ('[{"text": "好吃", "label": 2.5}, {"text": "难吃", "label": 0.5}]\n', classification),
    "cail.jsonl": ('{"A": "甲", "B": "乙", "C": "丙", "label": "B"}\n', read_cail_split),
}
INSERTED = ["{", "}", '"', ",", "\t", "\n", "\r", "\ufeff", "\x00", " ", "\u3000", "\u2028", "1", "-", "[", ":"]
VALUES = ["Infinity", "NaN", "1_0", "true", "1.5", "null", "-1", "1e999", '""', "[]", "{}"]


def mutated(text: str, rng: random.Random) -> bytes:
    """`text` with one change: a character inserted, deleted or replaced, a line dropped, repeated or moved, the file
    cut short, a value swapped for another JSON or CSV value, or bytes that are not UTF-8."""
    kind = rng.randrange(8)
    position = rng.randrange(len(text) + 1)
    lines = text.split("\n")
    if kind == 0:
        text = text[:position] + rng.choice(INSERTED) + text[position:]
    elif kind == 1:
        text = text[:position] + text[position + 1 :]
    elif kind == 2:
        text = text[:position]
    elif kind == 3:
        index = rng.randrange(len(lines))
        text = "\n".join(lines[:index] + [lines[index]] * rng.randint(0, 2) + lines[index + 1 :])
    elif kind == 4:
        rng.shuffle(lines)
        text = "\n".join(lines)
    elif kind == 5:
        numbers = [index for index, character in enumerate(text) if character.isdigit()]
        if numbers:
            index = rng.choice(numbers)
            text = text[:index] + rng.choice(VALUES) + text[index + 1 :]
    elif kind == 6:
        return text.encode("utf-8")[:position] + bytes([rng.choice([0x80, 0xC3, 0xFF])]) + text.encode()[position:]
    else:
        text = text[:position] + rng.choice(["\t", ",", " "]) * rng.randint(1, 3) + text[position:]
    return text.encode("utf-8")


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_fuzzed_files_are_read_exactly_or_refused_with_one_line(name, tmp_path):
    seed, read = SEEDS[name]
    expected = read(write(tmp_path / name, seed))
    for ending in ("\r\n", "\r"):  # the same file with other line endings, and with a byte-order mark: the same read
        assert read(write(tmp_path / name, seed.replace("\n", ending))) == expected, ending
    assert read(write(tmp_path / name, "\ufeff" + seed)) == expected
    rng = random.Random(name)
    refused = 0
    for _ in range(60):
        path = tmp_path / name
        path.write_bytes(mutated(seed, rng))
        try:
            read(path)
        except DataError as error:
            message = str(error)
            assert message.startswith(str(path)) and "\n" not in message, message
            refused += 1
    assert refused > 0  # the mutations reach the checks
