"""Saving and pushing: the `auto_map` naming every head, the card's Hub metadata and the sentence-transformers files
written next to a saved model, and models wrapped by torch (FSDP2) saved as their own class.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files.
"""

from pathlib import Path

from .model_card_hf_roformer import MODEL_TAGS, add_card_metadata, card_metadata
from .sentence_transformers_hf_roformer import write_sentence_transformers_files


# Every Auto class a checkpoint of this family supports, written to `config.json` on save so that
# `AutoModelFor*.from_pretrained(path, trust_remote_code=True)` works for each head without the package.
AUTO_MAP = {
    "AutoConfig": "configuration_hf_roformer.HfRoFormerConfig",
    "AutoModel": "modeling_hf_roformer.HfRoFormerModel",
    "AutoModelForMaskedLM": "modeling_hf_roformer.HfRoFormerForMaskedLM",
    "AutoModelForCausalLM": "modeling_hf_roformer.HfRoFormerForCausalLM",
    "AutoModelForSequenceClassification": "modeling_hf_roformer.HfRoFormerForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_hf_roformer.HfRoFormerForTokenClassification",
    "AutoModelForMultipleChoice": "modeling_hf_roformer.HfRoFormerForMultipleChoice",
    "AutoModelForQuestionAnswering": "modeling_hf_roformer.HfRoFormerForQuestionAnswering",
}


class HfRoFormerSavingMixin:
    """What every RoFormer model adds to `PreTrainedModel`'s saving and pushing (put before it in the bases)."""

    # The Hub task of this head, written to saved and pushed cards (`model_card_hf_roformer`).
    pipeline_tag: str | None = None

    def post_init(self):
        """transformers' end-of-construction step, plus the family's Hub tags (`model.add_model_tags` adds more)."""
        super().post_init()
        self.add_model_tags(list(MODEL_TAGS))

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save as any `PreTrainedModel` does, with an `auto_map` naming every head and the model's source files, so
        that `AutoModel*.from_pretrained(path, trust_remote_code=True)` works where hf_roformer is not installed, and
        a card carrying `library_name`, `pipeline_tag` and the model tags (keys an existing card lacks are added).

        A model that torch gave a class made at run time (FSDP2 makes `FSDP<class>`, defined in a torch module) is
        saved as its own class: transformers names the saved class and copies the sources from the object's class,
        which would write torch's files and a wrapper class name into the `auto_map`."""
        wrapper = type(self)
        self.__class__ = next(cls for cls in wrapper.__mro__ if not cls.__module__.startswith("torch."))
        try:
            self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **AUTO_MAP}
            result = super().save_pretrained(save_directory, *args, **kwargs)
            if kwargs.get("is_main_process", True) and Path(save_directory).is_dir():
                add_card_metadata(save_directory, self.card_metadata(), type(self).__name__)
                write_sentence_transformers_files(save_directory, self.config)
        finally:
            self.__class__ = wrapper
        return result

    def card_metadata(self) -> dict:
        """The Hub metadata of this model: `library_name`, this head's `pipeline_tag` and `model_tags`."""
        return card_metadata("transformers", self.pipeline_tag, self.model_tags)

    def _upload_modified_files(self, working_dir, *args, **kwargs):
        """transformers' upload step of `push_to_hub`, after giving the card it wrote this model's Hub metadata."""
        add_card_metadata(working_dir, self.card_metadata(), type(self).__name__)
        return super()._upload_modified_files(working_dir, *args, **kwargs)
