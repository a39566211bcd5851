"""sentence-transformers module files for saved RoFormer models with a pooler (RoFormer-Sim above all).

`SentenceTransformer(dir)` then returns what the original computes as the sentence vector: the [CLS] hidden state
through the model's pooler (RoFormer-Sim's is linear), and `model.similarity` its cosine similarity, which is how
roformer-sim compares sentences (vectors normalized, then dot products). Without these files sentence-transformers
would mean-pool the token states, a different vector.

The sentence-transformers `Transformer` module returns the model's own `pooler_output` (its `modality_config`,
sentence-transformers >= 5.4), so the pooler weights are stored once, in the model, rather than copied into a `Dense`
module that could drift from them.

Hub-bound: copied next to saved checkpoints; imports only the standard library.
"""

import json
import os


TRANSFORMER_MODULE = "sentence_transformers.base.modules.transformer.Transformer"
MODULE_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def sentence_transformers_files(config) -> dict[str, dict | list]:
    """The contents of the module files for a model whose pooler gives the sentence vector."""
    return {
        "modules.json": [{"idx": 0, "name": "0", "path": "", "type": TRANSFORMER_MODULE}],
        "sentence_bert_config.json": {
            "transformer_task": "feature-extraction",
            "modality_config": {"text": {"method": "forward", "method_output_name": "pooler_output"}},
            "module_output_name": "sentence_embedding",
        },
        "config_sentence_transformers.json": {
            "model_type": "SentenceTransformer",
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    }


def write_sentence_transformers_files(save_directory: str | os.PathLike, config) -> list[str]:
    """Write the sentence-transformers module files next to a saved model when its config has a pooler
    (`pooler_activation`); nothing otherwise. Returns the paths written."""
    if getattr(config, "pooler_activation", None) is None:
        return []
    paths = []
    for name, content in sentence_transformers_files(config).items():
        path = os.path.join(save_directory, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(content, indent=2) + "\n")
        paths.append(path)
    return paths


__all__ = ["MODULE_FILES", "sentence_transformers_files", "write_sentence_transformers_files"]
