"""Every difference between the library releases hf_roformer supports, and every private name of another library it
uses, in one place: each entry says which releases it serves, so that a new release that changes one of them is met
here (and by `tests/test_releases.py`), not found by a user.

Supported: transformers 5.17 to the newest 5.x (`setup.cfg`; CI tests the oldest and the newest at run time), torch
2.6 and newer, tokenizers 0.21 and newer, accelerate 1.15 and newer.

Three kinds of transformers' underscore names stay where transformers' own models have them, because transformers'
model template is written that way and model code is read beside it: `config._attn_implementation` (the attention
backend, which every transformers model reads), the class attributes a model declares (`_no_split_modules`,
`_tied_weights_keys`, ...), and the hooks a subclass overrides, listed in `OVERRIDDEN_HOOKS`. `tests/test_releases.py`
checks that each listed hook exists in the installed release and that no other private name of another library is
used outside this module.

Hub-bound: copied next to saved checkpoints; imports only `torch`, `transformers` and sibling Hub-bound files
(accelerate, tokenizers and transformers' modules beyond its configuration inside the functions that need them, so that
the configuration, which imports this module, stays light to import).
"""

import contextlib
import functools
import json
import re

import torch
import transformers


def release(version: str) -> tuple[int, int]:
    """`(major, minor)` of a version string such as "5.24.0" or "5.25.0.dev0"."""
    match = re.match(r"(\d+)\.(\d+)", version)
    if match is None:
        raise ValueError(f"Cannot read a release from the version string {version!r}.")
    return int(match.group(1)), int(match.group(2))


TRANSFORMERS_RELEASE = release(transformers.__version__)

# The hooks of transformers' classes that hf_roformer's subclasses override, as (module, class, hook): the classes'
# underscore methods that transformers calls and documents for subclasses. Releases: 5.17 to 5.24 (checked against
# each installed release by tests/test_releases.py, so a release that renames one turns CI red).
OVERRIDDEN_HOOKS = (
    ("transformers.configuration_utils", "PreTrainedConfig", "_dict_from_json_file"),  # HfRoFormerConfig
    ("transformers.modeling_utils", "PreTrainedModel", "_init_weights"),  # HfRoFormerPreTrainedModel
    ("transformers.utils.hub", "PushToHubMixin", "_upload_modified_files"),  # HfRoFormerPreTrainedModel
    ("transformers.generation.utils", "GenerationMixin", "_supports_default_dynamic_cache"),  # linear attention
    ("transformers.generation.utils", "GenerationMixin", "_update_model_kwargs_for_generation"),  # UniLM segments
    ("transformers.tokenization_utils_tokenizers", "TokenizersBackend", "_encode_plus"),  # HfRoFormerTokenizer
    ("transformers.tokenization_utils_tokenizers", "TokenizersBackend", "_decode"),
    ("transformers.tokenization_utils_tokenizers", "TokenizersBackend", "_save_pretrained"),
    ("transformers.tokenization_utils_base", "PreTrainedTokenizerBase", "_eventual_warn_about_too_long_sequence"),
    ("transformers.trainer", "Trainer", "_get_eval_sampler"),  # training.run.batching.LengthAwareTrainer
)

# --- transformers: configuration files ------------------------------------------------------------------------------


def decode_special_floats(config_class, config_dict: dict) -> dict:
    """`config_dict` read from JSON with the floats transformers writes as objects (`{"__float__": "Infinity"}`)
    turned back into floats, as `PreTrainedConfig._decode_special_floats` does (transformers 5.17 and newer)."""
    return config_class._decode_special_floats(config_dict)


# --- transformers: the key/value cache's name ------------------------------------------------------------------------
# 5.24 renamed `past_key_values` to `cache`: `generate` and `EncoderDecoderModel` pass the cache to a model's forward
# as `cache=`, model outputs hold it in their field `cache` (reading `past_key_values` warns), and the Trainer leaves
# the output `cache` out of evaluation logits. 5.17-5.23 use `past_key_values` everywhere. A model that reads only
# `past_key_values` gets no cache from `generate` on 5.24 and decodes every step as if nothing came before it.
CACHE_FIELD = "cache" if TRANSFORMERS_RELEASE >= (5, 24) else "past_key_values"
# The other name, which forwards accept too: users of 5.17-5.23 (and transformers 5.17-5.23 itself) write
# `past_key_values=`; on 5.24 and newer it is the deprecated spelling transformers' own models still accept.
LEGACY_CACHE_ARGUMENT = "past_key_values"


def accepts_either_cache_name(forward):
    """Decorate a forward whose parameter is `cache` so that it also takes the cache as `past_key_values` (the name
    transformers 5.17-5.23 pass it under, and the name users of those releases write), on every release; both at once
    is an error naming them."""

    @functools.wraps(forward)
    def forward_with_either_name(self, *args, **kwargs):
        if LEGACY_CACHE_ARGUMENT in kwargs:
            legacy = kwargs.pop(LEGACY_CACHE_ARGUMENT)
            if kwargs.get("cache") is not None and legacy is not None:
                raise ValueError("Pass the key/value cache once, as `cache` or as `past_key_values`, not both.")
            if kwargs.get("cache") is None:
                kwargs["cache"] = legacy
        return forward(self, *args, **kwargs)

    return forward_with_either_name


def cache_output(cache) -> dict:
    """The keyword argument that puts `cache` into a transformers model output on this release."""
    return {CACHE_FIELD: cache}


def output_cache(outputs):
    """The cache a transformers model output holds (None if none), on this release, without deprecation warnings."""
    return getattr(outputs, CACHE_FIELD, None)


def causal_mask(config, inputs_embeds, attention_mask, cache, **kwargs):
    """transformers' `create_causal_mask`. Its fourth parameter, the cache, is named `past_key_values` on 5.17-5.23
    and `cache` on 5.24 and newer (the old name warns): passed by position, which every release takes."""
    from transformers.masking_utils import create_causal_mask

    return create_causal_mask(config, inputs_embeds, attention_mask, cache, **kwargs)


# --- torch -----------------------------------------------------------------------------------------------------------


def traces_graph() -> bool:
    """Whether this forward is being recorded into a graph rather than run: `torch.compile`, `torch.export` (and the
    dynamo ONNX exporter) or the TorchScript tracer (`torch.onnx.export(..., dynamo=False)`, OpenVINO's
    `convert_model`; torch 2.6 and newer, where TorchScript is deprecated but still traces). A recorded forward reads
    no values on the host (the graph would keep the example's answer) and builds no complex numbers (neither
    compilers nor ONNX take them)."""
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def assert_on_device(condition: torch.Tensor, message: str) -> None:
    """Fail asynchronously on the device where `condition` (a one-element bool tensor) is False, without waiting for
    it: `torch._assert_async` (torch 2.6 and newer; no public equivalent)."""
    torch._assert_async(condition, message)


def is_view_of_another_tensor(tensor: torch.Tensor) -> bool:
    """Whether `tensor` is a view of another tensor's storage: `Tensor._base` (every torch release; no public
    equivalent)."""
    return tensor._base is not None


def child_modules(module: torch.nn.Module) -> dict:
    """`module`'s direct submodules by attribute name, read as a dict: `Module._modules` (every torch release;
    `named_children()` builds a generator and `getattr` goes through `Module.__getattr__`, each several times slower,
    for checks that run per layer and forward)."""
    return module._modules


def own_parameters(module: torch.nn.Module) -> dict:
    """`module`'s own parameters by attribute name (None for an absent bias), read as a dict: `Module._parameters`
    (every torch release; see `child_modules`)."""
    return module._parameters


def own_buffers(module: torch.nn.Module) -> dict:
    """`module`'s own buffers by attribute name, read as a dict: `Module._buffers` (every torch release; see
    `child_modules`)."""
    return module._buffers


def tensor_version(tensor: torch.Tensor) -> int:
    """How many times `tensor`'s memory was written in place (optimizer steps, `load_state_dict`, `copy_`): its
    version counter, `Tensor._version` (every torch release; no public equivalent)."""
    return tensor._version


def softmax_into(scores: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension written into `out`, which may be `scores` itself: `aten._softmax.out` (torch
    2.6 and newer; `torch.softmax` has no `out` argument)."""
    return torch.ops.aten._softmax.out(scores, -1, False, out=out)


@contextlib.contextmanager
def example_sizes_of_one_stay_symbolic():
    """Within the block, `torch.export` keeps a dynamic axis whose example size is 0 or 1 symbolic instead of
    specializing the graph to it (torch's "0/1 specialization", which makes even `nn.Linear` refuse an example of one
    row marked dynamic): the experimental `torch.fx.experimental._config.backed_size_oblivious`, which
    `torch.onnx.export(..., dynamo=True)` sets for its own `torch.export` call (torch 2.13 tested; releases without
    the flag: no change)."""
    from torch.fx.experimental import _config as shape_config

    if not hasattr(shape_config, "backed_size_oblivious"):
        yield
        return
    with shape_config.patch(backed_size_oblivious=True):
        yield


# --- tokenizers ------------------------------------------------------------------------------------------------------


def encoding_state_fields() -> tuple[str, ...]:
    """The fields of a `tokenizers.Encoding`'s pickle state (the JSON of the Rust struct): `Encoding.__getstate__`
    (tokenizers 0.21 and newer; tokenizers has no constructor for an `Encoding` with given contents)."""
    from tokenizers import Encoding

    return tuple(json.loads(Encoding().__getstate__()))


def encoding_from_state(state: str):
    """A `tokenizers.Encoding` holding the JSON pickle `state` (fields as `encoding_state_fields()`):
    `Encoding.__setstate__` (tokenizers 0.21 and newer)."""
    from tokenizers import Encoding

    encoding = Encoding()
    encoding.__setstate__(state.encode())
    return encoding


def with_tokenizers_pipeline(tokenizer, pipeline):
    """A view of the transformers `TokenizersBackend` `tokenizer` (same attributes, shared objects) whose `tokenizers`
    pipeline is `pipeline`: transformers' encoding code then runs unchanged on another pipeline, without touching
    `tokenizer`. The pipeline is the attribute `_tokenizer` (transformers 5.0 and newer)."""
    view = object.__new__(type(tokenizer))
    view.__dict__.update(tokenizer.__dict__)
    view.__dict__["_tokenizer"] = pipeline
    return view


def backend_encode_plus(tokenizer, text, text_pair, **kwargs):
    """`TokenizersBackend._encode_plus`, the encoding step behind `tokenizer(...)`, run on `tokenizer` (a view from
    `with_tokenizers_pipeline`) with the arguments of `__call__` (transformers 5.0 and newer)."""
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    return TokenizersBackend._encode_plus(tokenizer, text, text_pair, **kwargs)


# --- accelerate and transformers' training integrations -----------------------------------------------------------


def mirror_distributed_type(partial_state_class, distributed_type) -> None:
    """Set `distributed_type` in the state all of accelerate's `PartialState` objects share, as `AcceleratorState`
    holds it: `PartialState._shared_state` (accelerate 1.15 and newer), passed in so that this module needs no
    accelerate."""
    partial_state_class._shared_state["distributed_type"] = distributed_type


def keep_used_weight_conversions(model: torch.nn.Module) -> None:
    """Keep, of the key conversions `from_pretrained` recorded on `model` for saving, those that matched a weight.
    transformers' ZeRO-3 loading keeps all of them (its other loading paths keep the used ones), so the saved model
    would name every layer norm's weights by the legacy `gamma`/`beta`: `PreTrainedModel._weight_conversions`
    (transformers 5.17 and newer)."""
    conversions = getattr(model, "_weight_conversions", None)
    if conversions:
        model._weight_conversions = [conversion for conversion in conversions if conversion.was_used()]


def active_deepspeed_config(deepspeed_integration):
    """The DeepSpeed configuration transformers' `from_pretrained` partitions weights under (None if none), from the
    module `transformers.integrations.deepspeed`: its `_hf_deepspeed_config_weak_ref` (transformers 5.17 and newer;
    it has a setter and an unsetter, no getter)."""
    reference = deepspeed_integration._hf_deepspeed_config_weak_ref
    return reference() if reference else None


# --- Python's own exit ------------------------------------------------------------------------------------------------


def exit_without_teardown(status: int):
    """End the process with `status` as Python's exit does (non-daemon threads joined, after the hooks such as thread
    pools' that let them finish; `atexit` handlers run; output flushed), but without the interpreter's teardown. A
    process that ends while one of gloo's worker threads is still completing a collective (and a sharded model keeps
    the group's workers alive past `destroy_process_group`) can be aborted during that teardown, after its work is
    done ("terminate called without an active exception", torch 2.13; reproduced by tests/test_cli.py). CPython 3.10
    to 3.14: `threading._shutdown` and `atexit._run_exitfuncs` are the steps its finalization takes before the
    teardown. Call from the main thread; never returns."""
    import atexit
    import os
    import sys
    import threading

    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


__all__ = [
    "CACHE_FIELD",
    "LEGACY_CACHE_ARGUMENT",
    "OVERRIDDEN_HOOKS",
    "TRANSFORMERS_RELEASE",
    "accepts_either_cache_name",
    "active_deepspeed_config",
    "assert_on_device",
    "backend_encode_plus",
    "cache_output",
    "causal_mask",
    "child_modules",
    "decode_special_floats",
    "encoding_from_state",
    "encoding_state_fields",
    "example_sizes_of_one_stay_symbolic",
    "exit_without_teardown",
    "is_view_of_another_tensor",
    "keep_used_weight_conversions",
    "mirror_distributed_type",
    "output_cache",
    "own_buffers",
    "own_parameters",
    "release",
    "softmax_into",
    "tensor_version",
    "with_tokenizers_pipeline",
]
