"""The checkpoint shipped inside the package: a small Chinese char-level RoFormer pre-trained on People's Daily 1998.

It needs no download, so the demo, the examples and the tests start from pre-trained weights offline. Its model card
(`roformer-zh-char-small/README.md`) gives the training command, data and scores. On the command line it is named
`shipped:roformer-zh-char-small` (a colon cannot occur in a Hub id, so the name is never looked up on the Hub).
"""

import os
from pathlib import Path


SMALL_CHINESE_CHAR = "roformer-zh-char-small"
SHIPPED_PREFIX = "shipped:"
DIRECTORY = Path(__file__).resolve().parent


def pretrained_checkpoint(name: str = SMALL_CHINESE_CHAR) -> Path:
    """The directory of a shipped checkpoint, for `from_pretrained`; `FileNotFoundError` names what is missing."""
    path = DIRECTORY / name
    if not (path / "config.json").exists():
        shipped = sorted(child.name for child in DIRECTORY.iterdir() if (child / "config.json").exists())
        raise FileNotFoundError(f"no shipped checkpoint {name!r} in {DIRECTORY} (shipped: {shipped or 'none'})")
    return path


def is_shipped_name(name: str | os.PathLike) -> bool:
    """Whether `name` names a shipped checkpoint (`shipped:NAME`)."""
    return str(name).startswith(SHIPPED_PREFIX)


def resolve_checkpoint(name: str | os.PathLike) -> str:
    """`shipped:NAME` -> the directory of that shipped checkpoint; any other name (a directory, a Hub id) unchanged."""
    if is_shipped_name(name):
        return str(pretrained_checkpoint(str(name).removeprefix(SHIPPED_PREFIX)))
    return str(name)
