"""Model cards of fine-tuned models, transformers' Trainer card made true about where the model started; and the
upload of a trained model with its card (`publish`).

The Trainer card links `base_model` to the Hub and otherwise says "trained from scratch". A model fine-tuned from a
local directory or from the checkpoint shipped with the package has no Hub id: its card leaves `base_model` out (a
local path there is a broken Hub link) and names the base in its text instead. Datasets that are not on the Hub keep
their results in `model-index` but get no `datasets:` link. Cards are written only for runs that trained.
"""

import logging
import os
import re
from pathlib import Path

import huggingface_hub
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ...pretrained import SHIPPED_PREFIX, is_shipped_name
from ...remote_code.model_card_hf_roformer import add_card_metadata, card_metadata
from ...utils.errors import HubError


logger = logging.getLogger(__name__)

TRAINER_BASE_SENTENCE = re.compile(r"This model (?:was trained from scratch|is a fine-tuned version of .+?) on ")


def hub_base_model(base: str | None) -> str | None:
    """`base` when it is a Hub id, None for a shipped checkpoint, a local directory or no base."""
    if base is None or is_shipped_name(base) or os.path.isdir(base):
        return None
    return base


def describe_base(base: str | None, from_scratch: bool = False, architecture_of: str | None = None) -> str:
    """The start of the card's first sentence, naming where the model started."""
    if from_scratch:
        source = f" (the architecture of `{architecture_of}`)" if architecture_of else ""
        return f"This model was trained from randomly initialized weights{source} on "
    if base is None:
        return "This model was trained from scratch on "
    if is_shipped_name(base):
        name = base.removeprefix(SHIPPED_PREFIX)
        return (
            f"This model is a fine-tuned version of `{name}`, the pre-trained checkpoint shipped with hf_roformer "
            f"(`{base}`), on "
        )
    if hub_base_model(base) is None:
        return f"This model is a fine-tuned version of the local checkpoint `{base}` on "
    return f"This model is a fine-tuned version of [{base}](https://huggingface.co/{base}) on "


def write_fine_tuning_card(
    trainer,
    base: str | None,
    *,
    dataset: str,
    dataset_tags: str,
    dataset_args: str | None = None,
    hub_dataset: bool = False,
    language: str | None = None,
    model_name: str | None = None,
    from_scratch: bool = False,
    architecture_of: str | None = None,
    note: str | None = None,
    results: dict[str, float] | None = None,
    tasks: str = "text-classification",
) -> Path:
    """Write `README.md` in the Trainer's output directory: transformers' card (results, hyper-parameters, training
    curve) with `base_model` only for a Hub base, the base named in the text, the model's Hub metadata, and `note` (a
    paragraph) after the first sentence; `tasks` is the pipeline task of the model. `results` (metric name -> value on
    the evaluation set) become the card's `model-index`: transformers keeps only metrics named like its own list
    (accuracy, f1, ...) and drops the rest (CAIL2019-SCM's triplet accuracy left `results: []`)."""
    model = trainer.model
    trainer.create_model_card(
        language=language,
        tags=list(model.model_tags or []),
        model_name=model_name,
        finetuned_from=None if from_scratch else hub_base_model(base),
        tasks=tasks,
        dataset=dataset,
        dataset_tags=dataset_tags,
        dataset_args=dataset_args,
    )
    output_dir = Path(trainer.args.output_dir)
    path = output_dir / "README.md"
    card = ModelCard.load(path)
    sentence = describe_base(base, from_scratch, architecture_of)
    text, replaced = TRAINER_BASE_SENTENCE.subn(lambda _: sentence, card.text, count=1)
    if not replaced:  # a transformers release that words it differently: state the base under the title
        text = sentence.removesuffix(" on ") + ".\n\n" + text
    if note:
        text = re.sub(r"\n(It achieves|\n## Model description)", lambda m: f"\n\n{note}\n{m.group(0)}", text, count=1)
    card.text = text
    if results:
        card.data.model_name = card.data.model_name or model_name or output_dir.name
        card.data.eval_results = [
            EvalResult(
                task_type=tasks,
                dataset_type=dataset_tags,
                dataset_name=dataset,
                dataset_config=dataset_args,
                metric_type=name,
                metric_value=value,
                metric_name=name.replace("_", " ").capitalize(),
            )
            for name, value in results.items()
        ]
    if not hub_dataset:
        card.data.datasets = None
    if from_scratch or hub_base_model(base) is None:
        card.data.base_model = None
    card.save(path)
    if hasattr(model, "card_metadata"):  # hf_roformer's models; another model (a BERT peer) keeps the Trainer's keys
        add_card_metadata(output_dir, model.card_metadata(), output_dir.name)
    return path


def publish(output_dir: Path, trainer, write_card) -> None:
    """Upload the output directory with `Trainer.push_to_hub` (which writes a card of its own), then the card
    `write_card()` writes; a failed upload raises a `HubError` saying that the model is saved all the same."""
    try:
        trainer.push_to_hub(tags=list(getattr(trainer.model, "model_tags", None) or []))
        if trainer.is_world_process_zero():
            path = write_card()
            huggingface_hub.upload_file(
                path_or_fileobj=str(path),
                path_in_repo="README.md",
                repo_id=trainer.hub_model_id,
                token=trainer.args.hub_token,
                commit_message="Model card",
            )
    except Exception as error:  # any failure of the upload: the trained model is safe on disk either way
        raise HubError(
            f"the model is saved in {output_dir}, but the upload to the Hub failed ({type(error).__name__}: "
            f"{error}); upload the directory later with `hf upload`"
        ) from error
    if trainer.is_world_process_zero():
        logger.info(f"uploaded to https://huggingface.co/{trainer.hub_model_id}")


NOT_METRICS = ("loss", "runtime", "samples_per_second", "steps_per_second", "epoch")


def evaluation_results(metrics: dict[str, float], prefix: str = "eval") -> dict[str, float]:
    """The metrics of one evaluation (`eval_accuracy` -> `accuracy`), without its loss and timings."""
    start = prefix + "_"
    return {
        name.removeprefix(start): value
        for name, value in metrics.items()
        if name.startswith(start) and name.removeprefix(start) not in NOT_METRICS
    }


def write_pretraining_card(output_dir: str | Path, model, tokenizer, corpus: str, stages: list[dict]) -> Path:
    """`README.md` of a pre-trained masked LM: what it is (architecture, size, tokenizer), what it was trained on and
    how (stages), its held-out scores after each stage, and how to use it; with the Hub metadata of its head."""
    config = model.config
    parameters = sum(parameter.numel() for parameter in model.parameters())
    name = Path(output_dir).name
    rope_type = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    positions = f"RoPE ({rope_type})" if config.model_type == "hf_roformer" else "learned absolute"
    rows = [
        ("architecture", f"`{type(model).__name__}`: {config.num_hidden_layers} layers, hidden {config.hidden_size}, "
         f"{config.num_attention_heads} heads, feed-forward {config.intermediate_size}, {positions} positions; "
         f"{parameters / 1e6:.1f}M parameters"),
        ("tokenizer", f"`{type(tokenizer).__name__}`, {len(tokenizer):,} entries, truncating at "
         f"{tokenizer.model_max_length} tokens (the longest length trained at)"),
        ("data", corpus),
        ("objective", "masked language modeling with Chinese whole-word masking (jieba words), documents packed into "
         "full blocks with `[SEP]` between them"),
        ("stages", "; ".join(f"{entry['stage']['steps']:,} steps of {entry['stage']['batch_size']} x "
                             f"{entry['stage']['max_length']} tokens" for entry in stages)),
    ]  # fmt: skip
    scores = "\n".join(
        f"| {entry['stage']['max_length']} tokens | {entry['metrics'].get('eval_accuracy', float('nan')):.2%} | "
        f"{entry['metrics'].get('eval_loss', float('nan')):.3f} |"
        for entry in stages
    )
    table = "\n".join(f"| {key} | {value} |" for key, value in rows)
    text = (
        f"---\n{ModelCardData().to_yaml()}\n---\n\n# {name}\n\n"
        f"A masked language model pre-trained with `hf-roformer pretrain mlm`.\n\n| | |\n|---|---|\n{table}\n\n"
        f"## Held-out scores after each stage\n\n| stage | masked-token accuracy | MLM loss |\n|---|---|---|\n"
        f"{scores}\n\n## Use\n\n```python\nimport hf_roformer  # registers the model type with transformers\n"
        f'from transformers import pipeline\n\nfill = pipeline("fill-mask", model="{name}")\n```\n'
    )
    card = ModelCard(text)
    path = Path(output_dir) / "README.md"
    card.save(path)
    tags = [*(getattr(model, "model_tags", None) or []), "masked-lm"]
    add_card_metadata(output_dir, card_metadata("transformers", "fill-mask", tags), name)
    return path
