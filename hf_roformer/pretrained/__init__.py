"""The checkpoint shipped inside the package: a small Chinese char-level RoFormer pre-trained on People's Daily 1998.

It needs no download, so the demo, the examples and the tests start from pre-trained weights offline. Its model card
(`roformer-zh-char-small/README.md`) gives the training command, data and scores.
"""

from pathlib import Path


SMALL_CHINESE_CHAR = "roformer-zh-char-small"
DIRECTORY = Path(__file__).resolve().parent


def pretrained_checkpoint(name: str = SMALL_CHINESE_CHAR) -> Path:
    """The directory of a shipped checkpoint, for `from_pretrained`; `FileNotFoundError` names what is missing."""
    path = DIRECTORY / name
    if not (path / "config.json").exists():
        shipped = sorted(child.name for child in DIRECTORY.iterdir() if (child / "config.json").exists())
        raise FileNotFoundError(f"no shipped checkpoint {name!r} in {DIRECTORY} (shipped: {shipped or 'none'})")
    return path
