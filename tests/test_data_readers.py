"""Fine-tuning data readers accept what their formats allow and reject what they don't, naming the file and line:
GLUE TSV, CAIL2019-SCM JSON lines, and one's own CSV/TSV/JSON/JSON-lines files."""

import json
import re
from pathlib import Path

import pytest

from hf_roformer.training.tasks.cail.files import read_cail_split
from hf_roformer.training.tasks.glue.files import GLUE_TASKS, read_glue
from hf_roformer.training.tasks.text_classification.files import read_text_classification
from hf_roformer.utils.errors import DataError


MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"


def write_mrpc(root: Path, train_text: str | None = None, test: bool = True) -> Path:
    """A tiny MRPC directory: train.tsv (given as text, or 4 rows), dev.tsv, and test.tsv unless `test` is False."""
    directory = root / "MRPC"
    directory.mkdir(parents=True)
    rows = "".join(f"{i % 2}\t{i}\t{i + 100}\tthe cat sat {i}\ta cat sat {i}\n" for i in range(4))
    (directory / "train.tsv").write_bytes((train_text or MRPC_HEADER + "\n" + rows).encode())
    (directory / "dev.tsv").write_text(MRPC_HEADER + "\n" + rows)
    if test:
        header = "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        (directory / "test.tsv").write_text(header + "".join(f"{i}\t1\t2\tx {i}\ty {i}\n" for i in range(3)))
    return root


def train_texts(splits) -> list[str]:
    return splits["train"]["text_a"]


def test_glue_tsv_with_a_byte_order_mark_is_read(tmp_path):
    lines = [MRPC_HEADER, "1\t1\t2\tgood\tfine", "0\t3\t4\tbad\tworse"]
    data = write_mrpc(tmp_path, "\ufeff" + "\n".join(lines) + "\n")
    splits = read_glue(GLUE_TASKS["mrpc"], data)
    assert train_texts(splits) == ["good", "bad"] and splits["train"]["label"] == [1, 0]


def test_glue_tsv_with_crlf_line_ends_is_read(tmp_path):
    lines = [MRPC_HEADER, "1\t1\t2\tgood\tfine", "0\t3\t4\tbad\tworse"]
    splits = read_glue(GLUE_TASKS["mrpc"], write_mrpc(tmp_path, "\r\n".join(lines) + "\r\n"))
    assert splits["train"]["text_b"] == ["fine", "worse"] and splits["train"]["label"] == [1, 0]


def test_glue_tsv_with_trailing_blank_lines_is_read(tmp_path):
    lines = [MRPC_HEADER, "1\t1\t2\tgood\tfine", "0\t3\t4\tbad\tworse"]
    splits = read_glue(GLUE_TASKS["mrpc"], write_mrpc(tmp_path, "\n".join(lines) + "\n\n\n"))
    assert train_texts(splits) == ["good", "bad"]


def test_glue_test_split_is_optional(tmp_path):
    splits = read_glue(GLUE_TASKS["mrpc"], write_mrpc(tmp_path, test=False))
    assert sorted(splits) == ["train", "validation"]


def test_glue_row_numbers_count_blank_lines(tmp_path):
    lines = [MRPC_HEADER, "1\t1\t2\tgood\tfine", "", "2\t3\t4\tbad\tworse"]
    with pytest.raises(DataError, match=r"MRPC/train.tsv:4: unknown label '2'"):
        read_glue(GLUE_TASKS["mrpc"], write_mrpc(tmp_path, "\n".join(lines) + "\n"))


STSB_HEADER = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"


def write_stsb(root: Path, scores: list[str]) -> Path:
    directory = root / "STS-B"
    directory.mkdir(parents=True)
    rows = [f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\ta man {i}\ta woman {i}\t{score}" for i, score in enumerate(scores)]
    (directory / "train.tsv").write_text("\n".join([STSB_HEADER, *rows]) + "\n")
    (directory / "dev.tsv").write_text("\n".join([STSB_HEADER, *rows[:1]]) + "\n")
    return root


@pytest.mark.parametrize(
    ("score", "reason"),
    [
        ("nan", "is not a number"),
        ("inf", "is not a number"),
        ("1e999", "is not a finite number"),
        ("-3", r"is outside \[0, 5\]"),
        ("50", r"is outside \[0, 5\]"),
        ("4_2", "is not a number"),
        ("", "is not a number"),
    ],
)
def test_bad_stsb_score_is_refused_with_its_line(score, reason, tmp_path):
    data = write_stsb(tmp_path, ["3.8", "0", score])
    with pytest.raises(DataError, match=rf"STS-B/train.tsv:4: the score '{re.escape(score)}' {reason}"):
        read_glue(GLUE_TASKS["stsb"], data)


def test_stsb_scores_at_the_ends_of_the_range_are_read(tmp_path):
    splits = read_glue(GLUE_TASKS["stsb"], write_stsb(tmp_path, ["0", "5.000", "2.5e0", " 4.2"]))
    assert splits["train"]["label"] == [0.0, 5.0, 2.5, 4.2]


def write_jsonl(path: Path, records: list[dict], newline: str = "\n", prefix: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = prefix + newline.join(json.dumps(record, ensure_ascii=False) for record in records) + newline
    path.write_bytes(text.encode())
    return path


TRIPLET = {"A": "原告诉称", "B": "被告辩称", "C": "法院认为", "label": "B"}


def test_cail_with_bom_crlf_and_trailing_blank_lines_is_read(tmp_path):
    path = write_jsonl(tmp_path / "train.json", [TRIPLET, {**TRIPLET, "label": "C"}], "\r\n", prefix="\ufeff")
    path.write_bytes(path.read_bytes() + b"\r\n\r\n")
    assert [record["label"] for record in read_cail_split(path)] == ["B", "C"]


@pytest.mark.parametrize("separator", ["\u2028", "\u0085", "\u2029", "\x1c", "\x0b", "\x0c"])
def test_cail_strings_may_hold_characters_that_splitlines_breaks_at(separator, tmp_path):
    record = {**TRIPLET, "A": f"第一段{separator}第二段"}
    path = write_jsonl(tmp_path / "train.json", [record, TRIPLET])
    triplets = read_cail_split(path)
    assert len(triplets) == 2 and triplets[0]["A"] == f"第一段{separator}第二段"


def test_cail_bad_line_is_named_after_blank_lines(tmp_path):
    path = tmp_path / "valid.json"
    path.write_text(json.dumps(TRIPLET) + "\n\n" + '{"A": "a"}\n')
    with pytest.raises(DataError, match=r"valid.json:3: missing key\(s\) \['B', 'C', 'label'\]"):
        read_cail_split(path)


# One's own files: CSV, TSV, JSON lines, JSON arrays.


def read_own(tmp_path: Path, train: str, validation: str | None = None, suffix: str = ".csv", **options):
    (tmp_path / f"train{suffix}").write_bytes(train.encode())
    (tmp_path / f"dev{suffix}").write_bytes((validation or train).encode())
    files = {"train": tmp_path / f"train{suffix}", "validation": tmp_path / f"dev{suffix}"}
    return read_text_classification(files, **options)


def test_csv_with_bom_crlf_quotes_and_trailing_blank_lines_is_read(tmp_path):
    train = '\ufeffsentence,label\r\n"好, 很好",正面\r\n差评,负面\r\nNA,正面\r\n\r\n\r\n'
    splits, labels, columns = read_own(tmp_path, train)
    assert columns == ["sentence"] and labels.names == ("正面", "负面")
    assert splits["train"]["text_a"] == ["好, 很好", "差评", "NA"]  # "NA" is a text, not a missing value
    assert splits["train"]["label"] == [0, 1, 0]


def test_tsv_keeps_quote_characters_in_texts(tmp_path):
    splits, labels, _ = read_own(tmp_path, 'text\tlabel\n他说"好"\t1\n差\t0\n', suffix=".tsv")
    assert splits["train"]["text_a"] == ['他说"好"', "差"] and labels.names == ("0", "1")


def test_sentence_pairs_and_numeric_classes(tmp_path):
    train = "sentence1,sentence2,label\n今天,明天,10\n好,坏,2\n一,二,-1\n"
    splits, labels, columns = read_own(tmp_path, train)
    assert columns == ["sentence1", "sentence2"] and labels.names == ("-1", "2", "10")  # numeric order
    assert splits["train"]["label"] == [2, 1, 0] and splits["train"]["text_b"] == ["明天", "坏", "二"]


def test_fractional_labels_make_a_regression(tmp_path):
    splits, labels, _ = read_own(tmp_path, "text,label\n好,4.5\n坏,0\n一般,2.25\n")
    assert labels.is_regression and splits["train"]["label"] == [4.5, 0.0, 2.25]


@pytest.mark.parametrize(
    ("train", "suffix", "shown"),
    [
        ("text,label\n好,1.0\n坏,0.0\n一般,1.0\n", ".csv", "train.csv:2: the labels (0.0, 1.0)"),
        (
            '{"text": "好", "label": 1.0}\n{"text": "坏", "label": 0.0}\n',
            ".jsonl",
            "train.jsonl:1: the labels (0.0, 1.0)",
        ),
    ],
)
def test_whole_floats_are_refused_naming_both_choices(train, suffix, shown, tmp_path):
    """0.0/1.0 could be two classes or scores: no guess; the message names both settings."""
    with pytest.raises(DataError) as error:
        read_own(tmp_path, train, suffix=suffix)
    assert str(error.value) == (
        f"{tmp_path}/{shown} are whole numbers written as floats: classes or scores? Pass --do_regression false for "
        "classes or --do_regression true for a score (regression)"
    )


def test_the_flag_decides_what_whole_floats_are(tmp_path):
    splits, labels, _ = read_own(tmp_path, "text,label\n好,10.0\n坏,2.0\n一般,10.0\n", regression=False)
    assert labels.names == ("2.0", "10.0") and splits["train"]["label"] == [1, 0, 1]  # numeric order
    splits, labels, _ = read_own(tmp_path, "text,label\n好,10.0\n坏,2.0\n一般,10.0\n", regression=True)
    assert labels.is_regression and splits["train"]["label"] == [10.0, 2.0, 10.0]


def test_all_column_problems_of_every_file_in_one_message(tmp_path):
    """A renamed text column and label column, in the training file and the validation file: one message."""
    with pytest.raises(DataError) as error:
        read_own(tmp_path, "review,y\n好,1\n坏,0\n", "sentence,label\n好,1\n坏,0\n", text_columns=["review"])
    assert str(error.value) == (
        f"{tmp_path}/train.csv: no label column 'label' (--label_column_name); the columns are ['review', 'y']; "
        f"{tmp_path}/dev.csv: no column(s) ['review'] (--text_column_names); the columns are ['sentence', 'label']"
    )
    with pytest.raises(DataError) as error:
        read_own(tmp_path, "review,y\n好,1\n坏,0\n")
    assert str(error.value) == (
        f"{tmp_path}/train.csv: no text column found (looked for sentence1 + sentence2, sentence, text; name them with "
        "--text_column_names); no label column 'label' (--label_column_name); the columns are ['review', 'y']; "
        f"{tmp_path}/dev.csv: no text column found (looked for sentence1 + sentence2, sentence, text; name them with "
        "--text_column_names); no label column 'label' (--label_column_name); the columns are ['review', 'y']"
    )


def test_json_lines_split_on_newline_only(tmp_path):
    records = [{"text": "甲\u2028乙", "label": "a"}, {"text": "丙\u0085丁", "label": "b"}]
    text = "\ufeff" + "\r\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\r\n\n"
    splits, labels, _ = read_own(tmp_path, text, suffix=".jsonl")
    assert splits["train"]["text_a"] == ["甲\u2028乙", "丙\u0085丁"] and labels.names == ("a", "b")


def test_json_array_of_records_is_read(tmp_path):
    text = json.dumps([{"text": "好", "label": 0.5}, {"text": "坏", "label": 1}], ensure_ascii=False)
    splits, labels, _ = read_own(tmp_path, text, suffix=".json")
    assert labels.is_regression and splits["train"]["label"] == [0.5, 1.0]


@pytest.mark.parametrize(
    ("train", "suffix", "message"),
    [
        ("text,label\n好,1\n坏,0,多余\n", ".csv", r"train.csv:3: expected 2 fields, found 3"),
        ('text,label\n"多\n行",1\n好,1\n坏,\n', ".csv", r"train.csv:5: column 'label' is empty"),
        ("text,label\n好,1.5\n坏,4_2\n", ".csv", r"train.csv:3: the label '4_2' is not a number"),
        ("text,label\n好,1.5\n坏,nan\n", ".csv", r"train.csv:3: the label 'nan' is not a number"),
        ("text,label\n好,1.5\n坏,1e999\n", ".csv", r"train.csv:3: the score '1e999' is not a finite number"),
        ("review,label\n好,1\n", ".csv", r"train.csv: no text column found .* \['review', 'label'\]"),
        ("text,y\n好,1\n坏,0\n", ".csv", r"train.csv: no label column 'label'"),
        ("text,label\n", ".csv", r"train.csv: no examples"),
        ('{"text": "好", "label": 1}\n\n{"text": "坏", "label": 0\n', ".jsonl", r"train.jsonl:3: not valid JSON"),
        ('{"text": "好", "label": 1}\n{"text": null, "label": 0}\n', ".jsonl", r"train.jsonl:2: column 'text' holds"),
        ('[{"text": "好", "label": 1},\n {"text": 3, "label": 0}]', ".json", r"train.json:2: column 'text' holds 3"),
        ("text,label\n好,1\n坏,1\n", ".csv", r"train.csv: every example has the label '1'"),
    ],
)
def test_bad_own_files_are_refused_with_file_and_line(train, suffix, message, tmp_path):
    with pytest.raises(DataError, match=message):
        read_own(tmp_path, train, "text,label\n好,1\n坏,0\n" if suffix == ".csv" else None, suffix=suffix)


def test_validation_label_unknown_to_training_is_named(tmp_path):
    with pytest.raises(DataError, match=r"dev.csv:3: label '中性' does not occur in the training file"):
        read_own(tmp_path, "text,label\n好,正面\n坏,负面\n", "text,label\n好,正面\n还行,中性\n")


def test_unknown_file_type_is_refused(tmp_path):
    with pytest.raises(DataError, match=r"train.txt: unknown file type '.txt'"):
        read_own(tmp_path, "好\t1\n", suffix=".txt")


@pytest.mark.parametrize(
    ("records", "suffix", "message"),
    [
        (
            # `datasets` reads "1" as 1 in a mixed column: these were two classes ('1' and 'true') without a word
            '{"text": "好", "label": 1}\n{"text": "坏", "label": "1"}\n{"text": "行", "label": true}\n'
            '{"text": "差", "label": 0}\n',
            ".jsonl",
            'train.jsonl: labels of different JSON types: 1 (a number) on lines 1 and 4; "1" (a string) on line 2; '
            "true (a boolean) on line 3. Give every label the same type (all strings, all numbers or all booleans)",
        ),
        (
            "".join(f'{{"text": "{i}", "label": {i % 2}}}\n' for i in range(5)) + '{"text": "x", "label": "正面"}\n',
            ".jsonl",
            'train.jsonl: labels of different JSON types: 0 (a number) on lines 1, 2, 3 and 2 more; "正面" (a string) '
            "on line 6. Give every label the same type (all strings, all numbers or all booleans)",
        ),
        (
            '[{"text": "好", "label": false},\n {"text": "坏", "label": 0.5}]',
            ".json",
            "train.json: labels of different JSON types: false (a boolean) on line 1; 0.5 (a number) on line 2. Give "
            "every label the same type (all strings, all numbers or all booleans)",
        ),
    ],
)
def test_json_labels_of_different_types_are_refused_naming_the_lines(records, suffix, message, tmp_path):
    with pytest.raises(DataError) as error:
        read_own(tmp_path, records, suffix=suffix)
    assert str(error.value) == f"{tmp_path / ('train' + suffix)}: {message.split(': ', 1)[1]}"


def test_json_labels_of_one_type_each_are_read(tmp_path):
    """Integers and floats are both numbers (a regression); booleans alone are two classes."""
    _, labels, _ = read_own(tmp_path, '{"text": "好", "label": 1}\n{"text": "坏", "label": 0.5}\n', suffix=".jsonl")
    assert labels.is_regression
    booleans = '{"text": "好", "label": true}\n{"text": "坏", "label": false}\n'
    splits, labels, _ = read_own(tmp_path, booleans, suffix=".jsonl")
    assert labels.names == ("false", "true") and splits["train"]["label"] == [1, 0]


def test_blank_lines_between_tsv_records_are_counted_for_the_summary(tmp_path):
    """GLUE's reader skips a blank line between records (a TSV file holds one record a line); the run summary counts
    it, naming the file and lines. Blank lines at the end, and in other formats, are not worth a word."""
    from hf_roformer.training.run.file_formats import describe_blank_lines

    lines = [MRPC_HEADER, "1\t1\t2\tgood\tfine", "", "0\t3\t4\tbad\tworse", "", "", "1\t5\t6\tok\tfine"]
    data = write_mrpc(tmp_path, "\n".join(lines) + "\n\n\n")
    assert train_texts(read_glue(GLUE_TASKS["mrpc"], data)) == ["good", "bad", "ok"]
    train = data / "MRPC" / "train.tsv"
    assert describe_blank_lines([train, data / "MRPC" / "dev.tsv", None]) == [
        f"{train}: 3 blank lines between records, skipped (lines 3, 5, 6)"
    ]
    (tmp_path / "train.csv").write_text("text,label\n\ngood,1\n")
    assert describe_blank_lines([tmp_path / "train.csv"]) == []
