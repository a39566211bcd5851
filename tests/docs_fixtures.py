"""Tiny stand-ins, in a page's scratch directory, for the external files its code blocks name: what a reader brings
(data in published formats, the original checkpoints), made small so the documented commands run in seconds.

Every page also finds `tests/fixtures/` of the repository at the same relative path, as a reader running the blocks
from a clone does (the test vocabularies and the original checkpoints written by bert4keras live there).
"""

from pathlib import Path


REPOSITORY = Path(__file__).resolve().parents[1]


def prepare_fixtures(page_name: str, directory: Path) -> None:
    """Create the files the code blocks of `page_name` expect to find in `directory`."""
    (directory / "tests").mkdir()
    (directory / "tests" / "fixtures").symlink_to(REPOSITORY / "tests" / "fixtures", target_is_directory=True)
    builder = FIXTURES.get(page_name)
    if builder is not None:
        builder(directory)


FIXTURES: dict = {}
