"""Tiny stand-ins, in a page's scratch directory, for the external files its code blocks name: what a reader brings
(data in published formats, the original checkpoints), made small so the documented commands run in seconds."""

from pathlib import Path


def prepare_fixtures(page_name: str, directory: Path) -> None:
    """Create the files the code blocks of `page_name` expect to find in `directory`."""
    builder = FIXTURES.get(page_name)
    if builder is not None:
        builder(directory)


FIXTURES: dict = {}
