"""Convert original RoFormer checkpoints (TF1 zips) and transformers-format RoFormer directories into hf_roformer ones.

Checked before any work: the output may be written (an existing one only with `force=True`), `bert_config.json` has
the required keys with values of the right types, `vocab.txt` exists, holds the special tokens and one line per
embedding row, the checkpoint index is intact (block checksums, every tensor inside its data file), the family is
known (given, or certain from the variables or a release's directory name), the variables are exactly the family's,
and every tensor's shape is the one the config describes (compared on a model built without memory, so an absurd
config allocates nothing). Then every tensor is read and its checksum verified, every parameter filled exactly once
(training state such as `global_step` and Adam slots is reported and skipped), and the output is written to a staging
directory renamed into place (`output.write_atomically`). Any problem is a `ConversionError` or `CheckpointError`
naming the file, tensors or values concerned, and nothing is written.
"""

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import AutoModel, GenerationConfig

from ..remote_code.configuration_hf_roformer import HfRoFormerConfig
from ..remote_code.modeling_hf_roformer import HfRoFormerForCausalLM, HfRoFormerForMaskedLM
from ..remote_code.tokenization_hf_roformer import HfRoFormerTokenizer, check_special_tokens, load_vocab
from ..utils.logs import transformers_warnings_off
from ..utils.output_dirs import file_sizes
from .errors import ConversionError
from .families import decide_family, is_training_state, name_table
from .model_card import card_for_conversion
from .output import check_free_space, prepare_output, write_atomically
from .report import REPORT_FILE, ConversionReport
from .source import EMBEDDINGS, check_layer_count, check_vocabulary, read_bert_config
from .tf_checkpoint import TFCheckpoint


RELEASE_LAYER_NORM_EPS = 1e-12  # bert4keras <= 0.11.3, which trained the released checkpoints: every norm
LM_HEAD_LAYER_NORM_EPS = 1e-12  # the MLM head's norm, in every bert4keras version
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
OUTPUT_OVERHEAD_BYTES = 4 << 20  # config, code, tokenizer, card next to the weights


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def find_checkpoint_prefix(source_dir: Path) -> Path:
    """The single `*.ckpt` (TF1 checkpoint prefix) in a released directory."""
    if not source_dir.is_dir():
        raise ConversionError(f"{source_dir}: not a directory")
    indexes = sorted(source_dir.glob("*.index"))
    if len(indexes) != 1:
        found = [path.name for path in indexes] or "none"
        raise ConversionError(f"{source_dir}: expected exactly one TensorFlow checkpoint (*.index), found {found}")
    return indexes[0].with_suffix("")


def build_config(
    bert_config: dict, family: str, has_pooler: bool, layer_norm_eps: float | None, source: Path
) -> HfRoFormerConfig:
    """Our config for a family from the released `bert_config.json`.

    `layer_norm_eps` sets the embedding and encoder norms (default 1e-12, the release-time bert4keras); the MLM head's
    norm stays at 1e-12, as in every bert4keras version, so 1e-7 reproduces bert4keras >= 0.11.4.
    """
    keys = (
        "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "max_position_embeddings", "type_vocab_size", "initializer_range",
    )  # fmt: skip
    values = {key: bert_config[key] for key in keys if key in bert_config}
    values.setdefault("max_position_embeddings", 512)
    values["layer_norm_eps"] = layer_norm_eps if layer_norm_eps is not None else RELEASE_LAYER_NORM_EPS
    values["lm_head_layer_norm_eps"] = LM_HEAD_LAYER_NORM_EPS
    if family == "v2":
        values.update(norm_type="rms_norm", use_bias=False, hidden_act=bert_config.get("hidden_act", "relu"))
    if family in ("gpt", "sim"):
        values.update(is_decoder=True)
    if family == "sim":
        values.update(unilm=True)
    if has_pooler:
        values["pooler_activation"] = "linear" if family == "sim" else "tanh"
    try:
        return HfRoFormerConfig(**values)
    except (TypeError, ValueError) as error:
        raise ConversionError(f"{source}: {error}") from None


def model_class_for(family: str):
    """The head a family is saved with (AutoModel still loads the base, with its pooler)."""
    return HfRoFormerForCausalLM if family in ("gpt", "sim") else HfRoFormerForMaskedLM


def check_shapes(model_class, config: HfRoFormerConfig, checkpoint: TFCheckpoint, table, source: str) -> None:
    """Every mapped tensor has the shape of its parameter, compared on a model built on the meta device (no memory),
    so a config that does not describe the checkpoint is refused before anything is allocated."""
    with torch.device("meta"):
        shapes = {name: tuple(parameter.shape) for name, parameter in model_class(config).named_parameters()}
    wrong = []
    for mapping in table:
        if mapping.parameter not in shapes:
            raise ConversionError(f"{source}: {mapping.tf_name} maps to {mapping.parameter}, which the model lacks")
        stored = checkpoint.shape(mapping.tf_name)
        stored = tuple(reversed(stored)) if mapping.transpose else stored
        if stored != shapes[mapping.parameter]:
            wrong.append(
                f"{mapping.tf_name} has shape {checkpoint.shape(mapping.tf_name)}, {mapping.parameter} needs "
                f"{shapes[mapping.parameter]}"
            )
    if wrong:
        raise ConversionError(f"{source}: the config does not describe the checkpoint: " + "; ".join(wrong))


def fill_parameters(model: torch.nn.Module, tensors: dict[str, torch.Tensor], table, source: str) -> None:
    """Copy every mapped TF tensor into its parameter; every parameter that is not tied must be filled exactly once."""
    parameters = dict(model.named_parameters())
    tied = set(getattr(model, "_tied_weights_keys", {}) or {})
    filled: set[str] = set()
    for mapping in table:
        value = tensors[mapping.tf_name]
        if mapping.transpose:
            value = value.T
        parameter = parameters[mapping.parameter]
        if tuple(parameter.shape) != tuple(value.shape):
            raise ConversionError(
                f"{source}: {mapping.tf_name} has shape {tuple(value.shape)}, {mapping.parameter} needs "
                f"{tuple(parameter.shape)}"
            )
        with torch.no_grad():
            parameter.copy_(value.to(parameter.dtype))
        filled.add(mapping.parameter)
    unfilled = sorted(name for name in parameters if name not in filled and name not in tied)
    if unfilled:
        raise ConversionError(f"{source}: no tensor for the parameter(s) {unfilled}")


def make_tokenizer(vocab_path: Path, model_max_length: int, family: str) -> HfRoFormerTokenizer:
    """The original tokenizer of a vocabulary (word level with jieba, or char level: detected from the vocabulary),
    truncating at the model's trained length; a GPT's prompts end without `[SEP]` (`[CLS] text`, which the model
    continues). Raises `ConversionError` naming the file when it cannot be built."""
    try:
        vocab = load_vocab(vocab_path)
        check_special_tokens(vocab, SPECIAL_TOKENS, str(vocab_path))
        return HfRoFormerTokenizer(str(vocab_path), model_max_length=model_max_length, end_with_sep=family != "gpt")
    except (ValueError, ImportError) as error:
        raise ConversionError(f"{vocab_path}: {error}" if str(vocab_path) not in str(error) else str(error)) from None


def tokenizer_kind(tokenizer: HfRoFormerTokenizer) -> str:
    """How the report and card name a tokenizer."""
    return "word (jieba)" if tokenizer.word_level else "char"


def write_report_and_card(report: ConversionReport, config: HfRoFormerConfig, directory: Path) -> None:
    """The model card (`README.md`) of a converted directory, then its `conversion_report.json`, which lists every
    file written (a later `--force` replaces those and keeps anything else)."""
    card_for_conversion(report, config).save(directory / "README.md")
    report.files = file_sizes(directory)
    (directory / REPORT_FILE).write_text(json.dumps(asdict(report), indent=2) + "\n")


def sample_input_ids(config: HfRoFormerConfig) -> torch.Tensor:
    """A fixed batch used to check the saved model reproduces the converted one."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(5, config.vocab_size, (2, 16), generator=generator)


def check_reload(model, directory: Path) -> float:
    """Max |difference| between the in-memory model and the saved one reloaded through `AutoModel`."""
    with transformers_warnings_off():  # the base model leaves the saved head's weights unused, as intended here
        reloaded = AutoModel.from_pretrained(directory).eval()
    inputs = sample_input_ids(model.config)
    base = getattr(model, "roformer", model)
    with torch.no_grad():
        expected = base(inputs).last_hidden_state
        actual = reloaded(inputs).last_hidden_state
    return float((expected - actual).abs().max())


def save_generation_config(vocab: dict[str, int], directory: Path) -> None:
    """Generation defaults of GPT and Sim: generation starts after `[CLS] text` and ends at `[SEP]`."""
    GenerationConfig(
        bos_token_id=vocab["[CLS]"], eos_token_id=vocab["[SEP]"], pad_token_id=vocab["[PAD]"], max_new_tokens=64
    ).save_pretrained(directory)


def convert_tf_checkpoint(
    source_dir: str | Path,
    output_dir: str | Path,
    family: str = "auto",
    force: bool = False,
    layer_norm_eps: float | None = None,
) -> ConversionReport:
    """Convert a released TF1 RoFormer directory (`bert_config.json`, `*.ckpt.*`, `vocab.txt`) into an hf_roformer
    checkpoint with tokenizer, generation config (GPT, Sim), sentence-transformers files (models with a pooler),
    model card and `conversion_report.json`.

    `family`: "auto" (RoFormer-V2 from its variables, the others only from a release's directory name), "v1", "gpt",
    "sim" or "v2". `layer_norm_eps`: epsilon of the embedding and encoder norms, 1e-12 by default (the release-time
    library); 1e-7 for checkpoints trained with bert4keras >= 0.11.4.
    """
    source_dir, output_dir = Path(source_dir), Path(output_dir)
    prepare_output(output_dir, force, source_dir)
    prefix = find_checkpoint_prefix(source_dir)
    config_path, vocab_path = source_dir / "bert_config.json", source_dir / "vocab.txt"
    bert_config = read_bert_config(config_path)
    if not vocab_path.is_file():
        raise ConversionError(f"{vocab_path}: file not found (the tokenizer's vocabulary is part of a release)")
    with TFCheckpoint(prefix) as checkpoint:
        index = str(checkpoint.index_path)
        names = set(checkpoint.names())
        training_state = sorted(name for name in names if is_training_state(name))
        model_names = names - set(training_state)
        try:
            family, decided_by = decide_family(family, model_names, source_dir.resolve().name)
        except ValueError as error:
            raise ConversionError(f"{source_dir}: {error}") from None

        check_layer_count(bert_config, model_names, config_path, index)
        has_pooler = "bert/pooler/dense/kernel" in model_names
        has_mapping = "bert/encoder/embedding_hidden_mapping_in/kernel" in model_names
        table = name_table(family, bert_config["num_hidden_layers"], has_pooler, has_mapping, has_mlm=True)
        expected = {mapping.tf_name for mapping in table}
        unexpected, missing = sorted(model_names - expected), sorted(expected - model_names)
        if unexpected or missing:
            raise ConversionError(
                f"{prefix}: the variables do not match the {family} layout; unexpected: {unexpected or 'none'}; "
                f"missing: {missing or 'none'}"
            )
        config = build_config(bert_config, family, has_pooler, layer_norm_eps, config_path)
        model_class = model_class_for(family)
        check_shapes(model_class, config, checkpoint, table, index)
        tokenizer = make_tokenizer(vocab_path, config.max_position_embeddings, family)
        check_vocabulary(tokenizer.get_vocab(), vocab_path, checkpoint.shape(EMBEDDINGS)[0], index)
        check_free_space(output_dir, checkpoint.nbytes(expected) + OUTPUT_OVERHEAD_BYTES)

        model = model_class(config).eval()
        tensors = {name: checkpoint.read(name).float() for name in sorted(expected)}
        fill_parameters(model, tensors, table, index)
        verified = {"tensors": len(tensors), "index_blocks": checkpoint.index_blocks}

    report = ConversionReport(
        source=source_dir.name,
        family=family,
        family_decided_by=decided_by,
        tokenizer=tokenizer_kind(tokenizer),
        source_sha256={path.name: sha256(path) for path in sorted(source_dir.iterdir()) if path.is_file()},
        converted_tensors=len(table),
        layer_norm_eps=config.layer_norm_eps,
        lm_head_layer_norm_eps=config.lm_head_layer_norm_eps if config.lm_head_transform else None,
        verified_checksums=verified,
        skipped_training_state=training_state,
    )

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
        if family in ("gpt", "sim"):
            save_generation_config(tokenizer.get_vocab(), directory)
        from safetensors.torch import load_file

        saved = {}
        for file in directory.glob("*.safetensors"):
            saved.update(load_file(file))
        report.weights_max_abs_diff = max(
            float((saved[m.parameter] - (tensors[m.tf_name].T if m.transpose else tensors[m.tf_name])).abs().max())
            for m in table
        )
        report.reload_max_abs_diff = check_reload(model, directory)
        write_report_and_card(report, config, directory)

    write_atomically(output_dir, force, write, source_dir)
    return report


def convert_transformers_roformer(
    source_dir: str | Path, output_dir: str | Path, force: bool = False
) -> ConversionReport:
    """Convert a transformers-format RoFormer directory (model type `roformer`: transformers' RoFormer or the V2 and
    Sim checkpoints published in that format) into hf_roformer, keeping its head."""
    source_dir, output_dir = Path(source_dir), Path(output_dir)
    prepare_output(output_dir, force, source_dir)
    try:
        config = HfRoFormerConfig.from_pretrained(source_dir)
    except (OSError, TypeError, ValueError) as error:
        raise ConversionError(f"{source_dir / 'config.json'}: {error}") from None
    weight_files = sorted(source_dir.glob("*.safetensors")) + sorted(source_dir.glob("pytorch_model*.bin"))
    if not weight_files:
        raise ConversionError(f"{source_dir}: no model.safetensors or pytorch_model.bin")
    keys = set()
    for file in weight_files:
        if file.suffix == ".safetensors":
            from safetensors import safe_open

            with safe_open(file, framework="pt") as handle:
                keys |= set(handle.keys())
        else:
            keys |= set(torch.load(file, map_location="cpu", weights_only=True))
    if any(key.startswith("cls.") for key in keys):
        model_class = HfRoFormerForCausalLM if config.is_decoder else HfRoFormerForMaskedLM
    else:
        model_class = AutoModel
    with transformers_warnings_off():  # the load report's findings are checked (and raised) below
        model, info = model_class.from_pretrained(source_dir, config=config, output_loading_info=True)
    model.eval()
    problems = {kind: sorted(map(str, info.get(kind) or [])) for kind in ("missing_keys", "unexpected_keys")}
    problems["mismatched_keys"] = sorted(map(str, info.get("mismatched_keys") or []))
    problems["unexpected_keys"] = [key for key in problems["unexpected_keys"] if "embed_positions" not in key]
    if any(problems.values()):
        raise ConversionError(
            f"{source_dir}: the weights do not match the architecture its config describes; missing: "
            f"{problems['missing_keys'] or 'none'}; unexpected: {problems['unexpected_keys'] or 'none'}; "
            f"wrong shape: {problems['mismatched_keys'] or 'none'}"
        )
    family = "v2" if config.norm_type == "rms_norm" else "sim" if config.unilm else "gpt" if config.is_decoder else "v1"
    vocab_path = source_dir / "vocab.txt"
    tokenizer = make_tokenizer(vocab_path, config.max_position_embeddings, family) if vocab_path.exists() else None
    if tokenizer is not None:
        check_vocabulary(tokenizer.get_vocab(), vocab_path, config.vocab_size, str(weight_files[0]))

    report = ConversionReport(
        source=source_dir.name,
        family=family,
        family_decided_by="config.json (`norm_type`, `unilm`, `is_decoder`)",
        tokenizer=tokenizer_kind(tokenizer) if tokenizer is not None else "",
        source_sha256={path.name: sha256(path) for path in sorted(source_dir.iterdir()) if path.is_file()},
        converted_tensors=len([key for key in keys if "embed_positions" not in key]),
        layer_norm_eps=config.layer_norm_eps,
        lm_head_layer_norm_eps=config.lm_head_layer_norm_eps if config.lm_head_transform else None,
    )

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)
        report.reload_max_abs_diff = check_reload(model, directory)
        write_report_and_card(report, config, directory)

    write_atomically(output_dir, force, write, source_dir)
    return report


def convert_checkpoint(
    source_dir: str | Path,
    output_dir: str | Path,
    family: str = "auto",
    force: bool = False,
    layer_norm_eps: float | None = None,
) -> ConversionReport:
    """Convert `source_dir` with the converter that fits it: a transformers-format directory (`config.json`, no
    TensorFlow index) keeps its head (`family` and `layer_norm_eps` do not apply), a released TF1 directory goes
    through `convert_tf_checkpoint`."""
    source = Path(source_dir)
    if not source.is_dir():
        raise ConversionError(f"{source}: no such directory")
    if (source / "config.json").exists() and not list(source.glob("*.index")):
        if family != "auto" or layer_norm_eps is not None:
            raise ConversionError(
                f"{source} is a transformers-format checkpoint: its config.json decides the family and the norms, so "
                "--family and --layer_norm_eps do not apply"
            )
        return convert_transformers_roformer(source, output_dir, force=force)
    return convert_tf_checkpoint(source, output_dir, family=family, force=force, layer_norm_eps=layer_norm_eps)


__all__ = [
    "ConversionError",
    "ConversionReport",
    "build_config",
    "convert_checkpoint",
    "convert_tf_checkpoint",
    "convert_transformers_roformer",
]
