"""A saved model with a pooler in the layout vLLM's pooling runner serves with that pooler: sentence-transformers
modules for [CLS] pooling followed by a Dense layer that holds the pooler's weights.

vLLM's Transformers backend pools the last hidden state itself (CLS or mean) and never runs a model's own pooler, but
it applies the Dense layers a sentence-transformers `modules.json` lists after the pooling. RoFormer-Sim's sentence
vector, its linear pooler on the [CLS] state, is then what vLLM returns (normalized), and sentence-transformers reads
the same directory to the same vector. The layout is written with sentence-transformers' own modules; the pooler's
weights are copied into the Dense layer, since vLLM reads them only from there (see docs/serving.md).
"""

from pathlib import Path

import torch


POOLER_ACTIVATIONS = {"linear": torch.nn.Identity, "tanh": torch.nn.Tanh}


def save_with_dense_pooler(model_directory: str | Path, output_directory: str | Path) -> Path:
    """Write `output_directory`: the encoder of the saved model in `model_directory` (any head; the encoder and its
    tokenizer are kept, a task head is not), then [CLS] pooling and a Dense layer equal to its pooler.

    Raises a `ValueError` when the model has no pooler (`pooler_activation` is None): vLLM's own CLS or mean pooling
    then already gives its sentence vector, and the directory is served as it is.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling, Transformer

    transformer = Transformer(str(model_directory))
    encoder = transformer.auto_model
    activation = getattr(encoder.config, "pooler_activation", None)
    if getattr(encoder, "pooler", None) is None or activation not in POOLER_ACTIVATIONS:
        raise ValueError(
            f"The model in {model_directory} has no pooler (`pooler_activation` is {activation!r}); vLLM's CLS or mean "
            "pooling already gives its sentence vector: serve the directory as it is."
        )
    pooler = encoder.pooler.dense
    dense = Dense(
        pooler.in_features,
        pooler.out_features,
        bias=True,
        activation_function=POOLER_ACTIVATIONS[activation](),
        init_weight=pooler.weight.detach().clone(),
        init_bias=pooler.bias.detach().clone(),
    )
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="cls")
    SentenceTransformer(modules=[transformer, pooling, dense]).save(str(output_directory))
    return Path(output_directory)


__all__ = ["save_with_dense_pooler"]
