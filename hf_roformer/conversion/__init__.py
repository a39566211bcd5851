"""Conversion of the original RoFormer checkpoints (TF1) and transformers-format ones into hf_roformer."""

from .convert import ConversionReport, convert_checkpoint, convert_tf_checkpoint, convert_transformers_roformer
from .errors import ConversionError
from .tf_checkpoint import CheckpointError, TFCheckpoint


__all__ = [
    "CheckpointError",
    "ConversionError",
    "ConversionReport",
    "TFCheckpoint",
    "convert_checkpoint",
    "convert_tf_checkpoint",
    "convert_transformers_roformer",
]
