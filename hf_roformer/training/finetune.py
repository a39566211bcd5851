"""`hf-roformer finetune glue|text-classification|cail2019-scm`: fine-tuning with transformers' `Trainer`, offline.

The arguments are those of transformers' `run_glue.py` (`--model_name_or_path`, `--task_name`, `--max_seq_length`,
`--train_file`, ...; the shorter `--model`, `--task`, `--max_length` are aliases) plus every `TrainingArguments` flag
(`HfArgumentParser`, which also takes `--foo-bar` for `--foo_bar`): bf16/fp16, gradient checkpointing and
accumulation, `group_by_length`, seeds, checkpoints, `--push_to_hub`; runs under `torchrun` and `accelerate launch` as
any Trainer script does.

What runs: training, evaluation and test predictions, unless `--do_train`, `--do_eval` or `--do_predict` is given, in
which case exactly the phases given (`eval_strategy`, which switches `do_eval` on inside `TrainingArguments`, does not
count). Data are read and validated before anything is written. Running the same command again after a crash resumes
from the last complete checkpoint in `--output_dir`; a finished run (its `finished.json` marker written last) is not
redone. Only a run that trained writes a model card, and the card names the model it started from.
"""

import argparse
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import datasets
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
from transformers.hf_argparser import string_to_bool

from hf_roformer_cli import unknown_choice

from ..pretrained import resolve_checkpoint
from .cards import evaluation_results, push_with_model_card, write_fine_tuning_card
from .checkpoints import SaveAfterEpochEnd, read_finished, resume_checkpoint, write_finished
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
from .text_files import Labels, read_text_classification


logger = transformers.logging.get_logger(__name__)


class UsageError(ValueError):
    """A command line that cannot run as given; the message says what to change."""


@dataclass
class ModelArguments:
    """Which checkpoint to fine-tune and how its inputs are encoded (transformers' `run_glue.py` names)."""

    model_name_or_path: str = field(
        metadata={
            "aliases": ["--model"],
            "help": "Checkpoint directory, Hub id, or shipped:roformer-zh-char-small (the checkpoint in the package).",
        }
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"aliases": ["--tokenizer"], "help": "Tokenizer path or id (default: the model's)."}
    )
    max_seq_length: int = field(
        default=512, metadata={"aliases": ["--max_length", "--max-length"], "help": "Truncate inputs to this length."}
    )
    pad_to_max_length: bool = field(
        default=False,
        metadata={"help": "Pad every input to --max_seq_length (default: pad each batch to its longest)."},
    )
    model_max_length: int | None = field(
        default=None,
        metadata={"help": "`model_max_length` of the saved tokenizer (default: the model's max_position_embeddings)."},
    )
    rope_parameters: str | None = field(
        default=None,
        metadata={"help": 'JSON rope scaling for long inputs, e.g. \'{"rope_type": "ntk", "factor": 2.0}\'.'},
    )
    cache_dir: str | None = field(default=None, metadata={"help": "Where Hub downloads are cached."})
    model_revision: str = field(default="main", metadata={"help": "Hub revision (branch, tag or commit) of the model."})
    token: str | None = field(default=None, metadata={"help": "Hub token for private models."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow a model's own code from the Hub."})
    ignore_mismatched_sizes: bool = field(
        default=False, metadata={"help": "Load a checkpoint whose classifier has another number of labels."}
    )

    def rope_overrides(self) -> dict:
        """`from_pretrained` keyword arguments for `--rope_parameters`."""
        if self.rope_parameters is None:
            return {}
        try:
            parameters = json.loads(self.rope_parameters)
        except json.JSONDecodeError as error:
            raise UsageError(f"--rope_parameters is not valid JSON: {error.msg}") from None
        if not isinstance(parameters, dict):
            raise UsageError("--rope_parameters must be a JSON object")
        return {"rope_parameters": parameters}


@dataclass
class SampleArguments:
    """Use only the first examples of each split (quick runs), as `run_glue.py` does."""

    max_train_samples: int | None = field(default=None, metadata={"help": "Train on the first N examples only."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Evaluate on the first N examples only."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Predict the first N test examples."})


@dataclass
class GlueArguments:
    """Which GLUE task and where its data are: a directory in the published layout, explicit TSV files in that
    task's format, a `datasets` name, or a `save_to_disk` directory (exactly one)."""

    task_name: str = field(metadata={"aliases": ["--task"], "help": f"One of {', '.join(GLUE_TASKS)}."})
    data_dir: str | None = field(
        default=None, metadata={"help": "Directory in the published GLUE layout (<dir>/<Task>/train.tsv, ...)."}
    )
    train_file: str | None = field(default=None, metadata={"help": "The task's train.tsv (with --validation_file)."})
    validation_file: str | None = field(default=None, metadata={"help": "The task's dev.tsv."})
    test_file: str | None = field(default=None, metadata={"help": "The task's test.tsv (optional)."})
    dataset_name: str | None = field(default=None, metadata={"help": "A `datasets` name, e.g. nyu-mll/glue."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration (default: the task)."})
    dataset_dir: str | None = field(default=None, metadata={"help": "A `datasets.save_to_disk` directory."})


@dataclass
class TextClassificationArguments:
    """One's own labelled texts: CSV, TSV, JSON or JSON-lines files."""

    train_file: str = field(
        metadata={"help": "Training examples (.csv, .tsv, .json or .jsonl); it defines the labels."}
    )
    validation_file: str = field(metadata={"help": "Evaluation examples, with labels."})
    test_file: str | None = field(default=None, metadata={"help": "Examples to predict (labels optional)."})
    text_column_names: str | None = field(
        default=None,
        metadata={"help": "One or two text columns, comma-separated (default: sentence1,sentence2 / sentence / text)."},
    )
    label_column_name: str = field(default="label", metadata={"help": "The label column."})
    do_regression: bool | None = field(
        default=None,
        metadata={"help": "Predict a score (default: when the training labels have fractional parts)."},
    )


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
PHASES = ("do_train", "do_eval", "do_predict")


@dataclass(frozen=True)
class Phases:
    """What a run does; all three unless the command line names some."""

    train: bool = True
    evaluate: bool = True
    predict: bool = True


def requested_phases(argv: list[str]) -> Phases:
    """The phases the command line asks for: those of `--do_train`, `--do_eval`, `--do_predict` that it gives (with
    HfArgumentParser's spellings and values), or all three when it gives none. What `TrainingArguments` derives
    (`eval_strategy` switches `do_eval` on) is not a request."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for name in PHASES:
        parser.add_argument(
            f"--{name}", f"--{name.replace('_', '-')}", type=string_to_bool, nargs="?", const=True, default=None
        )
    given, _ = parser.parse_known_args(argv)
    values = [getattr(given, name) for name in PHASES]
    if all(value is None for value in values):
        return Phases()
    return Phases(*(bool(value) for value in values))


def parse(command: str, dataclass_types, defaults: dict, argv: list[str]):
    """Parse `argv` into the dataclasses and `TrainingArguments` (whose defaults are replaced by `defaults`), with the
    phases set to what the command line requests."""
    parser = HfArgumentParser((*dataclass_types, TrainingArguments), prog=f"hf-roformer finetune {command}")
    parser.set_defaults(**defaults)
    *parsed, training_args = parser.parse_args_into_dataclasses(args=argv)
    phases = requested_phases(argv)
    training_args.do_train, training_args.do_eval, training_args.do_predict = (
        phases.train,
        phases.evaluate,
        phases.predict,
    )
    return (*parsed, training_args, phases)


@dataclass
class TaskData:
    """A task read and validated: its examples and how to score and write them."""

    description: str  # for messages and cards, e.g. "GLUE MRPC"
    raw: datasets.DatasetDict  # train, evaluation and test splits: text_a, text_b?, label?, index
    model_kwargs: dict  # num_labels, id2label, problem_type, ...
    evaluation: list[tuple[str, str]]  # (split, metric prefix), the first is the one evaluated during training
    tests: list[str]  # splits to predict
    metrics_for: Callable[[str], Callable]  # split -> compute_metrics
    write_predictions: Callable[[str, np.ndarray, Path], None]  # split, model outputs, output directory
    card: dict  # dataset, dataset_tags, dataset_args, hub_dataset, language


def load_tokenizer_and_model(model_args: ModelArguments, training_args: TrainingArguments, **config_overrides):
    """Tokenizer and sequence-classification model (registered classes or remote code); the new head is initialized
    under `--seed`, so runs (and the processes of a distributed run) start from the same weights. The tokenizer's
    `model_max_length` becomes the model's trained length (or `--model_max_length`), so `truncation=True` truncates
    and every saved copy carries it."""
    transformers.set_seed(training_args.seed)
    hub = dict(cache_dir=model_args.cache_dir, revision=model_args.model_revision, token=model_args.token)
    hub["trust_remote_code"] = model_args.trust_remote_code
    model_path = resolve_checkpoint(model_args.model_name_or_path)
    tokenizer_path = resolve_checkpoint(model_args.tokenizer_name or model_args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path, **hub)
    model = AutoModelForSequenceClassification.from_pretrained(
        model_path,
        ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
        **hub,
        **model_args.rope_overrides(),
        **config_overrides,
    )
    set_model_max_length(tokenizer, model.config, model_args.model_max_length)
    return tokenizer, model


def set_model_max_length(tokenizer, config, override: int | None = None) -> None:
    """Give `tokenizer` the length its model was trained at (`max_position_embeddings`), or `override`."""
    length = override or getattr(config, "max_position_embeddings", None)
    if length:
        tokenizer.model_max_length = int(length)


def tokenize(dataset: datasets.Dataset, tokenizer, max_length: int, pad_to_max_length: bool = False):
    """Add input ids (and segment ids) for `text_a` (and `text_b`), truncated to `max_length`."""

    def encode(batch):
        pair = batch["text_b"] if "text_b" in batch else None
        padding = "max_length" if pad_to_max_length else False
        return tokenizer(batch["text_a"], pair, truncation=True, max_length=max_length, padding=padding)

    columns = [column for column in ("text_a", "text_b", "index") if column in dataset.column_names]
    return dataset.map(encode, batched=True, remove_columns=columns, desc="Tokenizing")


def first(dataset: datasets.Dataset, count: int | None) -> datasets.Dataset:
    """The first `count` examples (all when `count` is None)."""
    return dataset if count is None else dataset.select(range(min(count, len(dataset))))


def fine_tune(
    command: str,
    task: TaskData,
    model_args: ModelArguments,
    samples: SampleArguments,
    training_args: TrainingArguments,
    phases: Phases,
) -> dict[str, float]:
    """The Trainer run shared by every task: train (resuming an interrupted run), evaluate, predict, then the model
    card and the finished marker of a run that trained. Returns the metrics."""
    output_dir = Path(training_args.output_dir)
    if phases.train:
        finished = read_finished(output_dir)
        if finished is not None:
            if training_args.process_index == 0:
                print(
                    f"{output_dir} holds a finished run ({output_dir / 'finished.json'}): nothing to do. "
                    "Give another --output_dir to train again."
                )
            return finished.get("metrics", {})
        try:
            checkpoint = resume_checkpoint(output_dir, training_args.resume_from_checkpoint, training_args.world_size)
        except ValueError as error:
            raise UsageError(str(error)) from None
    tokenizer, model = load_tokenizer_and_model(model_args, training_args, **task.model_kwargs)
    limits = {"train": samples.max_train_samples}
    limits |= {split: samples.max_eval_samples for split, _ in task.evaluation}
    limits |= {split: samples.max_predict_samples for split in task.tests}
    length, pad = model_args.max_seq_length, model_args.pad_to_max_length
    encoded = {
        split: tokenize(first(data, limits.get(split)), tokenizer, length, pad) for split, data in task.raw.items()
    }
    first_evaluation = task.evaluation[0][0]
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=encoded["train"],
        eval_dataset=encoded[first_evaluation],
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=task.metrics_for(first_evaluation),
        callbacks=[SaveAfterEpochEnd()],
    )
    metrics: dict[str, float] = {}
    trained = False
    if phases.train:
        result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
        trained = trainer.state.global_step > 0
        trainer.save_model()
        trainer.log_metrics("train", result.metrics)
        trainer.save_metrics("train", result.metrics)
        trainer.save_state()
    if phases.evaluate:
        for split, prefix in task.evaluation:
            trainer.compute_metrics = task.metrics_for(split)
            metrics.update(trainer.evaluate(encoded[split], metric_key_prefix=prefix))
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    if phases.predict:
        test_metrics = {}
        for split in task.tests:  # every process predicts (a collective operation), one writes
            if split not in encoded:
                continue
            trainer.compute_metrics = task.metrics_for(split) if "label" in task.raw[split].column_names else None
            prefix = "test" if split == "test" else split
            output = trainer.predict(encoded[split], metric_key_prefix=prefix)
            if trainer.compute_metrics is not None:
                test_metrics.update(
                    {k: v for k, v in output.metrics.items() if not k.endswith(("_runtime", "_second"))}
                )
            if trainer.is_world_process_zero():
                task.write_predictions(split, output.predictions, output_dir)
        if test_metrics:
            trainer.log_metrics("test", test_metrics)
            trainer.save_metrics("test", test_metrics)
            metrics.update(test_metrics)
    if trainer.is_world_process_zero():
        report(command, task, model_args, trainer, phases, trained)

    def write_card():
        results = evaluation_results(metrics)
        return write_fine_tuning_card(trainer, model_args.model_name_or_path, results=results, **task.card)

    if trained and trainer.is_world_process_zero():
        write_card()
        record = {"command": command, "global_step": trainer.state.global_step, "metrics": metrics}
        write_finished(output_dir, record)
    if trained and training_args.push_to_hub:
        push_with_model_card(trainer, write_card)
    return metrics


def report(command: str, task: TaskData, model_args: ModelArguments, trainer: Trainer, phases: Phases, trained: bool):
    """One closing line that says what happened, and nothing that did not."""
    base, output_dir = model_args.model_name_or_path, trainer.args.output_dir
    if trained:
        print(
            f"Fine-tuned {base} on {task.description} ({trainer.state.global_step} steps); model, tokenizer and card "
            f"in {output_dir}"
        )
    elif phases.train:
        print(f"No training step ran (check --max_steps / --num_train_epochs); no model card written to {output_dir}")
    else:
        done = " and ".join(
            name for name, wanted in (("evaluated", phases.evaluate), ("predicted", phases.predict)) if wanted
        )
        print(
            f"{done.capitalize()} {base} on {task.description} without training (--do_train not given); results in "
            f"{output_dir}, no model card written"
        )


def label_kwargs(names: tuple[str, ...] | None) -> dict:
    """Configuration of the classification head: regression, or the labels by name."""
    if names is None:
        return {"num_labels": 1, "problem_type": "regression"}
    return {
        "num_labels": len(names),
        "id2label": dict(enumerate(names)),
        "label2id": {label: i for i, label in enumerate(names)},
    }


def predicted(logits: np.ndarray, regression: bool) -> np.ndarray:
    """Scores (regression) or class ids from the model's outputs."""
    return logits.squeeze(-1) if regression else logits.argmax(-1)


def glue_task(name: str) -> GlueTask:
    """The task named `--task_name`; an unknown name is refused with the list (and a close match)."""
    if name not in GLUE_TASKS:
        raise UsageError(unknown_choice("--task_name", name, list(GLUE_TASKS)))
    return GLUE_TASKS[name]


def load_glue_data(task: GlueTask, glue_args: GlueArguments) -> datasets.DatasetDict:
    """The task's splits from the one source given: TSV directory or files, `datasets` name or `save_to_disk` dir."""
    files = {"train": glue_args.train_file, "validation": glue_args.validation_file, "test": glue_args.test_file}
    given_files = any(path is not None for path in files.values())
    sources = [glue_args.data_dir, glue_args.dataset_name, glue_args.dataset_dir, given_files or None]
    if sum(source is not None for source in sources) != 1:
        raise UsageError(
            "Give exactly one data source: --data_dir, --train_file/--validation_file, --dataset_name or --dataset_dir."
        )
    if given_files:
        if len(evaluation_splits(task)) != 1:
            raise UsageError(f"{task.directory} has several dev/test files: use --data_dir")
        return read_glue(task, files=files)
    if glue_args.data_dir is not None:
        return read_glue(task, glue_args.data_dir)
    if glue_args.dataset_dir is not None:
        return from_hub_glue(task, datasets.load_from_disk(glue_args.dataset_dir))
    return from_hub_glue(
        task, datasets.load_dataset(glue_args.dataset_name, glue_args.dataset_config_name or task.name)
    )


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


def run_glue(argv: list[str]) -> dict[str, float]:
    """Fine-tune, evaluate and predict on one GLUE task; writes metrics, leaderboard files and a model card."""
    model_args, glue_args, samples, training_args, phases = parse(
        "glue", (ModelArguments, GlueArguments, SampleArguments), GLUE_DEFAULTS, argv
    )
    task = glue_task(glue_args.task_name)
    raw = load_glue_data(task, glue_args)  # validated before anything is written
    validation = evaluation_splits(task)

    def metrics_for(split):
        def compute(prediction):
            return glue_metrics(
                task.metrics, predicted(prediction.predictions, task.is_regression), prediction.label_ids
            )

        return compute

    def write_predictions(split, logits, output_dir):
        indices = first(raw[split], samples.max_predict_samples)["index"]
        write_glue_submission(
            task, split, indices, predicted(logits, task.is_regression), output_dir / task.submission[split]
        )

    data = TaskData(
        description=f"GLUE {task.directory}",
        raw=raw,
        model_kwargs=label_kwargs(task.labels),
        evaluation=[(split, "eval" + split.removeprefix("validation") * (i > 0)) for i, split in enumerate(validation)],
        tests=[split for split in test_splits(task) if split in raw],
        metrics_for=metrics_for,
        write_predictions=write_predictions,
        card=dict(
            dataset=f"GLUE {task.directory}",
            dataset_tags="nyu-mll/glue",
            dataset_args=task.name,
            hub_dataset=True,
            language="en",
        ),
    )
    return fine_tune("glue", data, model_args, samples, training_args, phases)


def classification_metric_names(labels: Labels) -> tuple[str, ...]:
    """Accuracy and F1 (of label id 1 for two classes, macro-averaged for more); Pearson, Spearman and MSE for
    regression."""
    if labels.is_regression:
        return ("pearson", "spearmanr", "mse")
    return ("accuracy", "f1") if len(labels.names) == 2 else ("accuracy", "macro_f1")


def run_text_classification(argv: list[str]) -> dict[str, float]:
    """Fine-tune on one's own CSV/TSV/JSON/JSON-lines files: single texts or pairs, classes or scores."""
    model_args, file_args, samples, training_args, phases = parse(
        "text-classification", (ModelArguments, TextClassificationArguments, SampleArguments), GLUE_DEFAULTS, argv
    )
    columns = [name.strip() for name in file_args.text_column_names.split(",")] if file_args.text_column_names else None
    files = {"train": file_args.train_file, "validation": file_args.validation_file, "test": file_args.test_file}
    raw, labels, chosen = read_text_classification(files, columns, file_args.label_column_name, file_args.do_regression)
    names = classification_metric_names(labels)

    def metrics_for(split):
        def compute(prediction):
            return glue_metrics(names, predicted(prediction.predictions, labels.is_regression), prediction.label_ids)

        return compute

    def write_predictions(split, logits, output_dir):
        with open(output_dir / "test_predictions.tsv", "w", encoding="utf-8") as handle:
            handle.write("index\tprediction\n")
            for index, value in enumerate(predicted(logits, labels.is_regression)):
                handle.write(
                    f"{index}\t{float(value):.4f}\n"
                    if labels.is_regression
                    else f"{index}\t{labels.names[int(value)]}\n"
                )

    train_file = Path(file_args.train_file)
    data = TaskData(
        description=f"{train_file.name} ({' + '.join(chosen)} -> {file_args.label_column_name})",
        raw=raw,
        model_kwargs=label_kwargs(labels.names),
        evaluation=[("validation", "eval")],
        tests=["test"] if "test" in raw else [],
        metrics_for=metrics_for,
        write_predictions=write_predictions,
        card=dict(dataset=train_file.name, dataset_tags="json" if train_file.suffix in (".json", ".jsonl") else "csv"),
    )  # fmt: skip
    return fine_tune("text-classification", data, model_args, samples, training_args, phases)


def run_cail(argv: list[str]) -> dict[str, float]:
    """Fine-tune on CAIL2019-SCM with the original recipe; report triplet accuracy on valid (and test)."""
    model_args, cail_args, samples, training_args, phases = parse(
        "cail2019-scm", (ModelArguments, CailArguments, SampleArguments), CAIL_DEFAULTS, argv
    )
    data_dir = Path(cail_args.data_dir)
    triplets = {split: read_cail_split(data_dir / f"{split}.json") for split in ("train", "valid")}
    if (data_dir / "test.json").exists():
        triplets["test"] = read_cail_split(data_dir / "test.json")
    limits = {
        "train": samples.max_train_samples,
        "valid": samples.max_eval_samples,
        "test": samples.max_predict_samples,
    }
    triplets = {split: records[: limits[split]] for split, records in triplets.items()}  # whole triplets
    raw = datasets.DatasetDict({split: cail_pairs(records) for split, records in triplets.items()})

    def metrics_for(split):
        labels = [record["label"] for record in triplets[split]]
        return lambda prediction: {"triplet_accuracy": triplet_accuracy(prediction.predictions, labels)}

    def write_predictions(split, scores, output_dir):
        with open(output_dir / "test_predictions.json", "w", encoding="utf-8") as handle:
            for score_b, score_c in np.asarray(scores).reshape(-1, 2):
                handle.write(json.dumps({"label": "B" if score_b > score_c else "C"}) + "\n")

    data = TaskData(
        description="CAIL2019-SCM",
        raw=raw,
        model_kwargs=dict(num_labels=1, problem_type="multi_label_classification", classifier_pooling="mean"),
        evaluation=[("valid", "eval")],
        tests=["test"] if "test" in raw else [],
        metrics_for=metrics_for,
        write_predictions=write_predictions,
        card=dict(dataset="CAIL2019-SCM", dataset_tags="cail2019-scm", language="zh"),
    )
    return fine_tune("cail2019-scm", data, model_args, SampleArguments(), training_args, phases)


TASKS = {"glue": run_glue, "text-classification": run_text_classification, "cail2019-scm": run_cail}


def main(task: str, argv: list[str]) -> dict[str, float]:
    """Entry point of `hf-roformer finetune TASK ...`; bad data and unusable arguments exit with their message (data
    errors name the file and line), not a traceback."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if task not in TASKS:
        raise SystemExit("error: " + unknown_choice("task", task, list(TASKS)))
    try:
        return TASKS[task](argv)
    except (DataError, UsageError) as error:
        raise SystemExit(f"error: {error}") from None
