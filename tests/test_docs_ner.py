"""docs/ner.md run as written (`test_docs.py` runs its blocks; see `docs_pages.py`): the People's Daily command,
shrunk by `HF_ROFORMER_SMOKE` to one epoch over 800 of its training paragraphs, learns entities (held-out entity F1
far above the 0 of a tagger that answers `O` everywhere, which is where 400 paragraphs leave it), writes what the page
lists, and the pipeline block finds entities with their characters."""

import json
import re

import pytest
from docs_pages import run_page_as_written


pytestmark = pytest.mark.user_path  # see setup.cfg
# The held-out entity F1 the smoke-sized run must reach: a tagger that learned nothing tags everything `O` (F1 0).
LEARNED_F1 = 0.25


@pytest.fixture(scope="module")
def ner_page():
    run = run_page_as_written("ner.md")
    return run


def test_peoples_daily_command_learns_entities(ner_page):
    output = ner_page.directory / "ner-roformer"
    printed = ner_page.output_of("--output_dir ner-roformer")
    assert "HF_ROFORMER_SMOKE is set: a smoke run (at most 800 training paragraphs for 1 epoch" in printed
    for split in ("eval", "test"):
        f1 = json.loads((output / f"{split}_results.json").read_text())[f"{split}_f1"]
        assert f1 >= LEARNED_F1, f"{split} entity F1 {f1:.4f}"
    predicted = (output / "test_predictions.txt").read_text(encoding="utf-8")
    assert len([paragraph for paragraph in predicted.split("\n\n") if paragraph.strip()]) == 100
    assert re.search(r"^\S B-(PER|LOC|ORG)$", predicted, re.MULTILINE)  # a character and its tag


def test_pipeline_block_prints_entities_with_their_characters(ner_page):
    lines = ner_page.output_of('pipeline("token-classification"').strip().splitlines()
    entities = [line.split() for line in lines if re.match(r"^(PER|LOC|ORG) ", line)]
    assert entities, lines
    for _, word, start, end, characters in entities:  # the entity's text is the characters its offsets hold
        assert word == characters and len(characters) == int(end) - int(start), lines
