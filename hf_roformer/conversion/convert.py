"""Convert original RoFormer checkpoints (TF1 zips) and transformers-format RoFormer directories into hf_roformer ones.

Strict: every source tensor is used exactly once (training state such as `global_step` and Adam slots is reported and
skipped), every parameter is filled, every shape is checked; anything else is a `ConversionError` listing the names.
The output is written to a temporary sibling directory and renamed into place, and an existing output is only replaced
with `force=True`.
"""

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModel, BertTokenizerFast, GenerationConfig

from ..configuration_hf_roformer import HfRoFormerConfig
from ..modeling_hf_roformer import HfRoFormerForCausalLM, HfRoFormerForMaskedLM
from ..tokenization_hf_roformer import HfRoFormerTokenizer, is_word_level_vocab, load_vocab
from .families import FAMILIES, is_training_state, name_table
from .tf_checkpoint import TFCheckpoint


CONVERTER_VERSION = "1"


class ConversionError(ValueError):
    """A source checkpoint that does not match its family's layout; the message names the tensors concerned."""


@dataclass
class ConversionReport:
    """What a conversion read, wrote and measured (also saved as `conversion_report.json`)."""

    source: str
    family: str
    tokenizer: str
    source_sha256: dict[str, str]
    converted_tensors: int
    skipped_training_state: list[str] = field(default_factory=list)
    weights_max_abs_diff: float = 0.0
    reload_max_abs_diff: float = 0.0
    converter_version: str = CONVERTER_VERSION


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def find_checkpoint_prefix(source_dir: Path) -> Path:
    """The single `*.ckpt` (TF1 checkpoint prefix) in a released directory."""
    indexes = sorted(source_dir.glob("*.index"))
    if len(indexes) != 1:
        found = [path.name for path in indexes] or "none"
        raise ConversionError(f"{source_dir}: expected exactly one TensorFlow checkpoint (*.index), found {found}")
    return indexes[0].with_suffix("")


def detect_family(names: set[str], source_dir: Path) -> str:
    """The family of a checkpoint: RoFormer-V2 has no norm or bias variables; GPT and Sim share v1's variables, so
    they are told apart by the released directory names (`...-gpt-...`, `...-sim-...`); anything else is v1."""
    if not any(name.endswith(("/gamma", "/beta", "/bias", "output_bias")) for name in names):
        return "v2"
    words = source_dir.resolve().name.lower().replace("_", "-").split("-")
    for family in ("gpt", "sim"):
        if family in words:
            return family
    return "v1"


def read_bert_config(path: Path) -> dict:
    """`bert_config.json` as a dict, with a clear error for a missing or malformed file or key."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConversionError(f"{path}: file not found") from None
    except (OSError, json.JSONDecodeError) as error:
        raise ConversionError(f"{path}: cannot read ({error})") from None
    required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    missing = [key for key in required if key not in config]
    if missing:
        raise ConversionError(f"{path}: missing key(s) {missing}")
    return config


def build_config(bert_config: dict, family: str, has_pooler: bool, layer_norm_eps: float | None) -> HfRoFormerConfig:
    """Our config for a family from the released `bert_config.json`."""
    keys = (
        "vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
        "max_position_embeddings", "type_vocab_size", "initializer_range",
    )  # fmt: skip
    values = {key: bert_config[key] for key in keys if key in bert_config}
    values.setdefault("max_position_embeddings", 512)
    values["layer_norm_eps"] = layer_norm_eps if layer_norm_eps is not None else 1e-12
    if family == "v2":
        values.update(norm_type="rms_norm", use_bias=False, hidden_act=bert_config.get("hidden_act", "relu"))
    if family in ("gpt", "sim"):
        values.update(is_decoder=True)
    if family == "sim":
        values.update(unilm=True)
    if has_pooler:
        values["pooler_activation"] = "linear" if family == "sim" else "tanh"
    return HfRoFormerConfig(**values)


def model_class_for(family: str):
    """The head a family is saved with (AutoModel still loads the base, with its pooler)."""
    return HfRoFormerForCausalLM if family in ("gpt", "sim") else HfRoFormerForMaskedLM


def fill_parameters(model: torch.nn.Module, tensors: dict[str, torch.Tensor], table, source: str) -> None:
    """Copy every mapped TF tensor into its parameter; every parameter that is not tied must be filled exactly once."""
    parameters = dict(model.named_parameters())
    tied = set(getattr(model, "_tied_weights_keys", {}) or {})
    filled: set[str] = set()
    for mapping in tqdm(table, desc="Converting", unit="tensor", disable=len(table) < 200):
        value = tensors[mapping.tf_name]
        if mapping.transpose:
            value = value.T
        if mapping.parameter not in parameters:
            raise ConversionError(f"{source}: {mapping.tf_name} maps to {mapping.parameter}, which the model lacks")
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


def write_atomically(output_dir: Path, force: bool, write) -> None:
    """Call `write(staging_dir)` and move the result to `output_dir`, replacing it only when `force`."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not force:
        raise FileExistsError(f"{output_dir} exists; pass --force to replace it")
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.", dir=output_dir.parent))
    try:
        write(staging)
        if output_dir.exists():
            backup = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.old.", dir=output_dir.parent))
            os.replace(output_dir, backup / "previous")
            os.replace(staging, output_dir)
            shutil.rmtree(backup)
        else:
            os.replace(staging, output_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)


def save_tokenizer(vocab_path: Path, directory: Path) -> str:
    """Word-level vocabularies get the jieba tokenizer, char-level ones BERT's (loadable without this package)."""
    vocab = load_vocab(vocab_path)
    if is_word_level_vocab(vocab):
        HfRoFormerTokenizer(str(vocab_path)).save_pretrained(directory)
        return "word (jieba)"
    BertTokenizerFast.from_pretrained(vocab_path.parent, do_lower_case=True).save_pretrained(directory)
    return "char"


def write_report_and_card(report: ConversionReport, config: HfRoFormerConfig, directory: Path) -> None:
    """`conversion_report.json` and the model card (`README.md`) of a converted directory."""
    from .model_card import card_for_conversion  # the card module reads reports: imported here, not at the top

    (directory / "conversion_report.json").write_text(json.dumps(asdict(report), indent=2) + "\n")
    card_for_conversion(report, config).save(directory / "README.md")


def sample_input_ids(config: HfRoFormerConfig) -> torch.Tensor:
    """A fixed batch used to check the saved model reproduces the converted one."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(5, config.vocab_size, (2, 16), generator=generator)


def check_reload(model, directory: Path) -> float:
    """Max |difference| between the in-memory model and the saved one reloaded through `AutoModel`."""
    reloaded = AutoModel.from_pretrained(directory).eval()
    inputs = sample_input_ids(model.config)
    with torch.no_grad():
        expected = model.roformer(inputs).last_hidden_state
        actual = reloaded(inputs).last_hidden_state
    return float((expected - actual).abs().max())


def convert_tf_checkpoint(
    source_dir: str | Path,
    output_dir: str | Path,
    family: str = "auto",
    force: bool = False,
    layer_norm_eps: float | None = None,
) -> ConversionReport:
    """Convert a released TF1 RoFormer directory (`bert_config.json`, `*.ckpt.*`, `vocab.txt`) into an hf_roformer
    checkpoint with tokenizer, generation config (GPT, Sim), model card and `conversion_report.json`."""
    source_dir = Path(source_dir)
    output_dir = Path(output_dir)
    if output_dir.exists() and not force:
        raise FileExistsError(f"{output_dir} exists; pass --force to replace it")
    prefix = find_checkpoint_prefix(source_dir)
    bert_config = read_bert_config(source_dir / "bert_config.json")
    vocab_path = source_dir / "vocab.txt"
    checkpoint = TFCheckpoint(prefix)
    names = set(checkpoint.names())
    training_state = sorted(name for name in names if is_training_state(name))
    model_names = names - set(training_state)
    if family == "auto":
        family = detect_family(model_names, source_dir)
    if family not in FAMILIES:
        raise ConversionError(f"unknown family {family!r}; use one of {FAMILIES}")

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

    config = build_config(bert_config, family, has_pooler, layer_norm_eps)
    model = model_class_for(family)(config).eval()
    tensors = {name: checkpoint.read(name).float() for name in expected}
    fill_parameters(model, tensors, table, str(prefix))

    report = ConversionReport(
        source=source_dir.name,
        family=family,
        tokenizer="",
        source_sha256={path.name: sha256(path) for path in sorted(source_dir.iterdir()) if path.is_file()},
        converted_tensors=len(table),
        skipped_training_state=training_state,
    )

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        report.tokenizer = save_tokenizer(vocab_path, directory)
        if family in ("gpt", "sim"):
            vocab = load_vocab(vocab_path)
            GenerationConfig(
                bos_token_id=vocab["[CLS]"], eos_token_id=vocab["[SEP]"], pad_token_id=vocab["[PAD]"], max_new_tokens=64
            ).save_pretrained(directory)
        saved = {}
        from safetensors.torch import load_file

        for file in directory.glob("*.safetensors"):
            saved.update(load_file(file))
        report.weights_max_abs_diff = max(
            float((saved[m.parameter] - (tensors[m.tf_name].T if m.transpose else tensors[m.tf_name])).abs().max())
            for m in table
        )
        report.reload_max_abs_diff = check_reload(model, directory)
        write_report_and_card(report, config, directory)

    write_atomically(output_dir, force, write)
    return report


def convert_transformers_roformer(
    source_dir: str | Path, output_dir: str | Path, force: bool = False
) -> ConversionReport:
    """Convert a transformers-format RoFormer directory (model type `roformer`: transformers' RoFormer or the V2 and
    Sim checkpoints published in that format) into hf_roformer, keeping its head."""
    source_dir, output_dir = Path(source_dir), Path(output_dir)
    if output_dir.exists() and not force:
        raise FileExistsError(f"{output_dir} exists; pass --force to replace it")
    config = HfRoFormerConfig.from_pretrained(source_dir)
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

    report = ConversionReport(
        source=source_dir.name,
        family="v2" if config.norm_type == "rms_norm" else ("sim" if config.unilm else "v1"),
        tokenizer="",
        source_sha256={path.name: sha256(path) for path in sorted(source_dir.iterdir()) if path.is_file()},
        converted_tensors=len([key for key in keys if "embed_positions" not in key]),
    )

    def write(directory: Path) -> None:
        model.save_pretrained(directory)
        if (source_dir / "vocab.txt").exists():
            report.tokenizer = save_tokenizer(source_dir / "vocab.txt", directory)
        base = getattr(model, "roformer", model)
        reloaded = AutoModel.from_pretrained(directory).eval()
        inputs = sample_input_ids(config)
        with torch.no_grad():
            report.reload_max_abs_diff = float(
                (base(inputs).last_hidden_state - reloaded(inputs).last_hidden_state).abs().max()
            )
        write_report_and_card(report, config, directory)

    write_atomically(output_dir, force, write)
    return report
