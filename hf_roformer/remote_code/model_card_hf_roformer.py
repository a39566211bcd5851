"""Hub metadata of saved and pushed models: `library_name`, the head's `pipeline_tag` and the model tags.

transformers writes a card only when pushing, with `library_name` and `model.model_tags` but no `pipeline_tag`, and
the Hub cannot infer the task of a model whose classes live in remote code; without these keys the model does not show
up under its task in Hub search and gets no inference widget. Cards are edited through huggingface_hub's `ModelCard`
(a transformers dependency), and only missing keys are added: a card someone wrote keeps its content.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` (and its `huggingface_hub`) and
sibling Hub-bound files.
"""

from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData


MODEL_TAGS = ("roformer", "hf_roformer", "rotary-position-embedding")
CARD_NAME = "README.md"


def card_metadata(library_name: str, pipeline_tag: str | None, tags: list[str] | None) -> dict:
    """The metadata keys a model's card should carry (None values left out)."""
    metadata = {"library_name": library_name, "pipeline_tag": pipeline_tag, "tags": list(tags or [])}
    return {key: value for key, value in metadata.items() if value}


def add_card_metadata(directory: str | Path, metadata: dict, model_name: str) -> Path:
    """Give `directory/README.md` the keys of `metadata` it lacks (tags are merged), creating a short card when there
    is none; returns the card's path."""
    path = Path(directory) / CARD_NAME
    if path.exists():
        card = ModelCard.load(path)
    else:
        card = ModelCard(
            f"---\n{ModelCardData().to_yaml()}\n---\n\n# {model_name}\n\n"
            "A RoFormer model (rotary position embedding) in the hf_roformer format. Load it with the Auto class "
            "of its head and `trust_remote_code=True`, or install `hf_roformer` to use it without remote code.\n"
        )
    for key, value in metadata.items():
        if key == "tags":
            existing = list(card.data.tags or [])
            card.data.tags = existing + [tag for tag in value if tag not in existing]
        elif card.data.get(key) is None:
            card.data[key] = value
    card.save(path)
    return path
