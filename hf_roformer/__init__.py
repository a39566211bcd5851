"""hf_roformer: the RoFormer model family (rotary position embedding) as a transformers plugin.

Importing the package registers the `hf_roformer` model type with transformers' Auto classes, so
`AutoConfig`, `AutoModel` and every `AutoModelFor*` head below load hf_roformer checkpoints by name. Checkpoints of
transformers' own RoFormer (model type `roformer`) keep loading into transformers' classes through the Auto classes
unless `use_for_roformer_checkpoints()` is called (see `integrations/roformer_checkpoints.py`).

Layout: `remote_code/` holds the code that travels with a checkpoint (config, models, layers, attention, tokenizer:
copied next to every saved model and tokenizer so they load with `trust_remote_code=True` without this package; it
imports only torch, transformers and its own files). Everything else builds on it and stays here: `training/`,
`conversion/`, `integrations/` (export, serving, transformers' RoFormer checkpoints), `pretrained/`, `apps/`, `utils/`.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
)

from .integrations.export import export_onnx, export_program
from .integrations.roformer_checkpoints import routes_roformer_checkpoints, use_for_roformer_checkpoints
from .pretrained import pretrained_checkpoint
from .remote_code.configuration_hf_roformer import HfRoFormerConfig
from .remote_code.global_pointer_hf_roformer import HfRoFormerForGlobalPointer
from .remote_code.linear_attention_hf_roformer import HfRoFormerLinearAttentionCache
from .remote_code.modeling_hf_roformer import (
    HfRoFormerForCausalLM,
    HfRoFormerForMaskedLM,
    HfRoFormerForMultipleChoice,
    HfRoFormerForQuestionAnswering,
    HfRoFormerForSequenceClassification,
    HfRoFormerForTokenClassification,
    HfRoFormerModel,
    HfRoFormerPreTrainedModel,
)
from .remote_code.rotary_hf_roformer import HfRoFormerRotaryEmbedding, apply_rotary_pos_emb
from .remote_code.tokenization_hf_roformer import HfRoFormerTokenizer


__version__ = "0.1.0"

AUTO_MODEL_CLASSES = {
    AutoModel: HfRoFormerModel,
    AutoModelForMaskedLM: HfRoFormerForMaskedLM,
    AutoModelForCausalLM: HfRoFormerForCausalLM,
    AutoModelForSequenceClassification: HfRoFormerForSequenceClassification,
    AutoModelForTokenClassification: HfRoFormerForTokenClassification,
    AutoModelForMultipleChoice: HfRoFormerForMultipleChoice,
    AutoModelForQuestionAnswering: HfRoFormerForQuestionAnswering,
}

AutoConfig.register(HfRoFormerConfig.model_type, HfRoFormerConfig)
for _auto_class, _model_class in AUTO_MODEL_CLASSES.items():
    _auto_class.register(HfRoFormerConfig, _model_class)
AutoTokenizer.register(HfRoFormerConfig, tokenizer_class=HfRoFormerTokenizer)

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
