"""`hf-roformer finetune glue|cail2019-scm`: fine-tuning with transformers' `Trainer`, offline-capable.

Every `TrainingArguments` flag passes through (`HfArgumentParser`): bf16/fp16, gradient checkpointing and
accumulation, `group_by_length`, seeds, checkpoints and `--resume_from_checkpoint`, `--push_to_hub`; runs under
`torchrun` and `accelerate launch` as any Trainer script does. Data are read and validated before anything is written.
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import huggingface_hub
import numpy as np
import transformers
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
)

from ..model_card_hf_roformer import add_card_metadata
from .data import (
    GLUE_TASKS,
    DataError,
    GlueTask,
    cail_pairs,
    evaluation_splits,
    from_hub_glue,
    read_cail_split,
    read_glue,
    test_splits,
)
from .metrics import glue_metrics, triplet_accuracy


logger = transformers.logging.get_logger(__name__)


@dataclass
class ModelArguments:
    """Which checkpoint to fine-tune and how long its inputs are."""

    model: str = field(metadata={"help": "Checkpoint directory or hub id of the model to fine-tune."})
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer path (default: the model's)."})
    max_length: int = field(default=512, metadata={"help": "Truncate inputs to this many tokens."})
    rope_parameters: str | None = field(
        default=None,
        metadata={"help": 'JSON rope scaling for long inputs, e.g. \'{"rope_type": "ntk", "factor": 2.0}\'.'},
    )

    def rope_overrides(self) -> dict:
        """`from_pretrained` keyword arguments for `--rope_parameters`."""
        if self.rope_parameters is None:
            return {}
        try:
            parameters = json.loads(self.rope_parameters)
        except json.JSONDecodeError as error:
            raise ValueError(f"--rope_parameters is not valid JSON: {error.msg}") from None
        if not isinstance(parameters, dict):
            raise ValueError("--rope_parameters must be a JSON object")
        return {"rope_parameters": parameters}


@dataclass
class GlueArguments:
    """Which GLUE task and where its data are (exactly one source)."""

    task: str = field(metadata={"help": f"One of {sorted(GLUE_TASKS)}."})
    data_dir: str | None = field(
        default=None, metadata={"help": "Directory in the published GLUE layout (<dir>/<Task>/train.tsv, ...)."}
    )
    dataset_name: str | None = field(default=None, metadata={"help": "A `datasets` name, e.g. nyu-mll/glue."})
    dataset_dir: str | None = field(default=None, metadata={"help": "A `datasets.save_to_disk` directory."})


@dataclass
class CailArguments:
    """Where the CAIL2019-SCM JSON-lines files are."""

    data_dir: str = field(metadata={"help": "Directory holding train.json, valid.json and (optionally) test.json."})


GLUE_DEFAULTS = dict(
    num_train_epochs=3.0,
    learning_rate=2e-5,
    per_device_train_batch_size=32,
    eval_strategy="epoch",
    save_strategy="epoch",
    report_to="none",
)
# The original CAIL2019-SCM recipe: Adam lr 6e-6, batch 8 pairs, 20 epochs, the best checkpoint on valid.
CAIL_DEFAULTS = dict(
    num_train_epochs=20.0,
    learning_rate=6e-6,
    weight_decay=0.0,
    per_device_train_batch_size=8,
    eval_strategy="epoch",
    save_strategy="epoch",
    load_best_model_at_end=True,
    metric_for_best_model="triplet_accuracy",
    greater_is_better=True,
    save_total_limit=2,
    report_to="none",
)


def parse(dataclass_types, defaults: dict, argv: list[str] | None):
    """Parse `argv` into the dataclasses with `TrainingArguments`, whose defaults are replaced by `defaults`."""
    parser = HfArgumentParser((*dataclass_types, TrainingArguments))
    parser.set_defaults(**defaults)
    return parser.parse_args_into_dataclasses(args=argv)


def load_tokenizer_and_model(model_args: ModelArguments, training_args: TrainingArguments, **config_overrides):
    """Tokenizer and sequence-classification model for `--model` (registered classes or remote code); the new head
    is initialized under `--seed`, so runs (and the processes of a distributed run) start from the same weights."""
    transformers.set_seed(training_args.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer or model_args.model)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_args.model, **model_args.rope_overrides(), **config_overrides
    )
    return tokenizer, model


def tokenize(dataset: datasets.Dataset, tokenizer, max_length: int) -> datasets.Dataset:
    """Add input ids (and segment ids) for `text_a` (and `text_b`), truncated as the tokenizer's original does."""

    def encode(batch):
        pair = batch["text_b"] if "text_b" in batch else None
        return tokenizer(batch["text_a"], pair, truncation=True, max_length=max_length)

    columns = [column for column in ("text_a", "text_b", "index") if column in dataset.column_names]
    return dataset.map(encode, batched=True, remove_columns=columns, desc="Tokenizing")


def load_glue_data(task: GlueTask, glue_args: GlueArguments) -> datasets.DatasetDict:
    """The task's splits from the one source given: TSV directory, `datasets` name or `save_to_disk` directory."""
    sources = [glue_args.data_dir, glue_args.dataset_name, glue_args.dataset_dir]
    if sum(source is not None for source in sources) != 1:
        raise ValueError("Give exactly one of --data_dir, --dataset_name and --dataset_dir.")
    if glue_args.data_dir is not None:
        return read_glue(task, glue_args.data_dir)
    if glue_args.dataset_dir is not None:
        return from_hub_glue(task, datasets.load_from_disk(glue_args.dataset_dir))
    return from_hub_glue(task, datasets.load_dataset(glue_args.dataset_name, task.name))


def write_glue_submission(task: GlueTask, split: str, indices: list[str], predictions: np.ndarray, path: Path):
    """Test predictions in the GLUE leaderboard format: `index<TAB>prediction`, label names for classification."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("index\tprediction\n")
        for index, prediction in zip(indices, predictions, strict=True):
            if task.is_regression:
                value = f"{float(np.clip(prediction, 0.0, 5.0)):.3f}"
            else:
                value = task.labels[int(prediction)]
            handle.write(f"{index}\t{value}\n")


def run_glue(argv: list[str] | None = None) -> dict[str, float]:
    """Fine-tune and evaluate on one GLUE task; write metrics, test predictions and a model card. Returns metrics."""
    model_args, glue_args, training_args = parse((ModelArguments, GlueArguments), GLUE_DEFAULTS, argv)
    if glue_args.task not in GLUE_TASKS:
        raise ValueError(f"--task {glue_args.task!r} is not one of {sorted(GLUE_TASKS)}")
    task = GLUE_TASKS[glue_args.task]
    raw = load_glue_data(task, glue_args)  # validated before anything is written

    label_kwargs = (
        {"num_labels": 1, "problem_type": "regression"}
        if task.is_regression
        else {
            "num_labels": len(task.labels),
            "id2label": dict(enumerate(task.labels)),
            "label2id": {label: i for i, label in enumerate(task.labels)},
        }
    )
    tokenizer, model = load_tokenizer_and_model(model_args, training_args, **label_kwargs)
    encoded = {split: tokenize(dataset, tokenizer, model_args.max_length) for split, dataset in raw.items()}
    validation = evaluation_splits(task)

    def compute_metrics(prediction):
        logits = prediction.predictions
        predicted = logits.squeeze(-1) if task.is_regression else logits.argmax(-1)
        return glue_metrics(task.metrics, predicted, prediction.label_ids)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=encoded["train"],
        eval_dataset=encoded[validation[0]],
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
    )
    metrics: dict[str, float] = {}
    if training_args.do_train or not training_args.do_eval:
        result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
        trainer.save_model()
        trainer.log_metrics("train", result.metrics)
        trainer.save_metrics("train", result.metrics)
        trainer.save_state()
    for split in validation:
        prefix = "eval" if split == validation[0] else "eval_" + split.removeprefix("validation_")
        split_metrics = trainer.evaluate(encoded[split], metric_key_prefix=prefix)
        metrics.update(split_metrics)
    trainer.log_metrics("eval", metrics)
    trainer.save_metrics("eval", metrics)
    for split in test_splits(task):  # every process predicts (it is a collective operation), one writes
        if split not in encoded:
            continue
        logits = trainer.predict(encoded[split]).predictions
        predicted = logits.squeeze(-1) if task.is_regression else logits.argmax(-1)
        if trainer.is_world_process_zero():
            path = Path(training_args.output_dir) / task.submission[split]
            write_glue_submission(task, split, raw[split]["index"], predicted, path)
    card = {"finetuned_from": model_args.model, "tasks": "text-classification", "dataset": "GLUE " + task.directory}
    if trainer.is_world_process_zero():
        write_model_card(trainer, language="en", dataset_tags="glue", dataset_args=task.name, **card)
    if training_args.push_to_hub:
        push_with_model_card(trainer, **card)
    return metrics


def run_cail(argv: list[str] | None = None) -> dict[str, float]:
    """Fine-tune on CAIL2019-SCM with the original recipe; report triplet accuracy on valid (and test)."""
    model_args, cail_args, training_args = parse((ModelArguments, CailArguments), CAIL_DEFAULTS, argv)
    data_dir = Path(cail_args.data_dir)
    triplets = {split: read_cail_split(data_dir / f"{split}.json") for split in ("train", "valid")}
    if (data_dir / "test.json").exists():
        triplets["test"] = read_cail_split(data_dir / "test.json")

    tokenizer, model = load_tokenizer_and_model(
        model_args, training_args, num_labels=1, problem_type="multi_label_classification", classifier_pooling="mean"
    )
    encoded = {
        split: tokenize(cail_pairs(records), tokenizer, model_args.max_length) for split, records in triplets.items()
    }

    def metrics_for(split):
        labels = [record["label"] for record in triplets[split]]
        return lambda prediction: {"triplet_accuracy": triplet_accuracy(prediction.predictions, labels)}

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=encoded["train"],
        eval_dataset=encoded["valid"],
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=metrics_for("valid"),
    )
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model()
    trainer.save_metrics("train", result.metrics)
    metrics = trainer.evaluate()
    if "test" in encoded:
        trainer.compute_metrics = metrics_for("test")
        metrics.update(trainer.evaluate(encoded["test"], metric_key_prefix="test"))
        scores = trainer.predict(encoded["test"]).predictions.reshape(-1, 2)
        if trainer.is_world_process_zero():
            with open(Path(training_args.output_dir) / "test_predictions.json", "w", encoding="utf-8") as handle:
                for score_b, score_c in scores:
                    handle.write(json.dumps({"label": "B" if score_b > score_c else "C"}) + "\n")
    trainer.log_metrics("eval", metrics)
    trainer.save_metrics("eval", metrics)
    card = {"finetuned_from": model_args.model, "tasks": "text-classification", "dataset": "CAIL2019-SCM"}
    if trainer.is_world_process_zero():
        write_model_card(trainer, language="zh", **card)
    if training_args.push_to_hub:
        push_with_model_card(trainer, **card)
    return metrics


def write_model_card(trainer: Trainer, **card) -> None:
    """Trainer's card (results, hyper-parameters) in the output directory, completed with the model's Hub metadata:
    its tags and `pipeline_tag`, which Trainer's card leaves out."""
    model = trainer.model
    trainer.create_model_card(tags=list(model.model_tags or []), **card)
    add_card_metadata(trainer.args.output_dir, model.card_metadata(), Path(trainer.args.output_dir).name)


def push_with_model_card(trainer: Trainer, **card) -> None:
    """`Trainer.push_to_hub`, whose card is rewritten without a `pipeline_tag`, then the model's `pipeline_tag` added
    to the pushed card."""
    model = trainer.model
    trainer.push_to_hub(tags=list(model.model_tags or []), **card)
    if trainer.is_world_process_zero() and model.pipeline_tag:
        huggingface_hub.metadata_update(
            trainer.hub_model_id, {"pipeline_tag": model.pipeline_tag}, overwrite=False, token=trainer.args.hub_token
        )


def main(task: str, argv: list[str]) -> None:
    """Entry point of `hf-roformer finetune TASK ...`; data errors exit with their message, naming file and line."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        (run_glue if task == "glue" else run_cail)(argv)
    except DataError as error:
        raise SystemExit(f"error: {error}") from None
