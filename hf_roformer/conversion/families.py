"""The original RoFormer checkpoint families, the 12 released checkpoints, and the name table from TF variables to our
parameters.

Variable names follow Google BERT's (`bert/embeddings/word_embeddings`, `bert/encoder/layer_N/...`, `cls/...`), which
is how bert4keras saves every family; kernels are stored (in, out) and are transposed into PyTorch's (out, in).
"""

from dataclasses import dataclass


FAMILIES = ("v1", "gpt", "sim", "v2")


@dataclass(frozen=True)
class ReleasedCheckpoint:
    """One of the zips Zhuiyi released: what it holds and how it converts."""

    file: str
    family: str
    layers: int
    hidden: int
    heads: int
    vocab_size: int
    tokenizer: str  # "word (jieba)" or "char"
    heads_classes: tuple[str, ...]
    description: str

    @property
    def expected_variables(self) -> int:
        """Number of TF variables of the family layout at this size (v1 and GPT without pooler, Sim with)."""
        per_layer = 6 if self.family == "v2" else 16
        total = 2 + self.layers * per_layer
        if self.family != "v2":
            total += 2 + 5  # embedding norm; MLM transform dense, transform norm and output bias
        if self.family == "sim":
            total += 2  # linear pooler
        return total


MLM_HEADS = ("HfRoFormerModel", "HfRoFormerForMaskedLM", "HfRoFormerForSequenceClassification")
LM_HEADS = ("HfRoFormerModel", "HfRoFormerForCausalLM")

RELEASED = [
    ReleasedCheckpoint(
        "chinese_roformer_L-12_H-768_A-12", "v1", 12, 768, 12, 50000, "word (jieba)", MLM_HEADS,
        "RoFormer base, word level, masked language model",
    ),
    ReleasedCheckpoint(
        "chinese_roformer_L-6_H-384_A-6", "v1", 6, 384, 6, 50000, "word (jieba)", MLM_HEADS,
        "RoFormer small, word level, masked language model",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-char_L-12_H-768_A-12", "v1", 12, 768, 12, 12000, "char", MLM_HEADS,
        "RoFormer base, char level, masked language model",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-char_L-6_H-384_A-6", "v1", 6, 384, 6, 12000, "char", MLM_HEADS,
        "RoFormer small, char level, masked language model",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-gpt-char_L-12_H-768_A-12", "gpt", 12, 768, 12, 12000, "char", LM_HEADS,
        "RoFormer-GPT, char level, left-to-right language model",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-sim-char_L-12_H-768_A-12", "sim", 12, 768, 12, 12000, "char", LM_HEADS,
        "RoFormer-Sim (SimBERTv2) base: sentence similarity and paraphrase generation",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-sim-char_L-6_H-384_A-6", "sim", 6, 384, 6, 12000, "char", LM_HEADS,
        "RoFormer-Sim (SimBERTv2) small: sentence similarity and paraphrase generation",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-sim-char-ft_L-12_H-768_A-12", "sim", 12, 768, 12, 12000, "char", LM_HEADS,
        "RoFormer-Sim base, fine-tuned for similarity",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-sim-char-ft_L-6_H-384_A-6", "sim", 6, 384, 6, 12000, "char", LM_HEADS,
        "RoFormer-Sim small, fine-tuned for similarity",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-v2-char_L-6_H-384_A-6", "v2", 6, 384, 6, 12000, "char", MLM_HEADS,
        "RoFormer-V2 small, char level, masked language model",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-v2-char_L-12_H-768_A-12", "v2", 12, 768, 12, 12000, "char", MLM_HEADS,
        "RoFormer-V2 base, char level, masked language model",
    ),
    ReleasedCheckpoint(
        "chinese_roformer-v2-char_L-24_H-1024_A-16", "v2", 24, 1024, 16, 12000, "char", MLM_HEADS,
        "RoFormer-V2 large, char level, masked language model",
    ),
]  # fmt: skip


@dataclass(frozen=True)
class Mapping:
    """One TF variable and the parameter it fills; `transpose` for dense kernels."""

    tf_name: str
    parameter: str
    transpose: bool = False


def _dense(tf_prefix: str, parameter_prefix: str, bias: bool) -> list[Mapping]:
    mappings = [Mapping(f"{tf_prefix}/kernel", f"{parameter_prefix}.weight", transpose=True)]
    if bias:
        mappings.append(Mapping(f"{tf_prefix}/bias", f"{parameter_prefix}.bias"))
    return mappings


def _norm(tf_prefix: str, parameter_prefix: str) -> list[Mapping]:
    return [
        Mapping(f"{tf_prefix}/gamma", f"{parameter_prefix}.weight"),
        Mapping(f"{tf_prefix}/beta", f"{parameter_prefix}.bias"),
    ]


def name_table(family: str, num_layers: int, has_pooler: bool, has_mapping: bool, has_mlm: bool) -> list[Mapping]:
    """Every TF variable of a checkpoint of `family` and the parameter of our model it fills."""
    v2 = family == "v2"
    bias = not v2
    table = [
        Mapping("bert/embeddings/word_embeddings", "roformer.embeddings.word_embeddings.weight"),
        Mapping("bert/embeddings/token_type_embeddings", "roformer.embeddings.token_type_embeddings.weight"),
    ]
    if not v2:
        table += _norm("bert/embeddings/LayerNorm", "roformer.embeddings.LayerNorm")
    if has_mapping:
        table += _dense("bert/encoder/embedding_hidden_mapping_in", "roformer.embeddings_project", bias)
    for i in range(num_layers):
        tf_layer, layer = f"bert/encoder/layer_{i}", f"roformer.encoder.layer.{i}"
        for name in ("query", "key", "value"):
            table += _dense(f"{tf_layer}/attention/self/{name}", f"{layer}.attention.self.{name}", bias)
        table += _dense(f"{tf_layer}/attention/output/dense", f"{layer}.attention.output.dense", bias)
        table += _dense(f"{tf_layer}/intermediate/dense", f"{layer}.intermediate.dense", bias)
        table += _dense(f"{tf_layer}/output/dense", f"{layer}.output.dense", bias)
        if not v2:
            table += _norm(f"{tf_layer}/attention/output/LayerNorm", f"{layer}.attention.output.LayerNorm")
            table += _norm(f"{tf_layer}/output/LayerNorm", f"{layer}.output.LayerNorm")
    if has_pooler:
        table += _dense("bert/pooler/dense", "roformer.pooler.dense", bias=True)
    if has_mlm and not v2:
        table += _dense("cls/predictions/transform/dense", "cls.predictions.transform.dense", bias=True)
        table += _norm("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm")
        table.append(Mapping("cls/predictions/output_bias", "cls.predictions.bias"))
    return table


# Variables that are training state, not model: reported and skipped.
TRAINING_STATE_SUFFIXES = ("/adam_m", "/adam_v", "/Adam", "/Adam_1")
TRAINING_STATE_NAMES = ("global_step", "bad_steps", "good_steps", "loss_scale", "current_loss_scale")


def is_training_state(name: str) -> bool:
    """Whether a checkpoint variable is optimizer or loop state rather than a model weight."""
    return name in TRAINING_STATE_NAMES or name.endswith(TRAINING_STATE_SUFFIXES)


# Every family but RoFormer-V2 stores the same variables (BERT's layout); V2 has no norm or bias variables.
SAME_LAYOUT_FAMILIES = ("v1", "gpt", "sim")


def has_norm_or_bias_variables(names) -> bool:
    """Whether checkpoint variables include layer-norm parameters or biases (every family but RoFormer-V2)."""
    return any(name.endswith(("/gamma", "/beta", "/bias", "output_bias")) for name in names)


def decide_family(requested: str, names, directory_name: str) -> tuple[str, str]:
    """The family of a checkpoint and how it was decided, as `(family, how)`.

    RoFormer-V2 is told by its variables. v1, GPT and Sim hold the same variables (a v1 trained with the causal or
    UniLM mask), so for them `requested="auto"` accepts only the name of a released directory (as its zip unpacks)
    and otherwise raises a `ValueError` asking for the family: converting a Sim checkpoint as v1 would silently drop
    its UniLM mask and linear pooler. An explicit family must fit the variables.
    """
    candidates = SAME_LAYOUT_FAMILIES if has_norm_or_bias_variables(names) else ("v2",)
    layout = "norm and bias variables (BERT's layout)" if candidates != ("v2",) else "no norm or bias variables"
    if requested != "auto":
        if requested not in FAMILIES:
            raise ValueError(f"unknown family {requested!r}; use one of {FAMILIES}")
        if requested not in candidates:
            raise ValueError(
                f"--family {requested} does not fit the checkpoint: its variables ({layout}) are those of "
                f"{' / '.join(candidates)}"
            )
        return requested, f"--family {requested}"
    if candidates == ("v2",):
        return "v2", "its variables: no norm or bias variables (RoFormer-V2)"
    release = next((checkpoint for checkpoint in RELEASED if checkpoint.file == directory_name), None)
    if release is not None:
        return release.family, f"the directory name: the release {release.file}"
    raise ValueError(
        f"cannot tell the family of {directory_name!r}: v1, GPT and Sim checkpoints hold the same variables and the "
        "directory is not named after a release; pass --family v1 (masked LM), --family gpt (causal LM) or "
        "--family sim (RoFormer-Sim: UniLM mask, linear pooler)"
    )
