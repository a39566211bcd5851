"""Hub metadata: saved and pushed cards carry `library_name: transformers`, the head's `pipeline_tag` and the model
tags (plus any added with `model.add_model_tags`), so Hub search lists the models under their task."""

import types
from pathlib import Path

import huggingface_hub
import pytest
import transformers.utils.hub
from conftest import tiny_config
from huggingface_hub import ModelCard
from huggingface_hub.errors import EntryNotFoundError

import hf_roformer
from hf_roformer.remote_code.model_card_hf_roformer import MODEL_TAGS


pytestmark = pytest.mark.releases("remote_code.saving_hf_roformer")  # see setup.cfg


PIPELINE_TAGS = {
    hf_roformer.HfRoFormerModel: "feature-extraction",
    hf_roformer.HfRoFormerForMaskedLM: "fill-mask",
    hf_roformer.HfRoFormerForCausalLM: "text-generation",
    hf_roformer.HfRoFormerForSequenceClassification: "text-classification",
    hf_roformer.HfRoFormerForTokenClassification: "token-classification",
    hf_roformer.HfRoFormerForMultipleChoice: "multiple-choice",
    hf_roformer.HfRoFormerForQuestionAnswering: "question-answering",
}


@pytest.mark.parametrize("head", list(PIPELINE_TAGS), ids=lambda head: head.__name__)
def test_saved_card_names_library_task_and_tags(head, tmp_path):
    model = head(tiny_config(is_decoder=head is hf_roformer.HfRoFormerForCausalLM))
    model.add_model_tags(["chinese", "legal"])
    model.save_pretrained(tmp_path)
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == PIPELINE_TAGS[head]
    assert card.data.tags == [*MODEL_TAGS, "chinese", "legal"]
    reloaded = hf_roformer.AutoModel.from_pretrained(tmp_path) if head is hf_roformer.HfRoFormerModel else None
    assert reloaded is None or reloaded.model_tags[: len(MODEL_TAGS)] == list(MODEL_TAGS)


def test_an_existing_card_keeps_its_content_and_gains_missing_keys(tmp_path):
    (tmp_path / "README.md").write_text(
        "---\nlicense: apache-2.0\npipeline_tag: sentence-similarity\ntags:\n- mine\n---\n\n"
        "# My model\n\nHand-written.\n",
        encoding="utf-8",
    )
    hf_roformer.HfRoFormerModel(tiny_config()).save_pretrained(tmp_path)
    card = ModelCard.load(tmp_path / "README.md")
    assert card.data.pipeline_tag == "sentence-similarity"  # the author's choice stays
    assert card.data.license == "apache-2.0" and card.data.library_name == "transformers"
    assert card.data.tags == ["mine", *MODEL_TAGS]
    assert card.text.strip() == "# My model\n\nHand-written."


def test_push_to_hub_uploads_a_card_with_the_metadata(monkeypatch):
    """`push_to_hub` with the Hub replaced by stand-ins: no card on the Hub yet, so transformers writes its template
    card; what gets uploaded carries the head's task and the model tags."""
    uploaded = {}

    def fake_upload(self, working_dir, repo_id, *args, **kwargs):
        uploaded["files"] = sorted(path.name for path in Path(working_dir).iterdir())
        uploaded["card"] = ModelCard.load(Path(working_dir) / "README.md")
        return types.SimpleNamespace(repo_id=repo_id)

    original_load = ModelCard.load.__func__

    def load_without_hub(cls, repo_id_or_path, *args, **kwargs):
        if not Path(repo_id_or_path).exists():
            raise EntryNotFoundError("no card on the Hub")
        return original_load(cls, repo_id_or_path, *args, **kwargs)

    fake_api = types.SimpleNamespace(create_repo=lambda repo_id, **kwargs: types.SimpleNamespace(repo_id=repo_id))
    monkeypatch.setattr(transformers.utils.hub, "hf_api", lambda: fake_api)
    monkeypatch.setattr(huggingface_hub.ModelCard, "load", classmethod(load_without_hub))
    monkeypatch.setattr(transformers.utils.hub.PushToHubMixin, "_upload_modified_files", fake_upload)

    model = hf_roformer.HfRoFormerForTokenClassification(tiny_config(num_labels=3))
    model.add_model_tags("ner")
    model.push_to_hub("someone/roformer-ner")
    card = uploaded["card"]
    assert {"config.json", "model.safetensors", "modeling_hf_roformer.py", "README.md"} <= set(uploaded["files"])
    assert card.data.library_name == "transformers" and card.data.pipeline_tag == "token-classification"
    assert set(card.data.tags) == {*MODEL_TAGS, "ner"}
