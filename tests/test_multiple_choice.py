"""`hf-roformer finetune multiple-choice`: C3's JSON and run_swag.py's columns read alike, questions with unequal
numbers of choices (stand-in choices never count), data refused by question id before anything is written, and a
run's predictions."""

import csv
import json
import logging
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from conftest import save_tiny_chinese_checkpoint
from transformers import AutoTokenizer

import hf_roformer
import hf_roformer_cli
from hf_roformer.training.run.finetune import configure_new_head
from hf_roformer.training.tasks.multiple_choice.files import read_multiple_choice_file
from hf_roformer.training.tasks.multiple_choice.task import (
    ChoiceCollator,
    ChoiceInputs,
    choice_labels,
    choice_loss,
    multiple_choice_head,
    predicted_choices,
)
from hf_roformer.utils.errors import DataError


# C3 documents: [context lines, questions, id]; 2, 3 and 4 choices.
C3 = [
    [["男：张三去哪里了？", "女：张三去了北京。"],
     [{"question": "张三去了哪里？", "choice": ["上海", "北京"], "answer": "北京"}], "d0"],
    [["李四在上海工作。"],
     [{"question": "李四在哪里工作？", "choice": ["广州", "上海", "深圳"], "answer": "上海"},
      {"question": "谁在上海工作？", "choice": ["王五", "赵六", "李四", "张三"], "answer": "李四"}], "d1"],
]  # fmt: skip


def write_c3(path: Path, documents=C3) -> Path:
    path.write_text(json.dumps(documents, ensure_ascii=False), encoding="utf-8")
    return path


def write_swag_csv(path: Path, records: list[dict]) -> Path:
    """`records` in run_swag.py's columns, with empty endings past a question's choices."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label"])
        for record in records:
            endings = record["choices"] + [""] * (4 - len(record["choices"]))
            writer.writerow([record["id"], record["context"], record["question"], *endings, record["label"]])
    return path


def test_c3_and_swag_columns_read_the_same_questions(tmp_path):
    c3 = read_multiple_choice_file(write_c3(tmp_path / "c3.json"), need_labels=True)
    assert c3["id"] == ["d0-0", "d1-0", "d1-1"]
    assert [len(choices) for choices in c3["choices"]] == [2, 3, 4]
    assert c3["label"] == [1, 1, 2]
    assert c3[0]["context"] == "男：张三去哪里了？\n女：张三去了北京。"
    swag = read_multiple_choice_file(write_swag_csv(tmp_path / "swag.csv", list(c3)), need_labels=True)
    assert swag.to_dict() == c3.to_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda doc: doc[1][0].update(answer="广州"),
         r"c3.json: question 'd0-0': answer '广州' is not one of \['上海', '北京'\]"),
        (lambda doc: doc[1][0].update(choice=["北京"], answer="北京"),
         r"question 'd0-0' needs at least two non-empty choices"),
        (lambda doc: doc[1][0].update(choice=["北京", "北京"]), r"question 'd0-0' lists a choice twice"),
        (lambda doc: doc[1][0].pop("answer"), r"c3.json: question 'd0-0' has no answer \(1 without one\)"),
    ],
)  # fmt: skip
def test_bad_c3_questions_are_named(change, message, tmp_path):
    documents = json.loads(json.dumps(C3))
    change(documents[0])
    with pytest.raises(DataError, match=message):
        read_multiple_choice_file(write_c3(tmp_path / "c3.json", documents), need_labels=True)


def test_bad_swag_label_is_named_with_its_line(tmp_path):
    records = list(read_multiple_choice_file(write_c3(tmp_path / "c3.json"), need_labels=True))
    records[0]["label"] = 2  # the first question has two choices
    with pytest.raises(DataError, match=r"swag.csv:2: question 'd0-0': label 2 is not one of its 2 choices"):
        read_multiple_choice_file(write_swag_csv(tmp_path / "swag.csv", records), need_labels=True)


def test_stand_in_choices_never_count_in_loss_or_predictions():
    logits = torch.tensor([[0.5, 2.0, 50.0, 50.0], [0.1, 0.2, 0.3, -1.0], [1.0, 0.0, 0.0, 0.0]])
    labels = torch.tensor([choice_labels(0, 2, 4), choice_labels(2, 4, 4), choice_labels(None, 3, 4)])
    expected = (
        torch.nn.functional.cross_entropy(logits[0:1, :2], torch.tensor([0]), reduction="sum")
        + torch.nn.functional.cross_entropy(logits[1:2], torch.tensor([2]), reduction="sum")
    ) / 2  # the unanswered question counts in neither the sum nor the count
    assert choice_loss({"logits": logits}, labels).item() == pytest.approx(expected.item(), rel=1e-6)
    assert choice_loss({"logits": logits}, labels, num_items_in_batch=4).item() == pytest.approx(expected.item() / 2)
    assert predicted_choices(logits.numpy(), [2, 4, 3]).tolist() == [1, 2, 0]


def test_a_question_scores_the_same_whatever_the_number_of_stand_in_choices():
    tokenizer = AutoTokenizer.from_pretrained(str(hf_roformer.pretrained_checkpoint()))
    data = datasets.Dataset.from_dict(
        {
            "id": ["a"],
            "context": ["张三去了北京。"],
            "question": ["张三去了哪里？"],
            "choices": [["上海", "北京"]],
            "label": [1],
        }
    )
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64,
    )  # fmt: skip
    model = hf_roformer.HfRoFormerForMultipleChoice(config).eval()
    scores = []
    for slots in (2, 4):
        encoded = ChoiceInputs(slots).encode(data, tokenizer, 24, False).remove_columns("truncated")
        assert encoded["labels"] == [choice_labels(1, 2, slots)]
        batch = ChoiceCollator(tokenizer)(list(encoded))
        assert batch.pop("labels").tolist() == [choice_labels(1, 2, slots)]
        with torch.no_grad():
            scores.append(model(**batch).logits[0, :2])
    torch.testing.assert_close(scores[0], scores[1], rtol=0, atol=1e-6)


def tiny_choice_model(**config) -> hf_roformer.HfRoFormerForMultipleChoice:
    """A small random multiple-choice model."""
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, **config
    )
    return hf_roformer.HfRoFormerForMultipleChoice(config).eval()


@pytest.mark.parametrize("summary_type, position", [(None, -1), ("last", -1), ("first", 0)])
def test_each_choice_is_scored_at_the_position_summary_type_names(summary_type, position):
    model = tiny_choice_model(**({} if summary_type is None else {"summary_type": summary_type}))
    ids = torch.randint(1, 50, (2, 3, 9), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hidden = model.roformer(ids.view(6, 9)).last_hidden_state
        logits = model(ids).logits
    torch.testing.assert_close(logits, model.classifier(hidden[:, position]).view(2, 3), rtol=0, atol=1e-6)


@pytest.mark.parametrize("summary_type", ["first", "last", None])
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_choices_score_does_not_depend_on_its_padding(summary_type, side):
    """Choices of 4 to 7 tokens padded to 7 and to 12 tokens, on either side, score as each choice alone: the head
    reads the choice's first or last real token, never a padding position."""
    model = tiny_choice_model(**({} if summary_type is None else {"summary_type": summary_type}))
    generator = torch.Generator().manual_seed(0)
    lengths = [[7, 4], [5, 6]]
    choices = [[torch.randint(1, 50, (length,), generator=generator) for length in question] for question in lengths]

    def padded(width):
        ids = torch.zeros(2, 2, width, dtype=torch.long)
        for question, row in enumerate(choices):
            for slot, choice in enumerate(row):
                if side == "right":
                    ids[question, slot, : len(choice)] = choice
                else:
                    ids[question, slot, width - len(choice) :] = choice
        return ids, (ids != 0).long()

    with torch.no_grad():
        alone = torch.tensor(
            [[model(choice[None, None]).logits.item() for choice in question] for question in choices]
        )
        for width in (7, 12):
            ids, mask = padded(width)
            torch.testing.assert_close(model(ids, attention_mask=mask).logits, alone, rtol=0, atol=1e-5)


QUESTIONS = datasets.Dataset.from_dict(
    {
        "id": ["short", "long"],
        "context": ["张三去了北京。", "李四昨天从上海坐火车去了南京，今天回来了。"],
        "question": ["张三去了哪里？", "李四去了哪里？"],
        "choices": [["上海", "北京"], ["北京", "南京", "杭州"]],
        "label": [1, 1],
    }
)


@pytest.mark.parametrize("summary_type", ["first", "last", None])
def test_choices_are_padded_to_their_batchs_longest(summary_type):
    """Whichever real token the head reads, the padding changes no score, so no batch is padded past its longest."""
    tokenizer = AutoTokenizer.from_pretrained(str(hf_roformer.pretrained_checkpoint()))
    inputs = ChoiceInputs(3)
    encoded = inputs.encode(QUESTIONS, tokenizer, 40, False).remove_columns("truncated")
    lengths = [[len(ids) for ids in question] for question in encoded["input_ids"]]
    assert max(lengths[0]) < max(lengths[1]) < 40  # encoded unpadded
    config = hf_roformer.HfRoFormerConfig(**({} if summary_type is None else {"summary_type": summary_type}))
    collate = inputs.collator(tokenizer, config, 40)
    batch = collate(list(encoded))
    assert batch["input_ids"].shape == (2, 3, max(lengths[1]))
    assert batch["attention_mask"].sum(-1).tolist() == lengths
    assert batch["labels"].tolist() == encoded["labels"]
    unlabelled = collate(list(encoded.remove_columns("labels")))  # a test split
    assert "labels" not in unlabelled
    torch.testing.assert_close(unlabelled["input_ids"], batch["input_ids"], rtol=0, atol=0)


@pytest.fixture(scope="module")
def tiny_chinese_checkpoint(tmp_path_factory):
    return save_tiny_chinese_checkpoint(tmp_path_factory.mktemp("mc_checkpoint"))


def test_run_with_unequal_choice_counts_writes_predictions(tiny_chinese_checkpoint, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="hf_roformer")
    train, validation = write_c3(tmp_path / "train.json", C3 * 1), write_c3(tmp_path / "dev.json")
    unlabelled = json.loads(json.dumps(C3))
    for document in unlabelled:
        for question in document[1]:
            question.pop("answer")
    test = write_c3(tmp_path / "test.json", unlabelled)
    output = tmp_path / "out"
    metrics = hf_roformer_cli.run([
        "finetune", "multiple-choice", "--model", str(tiny_chinese_checkpoint), "--train_file", str(train),
        "--validation_file", str(validation), "--test_file", str(test), "--output_dir", str(output),
        "--max_seq_length", "32", "--num_train_epochs", "2", "--per_device_train_batch_size", "2",
        "--learning_rate", "1e-3", "--use_cpu", "--disable_tqdm", "true", "--save_strategy", "no",
        "--eval_strategy", "no",
    ])  # fmt: skip
    assert "new multiple-choice head: one score a choice, read at its first token ([CLS]; summary_type 'first')" in (
        caplog.text
    )
    lines = [json.loads(line) for line in (output / "test_predictions.json").read_text().splitlines()]
    questions = read_multiple_choice_file(validation, need_labels=True)
    assert [line["id"] for line in lines] == questions["id"]
    for line, choices in zip(lines, questions["choices"], strict=True):
        assert 0 <= line["label"] < len(choices) and line["answer"] == choices[line["label"]]
    # the test file holds the evaluation questions without answers: the same choices, scored the same
    correct = np.mean([line["label"] == label for line, label in zip(lines, questions["label"], strict=True)])
    assert metrics["eval_accuracy"] == pytest.approx(correct)
    assert (output / "model.safetensors").exists() and "test_accuracy" not in metrics
    assert json.loads((output / "config.json").read_text())["summary_type"] == "first"  # a new head reads [CLS]


def test_a_checkpoints_own_head_keeps_the_position_it_was_trained_at(tiny_chinese_checkpoint, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="hf_roformer")
    trained_at_last = tmp_path / "last"
    model = hf_roformer.HfRoFormerForMultipleChoice.from_pretrained(tiny_chinese_checkpoint)
    model.save_pretrained(trained_at_last)  # no summary_type: the last position, as in transformers' RoFormer
    AutoTokenizer.from_pretrained(tiny_chinese_checkpoint).save_pretrained(trained_at_last)
    train, validation = write_c3(tmp_path / "train.json"), write_c3(tmp_path / "dev.json")
    output = tmp_path / "out"
    hf_roformer_cli.run([
        "finetune", "multiple-choice", "--model", str(trained_at_last), "--train_file", str(train),
        "--validation_file", str(validation), "--output_dir", str(output), "--max_seq_length", "32",
        "--max_steps", "1", "--use_cpu", "--disable_tqdm", "true", "--save_strategy", "no",
    ])  # fmt: skip
    assert "summary_type" not in json.loads((output / "config.json").read_text())
    assert "multiple-choice head from the checkpoint: one score a choice" in caplog.text


def test_bad_question_is_refused_before_anything_is_written(tiny_chinese_checkpoint, tmp_path):
    documents = json.loads(json.dumps(C3))
    documents[1][1][1]["answer"] = "孙七"
    train, validation = write_c3(tmp_path / "train.json"), write_c3(tmp_path / "dev.json", documents)
    output = tmp_path / "out"
    with pytest.raises(DataError, match=r"dev.json: question 'd1-1': answer '孙七' is not one of"):
        hf_roformer_cli.run([
            "finetune", "multiple-choice", "--model", str(tiny_chinese_checkpoint), "--train_file", str(train),
            "--validation_file", str(validation), "--output_dir", str(output), "--use_cpu",
        ])  # fmt: skip
    assert not output.exists()


@pytest.mark.parametrize("saved, expected", [({"summary_type": "first"}, "first"), ({}, None)])
def test_a_resumed_training_keeps_the_position_its_checkpoint_was_trained_at(saved, expected, tmp_path):
    """A run begun by a release whose new heads read the last position resumes reading it."""
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"model_type": "hf_roformer", **saved}))
    model = tiny_choice_model()
    new_head = {"missing_keys": ["classifier.weight", "classifier.bias"]}
    configure_new_head(model, new_head, multiple_choice_head(), resumed_from=checkpoint)
    assert getattr(model.config, "summary_type", None) == expected
    configure_new_head(model, new_head, multiple_choice_head())  # a fresh start
    assert model.config.summary_type == "first"


def test_a_summary_type_the_user_sets_is_kept():
    model = tiny_choice_model(summary_type="last")
    new_head = {"missing_keys": ["classifier.weight", "classifier.bias"]}
    configure_new_head(model, new_head, multiple_choice_head(), overrides={"summary_type": "last"})
    assert model.config.summary_type == "last"


def test_padding_each_batch_to_its_longest_trains_and_scores_as_padding_to_max_seq_length(
    tiny_chinese_checkpoint, tmp_path
):
    """Dropout is off in the tiny checkpoint: the two paddings differ only in the order of float sums."""
    train, validation = write_c3(tmp_path / "train.json"), write_c3(tmp_path / "dev.json")
    results = []
    for padding in ([], ["--pad_to_max_length"]):
        output = tmp_path / f"out{len(padding)}"
        metrics = hf_roformer_cli.run([
            "finetune", "multiple-choice", "--model", str(tiny_chinese_checkpoint), "--train_file", str(train),
            "--validation_file", str(validation), "--output_dir", str(output), "--max_seq_length", "64",
            "--num_train_epochs", "4", "--per_device_train_batch_size", "2", "--learning_rate", "1e-2",
            "--per_device_eval_batch_size", "2", "--use_cpu", "--disable_tqdm", "true", "--save_strategy", "no",
            "--eval_strategy", "no", *padding,
        ])  # fmt: skip
        results.append(metrics)
    assert results[1]["eval_loss"] == pytest.approx(results[0]["eval_loss"], rel=1e-5, abs=0)
    assert results[1]["eval_accuracy"] == results[0]["eval_accuracy"]
