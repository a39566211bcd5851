"""`hf-roformer finetune question-answering`: answers located through offsets (char and word level), windows against
whole contexts, CMRC2018's and SQuAD's formulas on fixed cases, data refused before anything is written, and the
files and answers of a run."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import save_tiny_chinese_checkpoint
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

import hf_roformer
import hf_roformer_cli
from hf_roformer.apps.question_answering import answer_question
from hf_roformer.training.tasks.question_answering.metrics import (
    cmrc_exact,
    cmrc_f1,
    cmrc_segments,
    question_answering_scores,
    squad_exact,
    squad_f1,
)
from hf_roformer.training.tasks.question_answering.predictions import best_answers
from hf_roformer.training.tasks.question_answering.task import QuestionInputs
from hf_roformer.utils.errors import DataError


FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Contexts with the answers' starts; Latin letters, digits, spaces and full-width marks test the offsets.
QUESTIONS = [
    ("q1", "新华社北京12月31日电 国家主席江泽民发表了1998年新年讲话。", "谁发表了新年讲话？", "江泽民"),
    ("q2", "记者从上海获悉，人民日报的iPhone 11报道引起关注。", "哪家报纸报道了？", "人民日报"),
    ("q3", "《红楼梦》是中国的古典小说，作者是曹雪芹。", "作者是谁？", "曹雪芹"),
    ("q4", "The Eiffel Tower is in Paris，高 330 米。", "埃菲尔铁塔有多高？", "330 米"),
]


def question_rows(questions=QUESTIONS):
    return [
        {
            "id": qid,
            "context": context,
            "question": question,
            "answers": {"text": [answer], "answer_start": [context.index(answer)]},
        }
        for qid, context, question, answer in questions
    ]


def encoded_inputs(tokenizer, rows, max_length, stride):
    import datasets

    raw = datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)})
    inputs = QuestionInputs(raw, stride)
    inputs.check(tokenizer, max_length, raw)
    return inputs, inputs.encode(raw["train"], tokenizer, max_length, False)


@pytest.fixture(scope="module")
def char_tokenizer():
    return AutoTokenizer.from_pretrained(str(hf_roformer.pretrained_checkpoint()))


@pytest.fixture(scope="module")
def word_tokenizer():
    return hf_roformer.HfRoFormerTokenizer(str(FIXTURES / "word_vocab.txt"))


@pytest.mark.parametrize("level", ["char", "word"])
def test_answer_labels_cover_exactly_the_answer_characters(level, char_tokenizer, word_tokenizer):
    tokenizer = char_tokenizer if level == "char" else word_tokenizer
    if level == "word":  # answers made of words, several characters to a token
        assert tokenizer.tokenize("江泽民") == ["江泽民"] and tokenizer.tokenize("人民日报") == ["人民日报"]
    inputs, features = encoded_inputs(tokenizer, question_rows(), 512, 128)
    _, offsets = inputs.features["train"]
    assert len(features) == len(QUESTIONS)  # every context whole
    for (_, context, _, answer), start, end, window in zip(
        QUESTIONS, features["start_positions"], features["end_positions"], offsets, strict=True
    ):
        assert start > 0 and context[window[start][0] : window[end][1]] == answer


def test_word_level_answer_inside_a_word_is_labelled_with_the_whole_word(word_tokenizer):
    context = "国家主席江泽民发表讲话。"
    rows = [{"id": "w", "context": context, "question": "谁？", "answers": {"text": ["泽民"], "answer_start": [5]}}]
    inputs, features = encoded_inputs(word_tokenizer, rows, 512, 128)
    _, (window,) = inputs.features["train"]
    start, end = features["start_positions"][0], features["end_positions"][0]
    assert context[window[start][0] : window[end][1]] == "江泽民"


def test_windows_label_the_answer_where_they_hold_it_and_cls_elsewhere(char_tokenizer):
    context = "天气很好。" * 12 + "江泽民发表了新年讲话。" + "大家都很高兴。" * 12
    rows = [
        {"id": "long", "context": context, "question": "谁？", "answers": {"text": ["江泽民"], "answer_start": [60]}}
    ]
    inputs, features = encoded_inputs(char_tokenizer, rows, 48, 16)
    _, offsets = inputs.features["train"]
    assert len(features) > 3 and all(features["truncated"])
    holding = 0
    for start, end, window in zip(features["start_positions"], features["end_positions"], offsets, strict=True):
        covered = [pair for pair in window if pair is not None]
        if covered[0][0] <= 60 and covered[-1][1] >= 63:
            holding += 1
            assert context[window[start][0] : window[end][1]] == "江泽民"
        else:
            assert start == end == 0
    assert holding >= 2  # the stride repeats it in overlapping windows


def test_answer_from_any_window_maps_back_to_the_context(char_tokenizer):
    context = "天气很好。" * 12 + "江泽民发表了新年讲话。" + "大家都很高兴。" * 12
    rows = [
        {"id": "long", "context": context, "question": "谁？", "answers": {"text": ["江泽民"], "answer_start": [60]}}
    ]
    inputs, features = encoded_inputs(char_tokenizer, rows, 48, 16)
    feature_ids, offsets = inputs.features["train"]
    width = max(len(ids) for ids in features["input_ids"])
    labelled = [i for i, start in enumerate(features["start_positions"]) if start > 0]
    for window in labelled:  # logits pointing at the answer in one window only
        start_logits, end_logits = np.zeros((len(features), width)), np.zeros((len(features), width))
        start_logits[window, features["start_positions"][window]] = 5.0
        end_logits[window, features["end_positions"][window]] = 5.0
        found = best_answers(rows, feature_ids, offsets, start_logits, end_logits)
        assert found.answers == {"long": "江泽民"}


def test_a_context_that_fits_one_window_reads_the_same_as_whole(char_tokenizer):
    whole_inputs, whole = encoded_inputs(char_tokenizer, question_rows(), 4096, 128)
    window_inputs, windowed = encoded_inputs(char_tokenizer, question_rows(), 64, 16)
    assert len(windowed) == len(whole) == len(QUESTIONS) and not any(windowed["truncated"])
    assert whole.to_dict() == windowed.to_dict()
    assert whole_inputs.features == window_inputs.features
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=char_tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64,
    )  # fmt: skip
    model = hf_roformer.HfRoFormerForQuestionAnswering(config).eval()
    answers = []
    for inputs, features in ((whole_inputs, whole), (window_inputs, windowed)):
        batch = char_tokenizer.pad({"input_ids": features["input_ids"]}, return_tensors="pt")
        with torch.no_grad():
            output = model(**batch)
        found = best_answers(
            question_rows(), *inputs.features["train"], output.start_logits.numpy(), output.end_logits.numpy()
        )
        answers.append(found.answers)
    assert answers[0] == answers[1]


def test_cmrc2018_formulas_on_fixed_cases():
    assert cmrc_segments("iPhone 11发布了《3.5版》") == ["iphone", "11", "发", "布", "了", "《", "3.5", "版", "》"]
    assert cmrc_segments("iPhone 11发布了《3.5版》", drop_punctuation=True) == [
        "iphone",
        "11",
        "发",
        "布",
        "了",
        "3.5",
        "版",
    ]
    assert cmrc_exact("《红楼梦》", "红楼梦") == 1.0 and cmrc_exact("红楼", "红楼梦") == 0.0
    assert cmrc_f1("北京市", "北京") == pytest.approx(0.8)  # 2 common of 3 predicted and 2 expected
    # the longest common *substring*: 北 alone (a subsequence would count 北京)
    assert cmrc_f1("北方京城", "北京") == pytest.approx(2 * (1 / 4) * (1 / 2) / (1 / 4 + 1 / 2))
    assert cmrc_f1("上海", "北京") == 0.0
    scores = question_answering_scores(
        {"a": "北京市", "b": "红楼梦", "c": "上海"}, {"a": ["北京", "北京市"], "b": ["《红楼梦》"], "c": ["北京"]}, "zh"
    )
    assert scores == pytest.approx({"exact_match": 100 * 2 / 3, "f1": 100 * 2 / 3})


def test_squad_formulas_on_fixed_cases():
    assert squad_exact("The Eiffel Tower!", "eiffel tower") == 1.0
    assert squad_f1("the Eiffel Tower", "Eiffel Tower in Paris") == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert squad_f1("a", "the") == 1.0  # both empty once articles go (v2.0's rule)
    scores = question_answering_scores(
        {"a": "Eiffel Tower", "b": "", "c": "Paris"}, {"a": ["the Eiffel Tower"], "b": [], "c": []}, "en"
    )
    assert scores == pytest.approx({"exact_match": 100 * 2 / 3, "f1": 100 * 2 / 3})


@pytest.fixture(scope="module")
def tiny_qa_checkpoint(tmp_path_factory):
    """A tiny random RoFormer with the shipped Chinese char-level tokenizer."""
    return save_tiny_chinese_checkpoint(tmp_path_factory.mktemp("qa_checkpoint"))


def write_squad(path: Path, rows: list[dict]) -> Path:
    """`rows` in SQuAD's nested layout, one paragraph each."""
    paragraphs = []
    for row in rows:
        answers = row["answers"]
        starts = answers["answer_start"]
        listed = [{"text": text, "answer_start": start} for text, start in zip(answers["text"], starts, strict=True)]
        question = {"id": row["id"], "question": row["question"], "answers": listed}
        paragraphs.append({"context": row["context"], "qas": [question]})
    path.write_text(
        json.dumps({"version": "v1", "data": [{"title": "t", "paragraphs": paragraphs}]}, ensure_ascii=False)
    )
    return path


def write_lines(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def qa_argv(checkpoint, train, validation, output, *extra):
    return [
        "finetune", "question-answering", "--model", str(checkpoint), "--train_file", str(train),
        "--validation_file", str(validation), "--language", "zh", "--output_dir", str(output), "--max_seq_length", "40",
        "--doc_stride", "8", "--num_train_epochs", "1", "--per_device_train_batch_size", "4", "--learning_rate", "1e-3",
        "--use_cpu", "--disable_tqdm", "true", "--save_strategy", "no", "--eval_strategy", "no", *extra,
    ]  # fmt: skip


def test_run_writes_run_qa_files_and_the_saved_model_answers_the_same(tiny_qa_checkpoint, tmp_path):
    rows = question_rows()
    train = write_squad(tmp_path / "train.json", rows * 1)
    validation = write_lines(tmp_path / "dev.jsonl", rows)
    output = tmp_path / "out"
    metrics = hf_roformer_cli.run(qa_argv(tiny_qa_checkpoint, train, validation, output, "--n_best_size", "64"))
    predictions = json.loads((output / "eval_predictions.json").read_text())
    n_best = json.loads((output / "eval_nbest_predictions.json").read_text())
    assert sorted(predictions) == sorted(n_best) == [row["id"] for row in rows]
    references = {row["id"]: row["answers"]["text"] for row in rows}
    expected = question_answering_scores(predictions, references, "zh")
    assert metrics["eval_exact_match"] == pytest.approx(expected["exact_match"])
    assert metrics["eval_f1"] == pytest.approx(expected["f1"])
    for question_id, candidates in n_best.items():
        context = next(row["context"] for row in rows if row["id"] == question_id)
        assert candidates[0]["text"] == predictions[question_id]
        assert all(
            context[start:end] == candidate["text"] for candidate in candidates for start, end in [candidate["offsets"]]
        )
    # what the removed `question-answering` pipeline did, on the saved model: the same answers from whole contexts
    model = AutoModelForQuestionAnswering.from_pretrained(output).eval()
    tokenizer = AutoTokenizer.from_pretrained(output)
    whole = [row for row in rows if len(tokenizer(row["question"], row["context"])["input_ids"]) <= 40]
    assert 0 < len(whole) < len(rows)  # some contexts were read whole, the others in windows
    for row in whole:
        answered = answer_question(model, tokenizer, row["question"], row["context"])
        assert answered["answer"] == predictions[row["id"]]
        assert row["context"][answered["start"] : answered["end"]] == answered["answer"]


def test_unanswerable_questions_with_version_2(tiny_qa_checkpoint, tmp_path):
    rows = question_rows() + [
        {"id": "none", "context": "今天天气很好。", "question": "谁来了？", "answers": {"text": [], "answer_start": []}}
    ]
    train = write_lines(tmp_path / "train.jsonl", rows)
    output = tmp_path / "out"
    with pytest.raises(
        DataError, match=r"train.jsonl: question 'none' \(line 5\) has no answer; .*--version_2_with_negative"
    ):
        hf_roformer_cli.run(qa_argv(tiny_qa_checkpoint, train, train, output))
    assert not output.exists()
    hf_roformer_cli.run(qa_argv(tiny_qa_checkpoint, train, train, output, "--version_2_with_negative"))
    odds = json.loads((output / "eval_null_odds.json").read_text())
    predictions = json.loads((output / "eval_predictions.json").read_text())
    assert sorted(odds) == sorted(predictions) == sorted(row["id"] for row in rows)
    assert all((predictions[qid] == "") == (odds[qid] > 0.0) for qid in odds)


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda row: {**row, "answers": {"text": ["江泽民"], "answer_start": [3]}},
         r"dev.json: question 'q1' \(data\[0\].paragraphs\[0\].qas\[0\]\): answer_start 3 does not hold its answer "
         r"'江泽民' \(the context has '北京1' there\)"),
        (lambda row: {**row, "id": "q2"}, r"dev.json: question id 'q2' appears twice"),
        (lambda row: {**row, "question": " "},
         r"dev.json: question 'q1' \(.*\): `question` must be a non-empty string"),
    ],
)  # fmt: skip
def test_bad_questions_are_refused_naming_the_id_before_anything_is_written(
    corrupt, message, tiny_qa_checkpoint, tmp_path
):
    rows = question_rows()
    train = write_lines(tmp_path / "train.jsonl", rows)
    validation = write_squad(tmp_path / "dev.json", [corrupt(rows[0]), *rows[1:]])
    output = tmp_path / "out"
    with pytest.raises(DataError, match=message):
        hf_roformer_cli.run(qa_argv(tiny_qa_checkpoint, train, validation, output))
    assert not output.exists()


def test_a_question_too_long_for_a_window_is_refused_naming_it(tiny_qa_checkpoint, tmp_path):
    rows = question_rows()
    long = [{**rows[0], "id": "long", "question": "谁" * 30}, *rows[1:]]
    train, validation = write_lines(tmp_path / "train.jsonl", rows), write_lines(tmp_path / "dev.jsonl", long)
    output = tmp_path / "out"
    message = (
        r"dev.jsonl: question 'long' takes 30 tokens: with 3 special tokens and --doc_stride 8 it leaves no context in "
        r"--max_seq_length 40"
    )
    with pytest.raises(DataError, match=message):
        hf_roformer_cli.run(qa_argv(tiny_qa_checkpoint, train, validation, output))
    assert not output.exists()


def test_a_training_answer_no_window_holds_whole_is_refused(char_tokenizer):
    answer = "江泽民发表了新年讲话大家都很高兴" * 3  # 48 characters: longer than a window's context
    context = "天气很好。" * 4 + answer + "。"
    rows = [{"id": "long", "context": context, "question": "谁？", "answers": {"text": [answer], "answer_start": [20]}}]
    with pytest.raises(DataError) as refused:
        encoded_inputs(char_tokenizer, rows, 48, 16)
    assert str(refused.value) == (
        f"train: question 'long': its answer {answer[:40]!r} does not fit whole in any window of --max_seq_length 48 "
        "(--doc_stride 16), so it would train as unanswerable; raise --max_seq_length or shorten the answer"
    )
