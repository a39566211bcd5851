"""hf_roformer's classes in transformers' Auto classes, registered without making `import hf_roformer` import the
models.

The config, the model classes (and with them transformers' `modeling_utils`, which imports `torch._dynamo`, the
quantizers and their libraries: most of a model's import time) and the tokenizer are each registered the moment their
Auto module is imported: transformers' auto modules (`transformers.models.auto.configuration_auto` for `AutoConfig`
and `CONFIG_MAPPING`, `modeling_auto` for every `AutoModel*`, `MODEL_MAPPING` and the pipelines; `tokenization_auto`
for `AutoTokenizer`) are the only way to reach those mappings, so nothing can look a class up before it is
registered. Where an Auto module is imported already, the registration happens at once.

Written by hand because no library offers it: a post-import hook is a meta path finder that hands the module's own
loader a callback to run after the module's code (the pattern of `wrapt.when_imported`).
"""

import functools
import importlib
import importlib.abc
import sys
import threading
from collections.abc import Callable


CONFIGURATION_AUTO = "transformers.models.auto.configuration_auto"
MODELING_AUTO = "transformers.models.auto.modeling_auto"
TOKENIZATION_AUTO = "transformers.models.auto.tokenization_auto"
CONFIGURATION = "hf_roformer.remote_code.configuration_hf_roformer"
MODELING = "hf_roformer.remote_code.modeling_hf_roformer"
TOKENIZATION = "hf_roformer.remote_code.tokenization_hf_roformer"


def register_config() -> None:
    """`AutoConfig` maps model type `hf_roformer` to `HfRoFormerConfig`."""
    from transformers import AutoConfig

    from .remote_code.configuration_hf_roformer import HfRoFormerConfig

    AutoConfig.register(HfRoFormerConfig.model_type, HfRoFormerConfig)


def auto_model_classes() -> dict:
    """Each Auto model class -> the hf_roformer head it gives for an `HfRoFormerConfig`."""
    import transformers

    from .remote_code import modeling_hf_roformer as modeling

    return {
        transformers.AutoModel: modeling.HfRoFormerModel,
        transformers.AutoModelForMaskedLM: modeling.HfRoFormerForMaskedLM,
        transformers.AutoModelForCausalLM: modeling.HfRoFormerForCausalLM,
        transformers.AutoModelForSequenceClassification: modeling.HfRoFormerForSequenceClassification,
        transformers.AutoModelForTokenClassification: modeling.HfRoFormerForTokenClassification,
        transformers.AutoModelForMultipleChoice: modeling.HfRoFormerForMultipleChoice,
        transformers.AutoModelForQuestionAnswering: modeling.HfRoFormerForQuestionAnswering,
    }


def register_models() -> None:
    """Every Auto model class maps `HfRoFormerConfig` to its hf_roformer head."""
    from .remote_code.configuration_hf_roformer import HfRoFormerConfig

    for auto_class, model_class in auto_model_classes().items():
        auto_class.register(HfRoFormerConfig, model_class)


def register_tokenizer() -> None:
    """`AutoTokenizer` maps `HfRoFormerConfig` to `HfRoFormerTokenizer`."""
    from transformers import AutoTokenizer

    from .remote_code.configuration_hf_roformer import HfRoFormerConfig
    from .remote_code.tokenization_hf_roformer import HfRoFormerTokenizer

    AutoTokenizer.register(HfRoFormerConfig, tokenizer_class=HfRoFormerTokenizer)


class _RunAfterLoading(importlib.abc.Loader):
    """A module's own loader, with `callback()` run once the module's code has run."""

    def __init__(self, loader, callback: Callable[[], None]):
        self.loader, self.callback = loader, callback

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.callback()

    def __getattr__(self, name):  # get_source, get_resource_reader, ...: the module's own loader answers
        return getattr(self.loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for a module it waits for, it asks the finders after it and wraps the loader found."""

    def __init__(self):
        self.waiting: dict[str, list[Callable[[], None]]] = {}
        self.lock = threading.Lock()

    def find_spec(self, name, path=None, target=None):
        with self.lock:
            callbacks = self.waiting.pop(name, None)
        if callbacks is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _RunAfterLoading(spec.loader, lambda: [callback() for callback in callbacks])
                return spec
        with self.lock:
            self.waiting.setdefault(name, []).extend(callbacks)  # not found here: whoever finds it is waited for
        return None

    def wait_for(self, name: str, callback: Callable[[], None]) -> None:
        """Run `callback()` right after module `name` (not imported yet) has run its code."""
        with self.lock:
            self.waiting.setdefault(name, []).append(callback)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)


_AFTER_IMPORT = _AfterImport()


def register_when_imported(auto_module: str, own_module: str, register: Callable[[], None]) -> None:
    """Run `register()` once transformers' `auto_module` and hf_roformer's `own_module` (which defines what is
    registered) have both been imported, right after the later of the two: `own_module` is imported as soon as
    `auto_module` is, unless it is being imported already (transformers' modules imported by `own_module` itself import
    `auto_module`; registering in the middle of that would read a half-made module)."""
    done: set[str] = set()

    def finished(name: str) -> None:
        done.add(name)
        if done == {auto_module, own_module}:
            register()
        elif name == auto_module and own_module not in sys.modules:
            importlib.import_module(own_module)  # its end registers

    pending = [name for name in (auto_module, own_module) if name not in sys.modules]
    done.update(name for name in (auto_module, own_module) if name not in pending)
    for name in pending:
        _AFTER_IMPORT.wait_for(name, functools.partial(finished, name))
    if not pending:
        register()
    elif pending == [own_module]:  # transformers' Auto classes are in use already: import ours now
        importlib.import_module(own_module)


def register_with_auto_classes() -> None:
    """The config, the models and the tokenizer, each as soon as its Auto class can be reached."""
    register_when_imported(CONFIGURATION_AUTO, CONFIGURATION, register_config)
    register_when_imported(MODELING_AUTO, MODELING, register_models)
    register_when_imported(TOKENIZATION_AUTO, TOKENIZATION, register_tokenizer)


__all__ = ["auto_model_classes", "register_when_imported", "register_with_auto_classes"]
