"""Model cards of converted checkpoints, rendered with huggingface_hub's `ModelCard` from `model_cards/template.md`."""

from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from .. import __version__
from .families import RELEASED, ReleasedCheckpoint
from .report import CONVERTER_VERSION, ConversionReport


TEMPLATE = Path(__file__).resolve().parent / "model_card_template.md"
FAMILY_TEXT = {
    "v1": "RoFormer (v1): post-LN BERT layout with rotary position embedding, masked language model",
    "gpt": "RoFormer-GPT: causal language model (MLM head as LM head)",
    "sim": "RoFormer-Sim (SimBERTv2): UniLM sequence-to-sequence mask, linear pooler for similarity",
    "v2": "RoFormer-V2: parameter-free RMS norm, no biases, ReLU, bare tied MLM head",
}
PIPELINE = {"v1": "fill-mask", "v2": "fill-mask", "gpt": "text-generation", "sim": "sentence-similarity"}
AUTO_CLASS = {"v1": "AutoModelForMaskedLM", "v2": "AutoModelForMaskedLM", "gpt": "AutoModelForCausalLM"}
USAGE_NOTES = {
    "v1": 'Fill masks with `pipeline("fill-mask", model=model, tokenizer=tokenizer)`; fine-tune any head (sequence '
    "or token classification, QA, multiple choice) with `AutoModelFor...`.",
    "v2": 'Fill masks with `pipeline("fill-mask", model=model, tokenizer=tokenizer)`; fine-tune any head with '
    "`AutoModelFor...`.",
    "gpt": 'Generate with `pipeline("text-generation", model=model, tokenizer=tokenizer)`, or '
    '`model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=50)`.',
    "sim": "Sentence vectors and similarity as the original computes them (the [CLS] state through the linear pooler, "
    "compared by cosine): `SentenceTransformer(path)` with `hf_roformer` imported, then `model.encode(texts)` and "
    "`model.similarity(a, b)`. Similar sentences as the original's `gen_synonyms`: "
    "`hf_roformer.apps.similar_sentences.generate_similar(model, tokenizer, text, n=20)` or "
    '`hf-roformer similar "text" -n 20 --model_name_or_path PATH` (the target segment is generated after '
    "`[CLS] text [SEP]` under the UniLM mask, then ranked by similarity to the source).",
}


def repo_id_for(name: str, organization: str = "hf-roformer") -> str:
    """Hub repository id of a converted release."""
    return f"{organization}/{name}"


def render_card(
    checkpoint: ReleasedCheckpoint,
    report: ConversionReport | None = None,
    repo_id: str | None = None,
    template: Path = TEMPLATE,
) -> ModelCard:
    """The card of a released checkpoint; without a `report` (no conversion run yet) the source hashes and fidelity
    say they are measured at conversion."""
    family = checkpoint.family
    data = ModelCardData(
        language="zh",
        license="apache-2.0",
        library_name="transformers",
        pipeline_tag=PIPELINE[family],
        tags=["roformer", "hf_roformer", "rotary-position-embedding", f"roformer-{family}"]
        + (["sentence-transformers"] if family == "sim" else []),
    )
    if report is None:
        hashes = (
            "  - not yet converted here: the hashes of the released files are recorded when `hf-roformer convert` runs"
        )
        fidelity = "recorded when `hf-roformer convert` runs (weights round trip and reload through AutoModel)."
        family_decided_by = f"the directory name: the release {checkpoint.file}"
        checksums = "verified when `hf-roformer convert` runs (CRC-32C of every tensor and index block)."
        norms = "1e-12 in every norm, as in the release-time bert4keras that trained the checkpoint."
    else:
        hashes = "\n".join(f"  - `{name}`: `{digest}`" for name, digest in report.source_sha256.items())
        fidelity = (
            f"{report.converted_tensors} tensors; saved weights vs source max |diff| "
            f"{report.weights_max_abs_diff:.1e}; reloaded through AutoModel vs converted model max |diff| "
            f"{report.reload_max_abs_diff:.1e}."
        )
        family_decided_by = report.family_decided_by
        verified = report.verified_checksums
        checksums = (
            f"the CRC-32C of {verified['tensors']} tensors and {verified['index_blocks']} index blocks matched."
            if verified
            else "not applicable (a transformers-format source carries no checksums)."
        )
        norms = f"embedding and encoder norms {report.layer_norm_eps:g}" + (
            f", MLM head norm {report.lm_head_layer_norm_eps:g}." if report.lm_head_layer_norm_eps is not None else "."
        )
    return ModelCard.from_template(
        data,
        template_path=str(template),
        title=f"hf_roformer: {checkpoint.file}",
        description=checkpoint.description,
        source=checkpoint.file,
        family_text=FAMILY_TEXT[family],
        family=family,
        family_decided_by=family_decided_by,
        checksums=checksums,
        norms=norms,
        layers=checkpoint.layers,
        hidden=checkpoint.hidden,
        heads=checkpoint.heads,
        vocab_size=checkpoint.vocab_size,
        tokenizer=checkpoint.tokenizer,
        heads_classes=", ".join(checkpoint.heads_classes),
        auto_class=AUTO_CLASS.get(family, "AutoModelForCausalLM"),
        repo_id=repo_id or repo_id_for(checkpoint.file),
        usage_notes=USAGE_NOTES[family],
        package_version=__version__,
        converter_version=CONVERTER_VERSION,
        source_sha256=hashes,
        fidelity=fidelity,
    )


def released_checkpoint(name: str) -> ReleasedCheckpoint | None:
    """The released checkpoint a source directory is named after, if any."""
    return next((checkpoint for checkpoint in RELEASED if checkpoint.file == name), None)


def card_for_conversion(report: ConversionReport, config) -> ModelCard:
    """Card of a just-converted directory: the release it comes from, or one described from its config."""
    checkpoint = released_checkpoint(report.source)
    if checkpoint is not None and checkpoint.family != report.family:  # a release converted as another family
        checkpoint = None
    checkpoint = checkpoint or ReleasedCheckpoint(
        report.source,
        report.family,
        config.num_hidden_layers,
        config.hidden_size,
        config.num_attention_heads,
        config.vocab_size,
        report.tokenizer,
        (),
        f"A RoFormer checkpoint ({report.family} family)",
    )
    return render_card(checkpoint, report)


def render_released_cards(output_dir: str | Path) -> list[Path]:
    """Write `<output_dir>/<name>/README.md` for every released checkpoint."""
    paths = []
    for checkpoint in RELEASED:
        path = Path(output_dir) / checkpoint.file / "README.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        render_card(checkpoint).save(path)
        paths.append(path)
    return paths
