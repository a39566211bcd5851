"""An opt-in switch: checkpoints of transformers' own RoFormer (model type `roformer`, every RoFormer on the Hub today)
loaded through the Auto classes and pipelines of this process get hf_roformer's classes.

Importing hf_roformer registers only its own model type, `hf_roformer`; a `roformer` checkpoint still loads into
transformers' `RoFormer*` classes (position table, no rope scaling). `use_for_roformer_checkpoints()` changes that for
the process, as Liger Kernel's `apply_liger_kernel_to_llama()` swaps Llama's modules: it registers, under `roformer`
in AutoConfig's mapping, a config class whose `from_dict` translates the checkpoint's config into a plain
`HfRoFormerConfig`. Every Auto class (and every pipeline, which loads through them) then picks hf_roformer's model
class for that config, loads the same weights (the unused sinusoid table is skipped), and a model saved afterwards is
an ordinary `hf_roformer` checkpoint. transformers' `RoFormer*` classes used by name, and `from_config` of a
`RoFormerConfig` object, are untouched. Tokenizers follow the checkpoint's `tokenizer_config.json` as before, with one
difference: the `RoFormerTokenizer` it names comes without transformers' warning that a text longer than
`model_max_length` "will result in indexing errors", false for hf_roformer's models (no position table).

`use_for_roformer_checkpoints(False)` switches back by registering transformers' `RoFormerConfig` and
`RoFormerTokenizer` again (the public `AutoConfig.register` and `AutoTokenizer.register`; transformers has no
unregistering).
"""

import transformers
from transformers import CONFIG_MAPPING, AutoConfig, AutoTokenizer, RoFormerConfig

from ..remote_code.configuration_hf_roformer import HfRoFormerConfig, translate_roformer_config


ROFORMER = "roformer"


class RoFormerCheckpointConfig(HfRoFormerConfig):
    """Stands for model type `roformer` in AutoConfig's mapping while routing is on. It never has instances: reading
    a `roformer` config (`from_dict`, what `AutoConfig.from_pretrained` calls) or building one
    (`AutoConfig.for_model("roformer", ...)`) gives a plain `HfRoFormerConfig`, so the model classes are hf_roformer's
    own and saved checkpoints have model type `hf_roformer`."""

    model_type = ROFORMER

    def __new__(cls, *args, **kwargs):
        return HfRoFormerConfig(*args, **kwargs)

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs):
        """The `HfRoFormerConfig` of a `roformer` config dict (translated; overrides in `kwargs` validated with it)."""
        if not isinstance(config_dict, dict):
            raise TypeError(f"`config_dict` must be a dict of configuration fields, got {type(config_dict).__name__}.")
        return HfRoFormerConfig.from_dict(translate_roformer_config(config_dict), **kwargs)


class RoFormerTokenizer(transformers.RoFormerTokenizer):
    """transformers' `RoFormerTokenizer` for the checkpoints routed to hf_roformer, without its warning that a text
    longer than `model_max_length` "will result in indexing errors": the routed models run at any length. It bears
    transformers' class name, so that `AutoTokenizer` picks it for the `tokenizer_class` a checkpoint names (registered
    names come first) and a tokenizer saved from it names transformers' class, loadable without hf_roformer."""

    def __init__(self, *args, **kwargs):
        # Declared, though it only passes on: transformers builds a class that defines its own `__init__` through it
        # (the jieba pre-tokenizer is set there), and one that does not from tokenizer.json alone (without jieba).
        super().__init__(*args, **kwargs)

    def _eventual_warn_about_too_long_sequence(self, ids, max_length, verbose) -> None:
        """No warning: positions are rotations, not rows of a table (see `HfRoFormerTokenizer`)."""


def use_for_roformer_checkpoints(enabled: bool = True) -> None:
    """Route checkpoints of model type `roformer` loaded through transformers' Auto classes and pipelines, in this
    process, to hf_roformer's classes (with their config translated), or, with `enabled=False`, back to
    transformers' `RoFormer*` classes. Never done on import; spawned processes start without it.

    Example:

    ```python
    >>> import hf_roformer
    >>> from transformers import AutoModelForMaskedLM
    >>> hf_roformer.use_for_roformer_checkpoints()
    >>> model = AutoModelForMaskedLM.from_pretrained("junnyu/roformer_chinese_base")  # HfRoFormerForMaskedLM
    ```
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"`enabled` must be True or False, got {enabled!r}.")
    AutoConfig.register(ROFORMER, RoFormerCheckpointConfig if enabled else RoFormerConfig, exist_ok=True)
    if enabled:
        AutoTokenizer.register(RoFormerCheckpointConfig, tokenizer_class=RoFormerTokenizer, exist_ok=True)
    else:
        AutoTokenizer.register(RoFormerConfig, tokenizer_class=transformers.RoFormerTokenizer, exist_ok=True)


def routes_roformer_checkpoints() -> bool:
    """Whether `roformer` checkpoints loaded through the Auto classes get hf_roformer's classes in this process."""
    return CONFIG_MAPPING[ROFORMER] is RoFormerCheckpointConfig


__all__ = ["RoFormerCheckpointConfig", "routes_roformer_checkpoints", "use_for_roformer_checkpoints"]
