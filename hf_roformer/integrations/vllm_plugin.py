"""vLLM's plugin entry point (`vllm.general_plugins`, declared in setup.cfg): with hf_roformer installed in vLLM's
environment, every vLLM process registers hf_roformer's native models (`vllm_model`) for the architectures saved
checkpoints name, and the package's config and tokenizer with transformers' Auto classes, so that
`vllm serve`-style servers load hf_roformer checkpoints without `--trust-remote-code`.

vLLM calls `register()` once in each of its processes, possibly more than once: it only adds names (lazily, as
"module:Class" strings, so vLLM imports the model where it builds it). Where the package is not importable, vLLM skips
the plugin and the Transformers backend serves a checkpoint's remote code as before.
"""

# The architectures a saved hf_roformer checkpoint names, and the native model serving each (the causal LM under the
# generate runner; the others under the pooling runner).
NATIVE_MODELS = {
    "HfRoFormerModel": "hf_roformer.integrations.vllm_model:HfRoFormerForEmbedding",
    "HfRoFormerForMaskedLM": "hf_roformer.integrations.vllm_model:HfRoFormerForEmbedding",
    "HfRoFormerForSequenceClassification": "hf_roformer.integrations.vllm_model:HfRoFormerForClassification",
    "HfRoFormerForTokenClassification": "hf_roformer.integrations.vllm_model:HfRoFormerForTokenClassificationVllm",
    "HfRoFormerForCausalLM": "hf_roformer.integrations.vllm_model:HfRoFormerForCausalLMVllm",
}


def register() -> None:
    """Register the native models with vLLM's `ModelRegistry` and hf_roformer's classes with transformers."""
    from vllm import ModelRegistry

    import hf_roformer  # noqa: F401  (registers the config and tokenizer with the Auto classes)

    supported = set(ModelRegistry.get_supported_archs())
    for architecture, model in NATIVE_MODELS.items():
        if architecture not in supported:
            ModelRegistry.register_model(architecture, model)


__all__ = ["NATIVE_MODELS", "register"]
