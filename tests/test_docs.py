"""Every `python` and `bash` block of README.md and docs/*.md runs as written (see `docs_pages.py` for how: a
scratch directory with tiny stand-ins of the files the blocks name, `HF_ROFORMER_SMOKE=1` for the long-running
commands, blocks marked `<!-- docs-test: skip (reason) -->` left out): here, the pages no other test file reads; the
pages of `docs_pages.PAGE_TESTS` run in the test file that checks what they print and write."""

import re

import pytest
from docs_pages import PAGE_TESTS, PAGES, ROOT, SERVING, SKIP, code_blocks, run_page_as_written, runnable


pytestmark = pytest.mark.user_path  # see setup.cfg


@pytest.mark.parametrize("page", [page for page in PAGES if page.name not in PAGE_TESTS], ids=lambda page: page.name)
def test_code_blocks_run_as_written(page):
    if not runnable(page):
        pytest.skip(f"{page.name} has no runnable code block")
    run_page_as_written(page.name)  # fails with the end of the output unless every block ran


def test_every_page_with_code_is_run_by_a_test():
    """No page is left out: each page with runnable blocks is run by `test_code_blocks_run_as_written` or by the test
    file `PAGE_TESTS` names for it, which runs it as written (`run_page_as_written`)."""
    names = {page.name for page in PAGES}
    assert set(PAGE_TESTS) <= names, set(PAGE_TESTS) - names
    for page, test_file in PAGE_TESTS.items():
        source = (ROOT / "tests" / test_file).read_text(encoding="utf-8")
        assert f'run_page_as_written("{page}")' in source, f"tests/{test_file} does not run {page}"


def test_every_skipped_block_says_why():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for marker in re.findall(r"<!--\s*docs-test:[^\n]*-->", text):
            if SERVING.fullmatch(marker):  # runs in the serving environment (tests/test_docs_serving.py)
                continue
            match = SKIP.fullmatch(marker)
            assert match and match["reason"].strip(), f"{page.name}: {marker}"


def test_only_network_installs_and_gpus_are_skipped():
    """Skipped blocks are those a test machine cannot run: downloads, installs, GPUs, code of other libraries."""
    allowed = ("download", "install", "GPU", "CUDA", "network", "release", "TensorFlow", "this very suite")
    for page in PAGES:
        for block in code_blocks(page):
            if block.skip_reason is not None:
                assert any(word in block.skip_reason for word in allowed), f"{block.where}: {block.skip_reason}"


def test_readme_top_commands_are_the_demo_and_the_tests():
    """The README opens with the two commands (`make demo`, `make test`), and CI runs the same test command."""
    first = next(block for block in code_blocks(ROOT / "README.md") if block.language == "bash")
    commands = [line.split("#")[0].strip() for line in first.code.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"], commands
    assert "make test" in (ROOT / ".ci" / "run").read_text()
