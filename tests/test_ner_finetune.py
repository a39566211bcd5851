"""`hf-roformer finetune token-classification` end to end on a tiny checkpoint: CoNLL files to a saved model whose
pipeline finds whole Chinese entities at their characters, a card with the metrics and predictions in the input's
format; the GlobalPointer head on nested CLUENER spans; a malformed file stopped before anything is written."""

import json
import random

import pytest
import torch
from conftest import cli_failure
from transformers import pipeline

import hf_roformer
import hf_roformer_cli


PEOPLE, PLACES, ORGANIZATIONS = (
    ["张三", "李四", "王小明", "赵丽"],
    ["北京", "上海", "广州", "南京"],
    ["新华社", "人民日报社"],
)


def sentence(rng: random.Random) -> list[tuple[str, str | None]]:
    """A sentence as (text, type) parts: a person visits a place's university or an organization."""
    return [
        (rng.choice(PEOPLE), "PER"), ("今天在", None), (rng.choice(PLACES), "LOC"), ("会见了", None),
        (rng.choice(ORGANIZATIONS), "ORG"), ("记者。", None),
    ]  # fmt: skip


def write_conll(path, sentences) -> None:
    lines = []
    for parts in sentences:
        for text, kind in parts:
            lines += [f"{c} {'O' if kind is None else ('B-' if i == 0 else 'I-') + kind}" for i, c in enumerate(text)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def chinese_checkpoint(tmp_path_factory):
    """A tiny random RoFormer with a char-level tokenizer over the characters of these sentences."""
    path = tmp_path_factory.mktemp("checkpoint")
    characters = sorted(set("".join(PEOPLE + PLACES + ORGANIZATIONS) + "今天在会见了记者。大学去"))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *characters]
    tokenizer = hf_roformer.HfRoFormerTokenizer({token: i for i, token in enumerate(vocab)}, word_level=False)
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    hf_roformer.HfRoFormerModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def arguments(checkpoint, data, output, *extra) -> list[str]:
    return [
        "finetune", "token-classification", "--model_name_or_path", str(checkpoint),
        "--train_file", str(data["train"]), "--validation_file", str(data["validation"]),
        "--test_file", str(data["test"]), "--output_dir", str(output), "--max_seq_length", "12",
        "--num_train_epochs", "8", "--learning_rate", "5e-3", "--per_device_train_batch_size", "8",
        "--eval_strategy", "no", "--save_strategy", "no", "--seed", "0", *extra,
    ]  # fmt: skip


def test_conll_files_to_a_pipeline_that_finds_whole_entities(chinese_checkpoint, tmp_path):
    rng = random.Random(0)
    data = {split: tmp_path / f"{split}.txt" for split in ("train", "validation", "test")}
    for split, count in (("train", 48), ("validation", 8), ("test", 4)):
        write_conll(data[split], [sentence(rng) for _ in range(count)])
    metrics = hf_roformer_cli.run(
        arguments(chinese_checkpoint, data, tmp_path / "out", "--return_entity_level_metrics")
    )
    assert metrics["eval_overall_f1"] == 1.0 and metrics["test_PER_f1"] == 1.0  # windows of 10 tokens: 2 each
    assert (tmp_path / "out" / "test_predictions.txt").read_text(encoding="utf-8") == data["test"].read_text("utf-8")
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "pipeline_tag: token-classification" in card and "- type: overall_f1\n      value: 1.0" in card

    tagger = pipeline("token-classification", model=str(tmp_path / "out"), aggregation_strategy="simple")
    text = "王小明今天在广州会见了人民日报社记者。"
    found = [(entity["entity_group"], entity["word"], text[entity["start"] : entity["end"]]) for entity in tagger(text)]
    assert found == [("PER", "王小明", "王小明"), ("LOC", "广州", "广州"), ("ORG", "人民日报社", "人民日报社")]


def test_global_pointer_learns_nested_cluener_spans(chinese_checkpoint, tmp_path):
    rng = random.Random(1)

    def record():
        person, place = rng.choice(PEOPLE), rng.choice(PLACES)
        text = f"{person}去{place}大学"
        university = text.index(place)
        return {
            "text": text,
            "label": {
                "name": {person: [[0, len(person) - 1]]},
                "organization": {f"{place}大学": [[university, len(text) - 1]]},
                "address": {place: [[university, university + len(place) - 1]]},
            },
        }

    data = {split: tmp_path / f"{split}.json" for split in ("train", "validation", "test")}
    for split, count in (("train", 48), ("validation", 8), ("test", 4)):
        records = [record() for _ in range(count)]
        data[split].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    output = tmp_path / "out"
    metrics = hf_roformer_cli.run(
        arguments(chinese_checkpoint, data, output, "--head", "global_pointer", "--max_seq_length", "16")
    )
    assert metrics["eval_f1"] == 1.0 and metrics["test_f1"] == 1.0
    written = [json.loads(line) for line in (output / "test_predictions.json").read_text("utf-8").splitlines()]
    expected = [json.loads(line) for line in data["test"].read_text("utf-8").splitlines()]
    assert [{kind: dict(sorted(v.items())) for kind, v in sorted(r["label"].items())} for r in written] == [
        {kind: dict(sorted(v.items())) for kind, v in sorted(r["label"].items())} for r in expected
    ]
    model = hf_roformer.HfRoFormerForGlobalPointer.from_pretrained(output)
    assert model.config.id2label == {0: "address", 1: "name", 2: "organization"}


def test_a_malformed_file_stops_the_run_before_anything_is_written(chinese_checkpoint, tmp_path, capsys):
    data = {split: tmp_path / f"{split}.txt" for split in ("train", "validation", "test")}
    write_conll(data["train"], [sentence(random.Random(0))])
    data["validation"].write_text("张 B-PER\n三 I-LOC\n", encoding="utf-8")
    data["test"].write_text("张 O\n", encoding="utf-8")
    error = cli_failure(capsys, arguments(chinese_checkpoint, data, tmp_path / "out"))
    assert error == f"error: {data['validation']}:2: the tag 'I-LOC' continues no LOC entity (IOB2)\n"
    assert not (tmp_path / "out").exists()
