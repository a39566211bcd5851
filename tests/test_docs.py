"""Every `python` and `bash` block of README.md and docs/*.md runs as written.

Each page runs in a fresh scratch directory, block after block (Python blocks share one interpreter session), with
nothing downloaded (`HF_HUB_OFFLINE=1`). Tiny stand-ins of the external files a page names (GLUE TSV files, original
checkpoints, text corpora) are created there first (`docs_fixtures.py`), and `HF_ROFORMER_SMOKE=1` makes the few
long-running commands (the demo, pre-training, benchmarks) shrink their data and steps: that is the one mechanism by
which sizes differ from a reader's run. A block preceded by `<!-- docs-test: skip (reason) -->` is not run; the
reason must say why (network, GPU, ...).
"""

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from docs_fixtures import prepare_fixtures


ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]*)\)\s*-->")
FENCE = re.compile(r"^```(?P<language>[\w-]*)\s*$")


@dataclass
class Block:
    """One fenced code block of a page."""

    language: str
    code: str
    where: str
    skip_reason: str | None


def code_blocks(page: Path) -> list[Block]:
    """The fenced blocks of `page`, with the skip reason of a marker on the line before the fence."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match or not match["language"]:
            index += 1
            continue
        start = index
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        skip = SKIP.search(previous)
        blocks.append(
            Block(
                match["language"],
                "\n".join(lines[start + 1 : end]) + "\n",
                f"{page.relative_to(ROOT)}:{start + 1}",
                skip["reason"].strip() if skip else None,
            )
        )
        index = end + 1
    return blocks


def runnable(page: Path) -> list[Block]:
    return [block for block in code_blocks(page) if block.language in ("python", "bash") and not block.skip_reason]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_code_blocks_run_as_written(page, tmp_path):
    blocks = runnable(page)
    if not blocks:
        pytest.skip(f"{page.name} has no runnable code block")
    prepare_fixtures(page.name, tmp_path)
    blocks_file = tmp_path / ".docs-blocks.json"
    blocks_file.write_text(json.dumps([vars(block) for block in blocks], ensure_ascii=False), encoding="utf-8")
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_ROFORMER_SMOKE": "1",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "docs_runner.py"), str(blocks_file)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-6000:]


def test_every_skipped_block_says_why():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for marker in re.findall(r"<!--\s*docs-test:[^>]*-->", text):
            assert SKIP.fullmatch(marker) and SKIP.fullmatch(marker)["reason"].strip(), f"{page.name}: {marker}"


def test_readme_top_commands_are_the_demo_and_the_tests():
    """The README opens with the two commands (`make demo`, `make test`), and CI runs the same test command."""
    first = next(block for block in code_blocks(ROOT / "README.md") if block.language == "bash")
    commands = [line.split("#")[0].strip() for line in first.code.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"], commands
    assert "make test" in (ROOT / ".ci" / "run").read_text()
