"""docs/long-documents.md run as written (`docs_pages.py`): fine-tuning at 1,024 tokens on texts of mixed lengths
learns and saves the trained length with the model and its tokenizer."""

import json

import pytest
from docs_checks import LEARNED_MARGIN, labels_of, majority_share
from docs_pages import run_page_as_written


pytestmark = pytest.mark.user_path  # see setup.cfg


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
