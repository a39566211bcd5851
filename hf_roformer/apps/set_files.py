"""Writing a small data set's files: the one step every set writer of `hf_roformer.apps` ends with."""

from pathlib import Path


def write_set_files(directory: str | Path, texts: dict[str, str]) -> dict[str, Path]:
    """Each text of `texts` (file name -> text) written in `directory`, created if needed; returns the paths by name."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in texts.items():
        paths[name] = directory / name
        paths[name].write_text(text, encoding="utf-8")
    return paths


__all__ = ["write_set_files"]
