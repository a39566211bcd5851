"""Running a documentation page's code blocks as a reader would, once per test session.

`run_page(name)` executes every `python` and `bash` block of README.md or docs/NAME in order, in a fresh scratch
directory (Python blocks in one interpreter session, shell blocks with bash), with nothing downloaded
(`HF_HUB_OFFLINE=1`) and `hf-roformer` running this checkout's code. Tiny stand-ins of the external files a page names
are created there first (`docs_fixtures.py`), and `HF_ROFORMER_SMOKE=1` makes the long-running commands (the demo,
pre-training) shrink their data and steps: the one mechanism by which sizes differ from a reader's run. A block
preceded by `<!-- docs-test: skip (reason) -->` is not run; one preceded by `<!-- docs-test: serving -->` runs only
where vLLM is installed (the serving environment, `make test-serving`: tests/test_docs_serving.py). Tests read the
result: the exit status, each block's output, and the files the blocks wrote. The scratch directories (up to about
700 MB a page) are removed when the test session ends.
"""

import atexit
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from docs_fixtures import prepare_fixtures


ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>.*)\)\s*-->")
SERVING = re.compile(r"<!--\s*docs-test:\s*serving\s*-->")
FENCE = re.compile(r"^```(?P<language>[\w-]*)\s*$")
HEADER = re.compile(r"^--- (?P<where>\S+) \((?:python|bash)\)$", re.MULTILINE)


@dataclass
class Block:
    """One fenced code block of a page."""

    language: str
    code: str
    where: str
    skip_reason: str | None
    needs_vllm: bool = False


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
        code = "\n".join(lines[start + 1 : end]) + "\n"
        where = f"{page.relative_to(ROOT)}:{start + 1}"
        reason = skip["reason"].strip() if skip else None
        blocks.append(Block(match["language"], code, where, reason, bool(SERVING.search(previous))))
        index = end + 1
    return blocks


def runnable(page: Path) -> list[Block]:
    """The blocks of `page` that run here: python and bash, not marked skipped, and those that need vLLM only where
    it is installed."""
    vllm = importlib.util.find_spec("vllm") is not None
    return [
        block
        for block in code_blocks(page)
        if block.language in ("python", "bash") and not block.skip_reason and (vllm or not block.needs_vllm)
    ]


@dataclass
class PageRun:
    """What running a page's blocks gave: the scratch directory, exit status, the output of each block, and what each
    block wrote to stderr (`stderr`: where -> text)."""

    page: Path
    directory: Path
    returncode: int
    output: str
    stderr: dict[str, str]

    def stderr_of(self, contains: str) -> str:
        """What the one runnable block whose code contains `contains` wrote to stderr."""
        return self.stderr[self._where(contains)]

    def _where(self, contains: str) -> str:
        found = [block.where for block in runnable(self.page) if contains in block.code]
        assert len(found) == 1, f"{self.page.name}: {len(found)} runnable blocks contain {contains!r}"
        return found[0]

    def output_of(self, contains: str) -> str:
        """The output printed by the one runnable block whose code contains `contains`."""
        parts = HEADER.split(self.output)  # [before, where, text, where, text, ...]
        texts = dict(zip(parts[1::2], parts[2::2], strict=True))
        return texts[self._where(contains)]


# The pages whose run some test file reads besides running it, and that file: `make test` runs each test file in one
# pytest-xdist worker (`--dist loadfile`), so a page is run by one file only (once per session) and read by the tests
# beside it. Every other page is run by test_docs.py.
PAGE_TESTS = {
    "distributed-training.md": "test_docs_distributed_training.py",
    "fine-tuning.md": "test_docs_fine_tuning.py",
    "long-documents.md": "test_docs_long_documents.py",
    "ner.md": "test_docs_ner.py",
    "pre-training.md": "test_docs_pre_training.py",
    "reading-comprehension.md": "test_docs_reading_comprehension.py",
    "serving.md": "test_docs_serving.py",
}


def run_page(name: str) -> PageRun:
    """Run the blocks of README.md or docs/`name` (once per session; later calls return the same run), from the test
    file the page belongs to (`PAGE_TESTS`, else test_docs.py)."""
    running = Path(os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[0]).name
    owner = PAGE_TESTS.get(name, "test_docs.py")
    assert running == owner, f"{name} is run by tests/{owner} (docs_pages.PAGE_TESTS), not by tests/{running}"
    return _run_page(name)


@functools.cache
def _run_page(name: str) -> PageRun:
    page = ROOT / name if name == "README.md" else ROOT / "docs" / name
    directory = Path(tempfile.mkdtemp(prefix=f"docs-{page.stem}-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)  # cached for the session: read by later tests
    prepare_fixtures(page.name, directory)
    shims = directory / ".bin"
    shims.mkdir()
    script = shims / "hf-roformer"  # the console script, running this checkout's code with this interpreter
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m hf_roformer_cli "$@"\n')
    script.chmod(0o755)
    blocks_file = directory / ".docs-blocks.json"
    blocks_file.write_text(json.dumps([vars(block) for block in runnable(page)], ensure_ascii=False), encoding="utf-8")
    environment = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_ROFORMER_SMOKE": "1",
        "MPLBACKEND": "Agg",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PATH": os.pathsep.join([str(shims), str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "docs_runner.py"), str(blocks_file)],
        cwd=directory,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1200,
    )
    stderr_file = directory / ".docs-stderr.json"
    stderr = json.loads(stderr_file.read_text(encoding="utf-8")) if stderr_file.exists() else {}
    return PageRun(page, directory, result.returncode, result.stdout, stderr)


def run_page_as_written(name: str) -> PageRun:
    """`run_page(name)`, failing the test with the end of the page's output unless every block ran (exit status 0)."""
    run = run_page(name)
    assert run.returncode == 0, run.output[-12000:]
    return run
