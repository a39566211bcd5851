"""hf_roformer: the RoFormer model family (rotary position embedding) as a transformers plugin.

Importing the package registers the `hf_roformer` model type with transformers' Auto classes, so
`AutoConfig`, `AutoModel` and every `AutoModelFor*` head below load hf_roformer checkpoints by name. Checkpoints of
transformers' own RoFormer (model type `roformer`) keep loading into transformers' classes through the Auto classes
unless `use_for_roformer_checkpoints()` is called (see `integrations/roformer_checkpoints.py`).

The import itself is light: the config, the models and the tokenizer are registered when transformers' Auto modules
are first imported (`auto_registration.py`), and the names below are imported when first used, so `import hf_roformer`
imports neither torch nor transformers itself.

Layout: `remote_code/` holds the code that travels with a checkpoint (config, models, layers, attention, tokenizer:
copied next to every saved model and tokenizer so they load with `trust_remote_code=True` without this package; it
imports only torch, transformers and its own files). Everything else builds on it and stays here: `training/`,
`conversion/`, `integrations/` (export, serving, transformers' RoFormer checkpoints), `pretrained/`, `apps/`, `utils/`.
"""

import importlib

from .auto_registration import register_with_auto_classes


__version__ = "0.1.0"

# Public name -> the module that defines it, imported on first use.
_LAZY_NAMES = {
    "export_onnx": ".integrations.export",
    "export_program": ".integrations.export",
    "routes_roformer_checkpoints": ".integrations.roformer_checkpoints",
    "use_for_roformer_checkpoints": ".integrations.roformer_checkpoints",
    "pretrained_checkpoint": ".pretrained",
    "HfRoFormerConfig": ".remote_code.configuration_hf_roformer",
    "HfRoFormerForGlobalPointer": ".remote_code.global_pointer_hf_roformer",
    "HfRoFormerLinearAttentionCache": ".remote_code.linear_attention_hf_roformer",
    **dict.fromkeys(
        (
            "HfRoFormerForCausalLM",
            "HfRoFormerForMaskedLM",
            "HfRoFormerForMultipleChoice",
            "HfRoFormerForQuestionAnswering",
            "HfRoFormerForSequenceClassification",
            "HfRoFormerForTokenClassification",
            "HfRoFormerModel",
            "HfRoFormerPreTrainedModel",
        ),
        ".remote_code.modeling_hf_roformer",
    ),
    "HfRoFormerRotaryEmbedding": ".remote_code.rotary_hf_roformer",
    "apply_rotary_pos_emb": ".remote_code.rotary_hf_roformer",
    "HfRoFormerTokenizer": ".remote_code.tokenization_hf_roformer",
}
# transformers' Auto classes, which the package has always let one reach as `hf_roformer.AutoModel` and so on.
_TRANSFORMERS_NAMES = (
    "AutoConfig",
    "AutoModel",
    "AutoModelForCausalLM",
    "AutoModelForMaskedLM",
    "AutoModelForMultipleChoice",
    "AutoModelForQuestionAnswering",
    "AutoModelForSequenceClassification",
    "AutoModelForTokenClassification",
    "AutoTokenizer",
)

register_with_auto_classes()


def __getattr__(name: str):
    """The public names of `_LAZY_NAMES`, imported on first use; `AUTO_MODEL_CLASSES` (each Auto model class -> its
    hf_roformer head); transformers' Auto classes (`_TRANSFORMERS_NAMES`)."""
    if name == "AUTO_MODEL_CLASSES":
        from .auto_registration import auto_model_classes

        value = auto_model_classes()
    elif name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name], __name__), name)
    elif name in _TRANSFORMERS_NAMES:
        import transformers

        value = getattr(transformers, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "AUTO_MODEL_CLASSES",
    "HfRoFormerConfig",
    "HfRoFormerForCausalLM",
    "HfRoFormerForGlobalPointer",
    "HfRoFormerForMaskedLM",
    "HfRoFormerForMultipleChoice",
    "HfRoFormerForQuestionAnswering",
    "HfRoFormerForSequenceClassification",
    "HfRoFormerForTokenClassification",
    "HfRoFormerLinearAttentionCache",
    "HfRoFormerModel",
    "HfRoFormerPreTrainedModel",
    "HfRoFormerRotaryEmbedding",
    "HfRoFormerTokenizer",
    "apply_rotary_pos_emb",
    "export_onnx",
    "export_program",
    "pretrained_checkpoint",
    "routes_roformer_checkpoints",
    "use_for_roformer_checkpoints",
]
