"""Render the model card of every released checkpoint into `model_cards/<name>/README.md`."""

from pathlib import Path

from hf_roformer.conversion.model_card import render_released_cards


if __name__ == "__main__":
    for path in render_released_cards(Path(__file__).resolve().parents[1] / "model_cards"):
        print(path)
