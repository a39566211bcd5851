"""docs/pre-training.md run as written (`docs_pages.py`): the small pre-training command saves a tokenizer of its
trained length and a model the fill-mask pipeline uses; the shipped checkpoint's recipe runs (smoke-sized by
`HF_ROFORMER_SMOKE`) to its finished marker; the commands print no warning."""

import json

import pytest
from docs_checks import assert_training_commands_print_no_warning_table_or_traceback
from docs_pages import run_page_as_written


pytestmark = pytest.mark.user_path  # see setup.cfg


@pytest.fixture(scope="module")
def pre_training():
    run = run_page_as_written("pre-training.md")
    return run


def test_pre_training_page_as_documented(pre_training):
    assert json.loads((pre_training.directory / "zh-char-tiny" / "tokenizer_config.json").read_text())[
        "model_max_length"
    ] == 32
    printed = pre_training.output_of('pipeline("fill-mask"').strip().splitlines()[-1]  # after loading messages
    assert printed.startswith("[") and len(eval(printed)) == 5  # five completions
    assert (pre_training.directory / "zh-char-small" / "finished.json").exists()  # the shipped recipe, smoke-sized


def test_training_commands_print_no_warning_table_or_traceback(pre_training):
    assert_training_commands_print_no_warning_table_or_traceback(pre_training)
