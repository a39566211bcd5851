"""The checkpoint shipped inside the package: a small Chinese char-level RoFormer pre-trained on People's Daily 1998
(`sources.py`: where any named checkpoint comes from, shipped, local or on the Hub).

It needs no download, so the demo, the examples and the tests start from pre-trained weights offline. Its model card
(`roformer-zh-char-small/README.md`) gives the training command, data and scores. On the command line it is named
`shipped:roformer-zh-char-small` (a colon cannot occur in a Hub id, so the name is never looked up on the Hub).
"""

import os
from pathlib import Path

from ..utils.errors import ModelSourceError, unknown_name


SMALL_CHINESE_CHAR = "roformer-zh-char-small"
SHIPPED_PREFIX = "shipped:"
DIRECTORY = Path(__file__).resolve().parent


class UnknownShippedCheckpoint(ModelSourceError, FileNotFoundError):
    """A `shipped:NAME` (or `pretrained_checkpoint(NAME)`) that names no checkpoint of the package."""


def shipped_names() -> list[str]:
    """The names of the checkpoints shipped with the package."""
    return sorted(child.name for child in DIRECTORY.iterdir() if (child / "config.json").exists())


def pretrained_checkpoint(name: str = SMALL_CHINESE_CHAR) -> Path:
    """The directory of a shipped checkpoint, for `from_pretrained`; an unknown name raises `UnknownShippedCheckpoint`
    (a `FileNotFoundError`) listing the shipped ones."""
    path = DIRECTORY / name
    if not (path / "config.json").exists():
        raise UnknownShippedCheckpoint(unknown_name("shipped checkpoint", name, shipped_names()))
    return path


def is_shipped_name(name: str | os.PathLike) -> bool:
    """Whether `name` names a shipped checkpoint (`shipped:NAME`)."""
    return str(name).startswith(SHIPPED_PREFIX)


def resolve_checkpoint(name: str | os.PathLike) -> str:
    """`shipped:NAME` -> the directory of that shipped checkpoint; any other name (a directory, a Hub id) unchanged."""
    if is_shipped_name(name):
        return str(pretrained_checkpoint(str(name).removeprefix(SHIPPED_PREFIX)))
    return str(name)
