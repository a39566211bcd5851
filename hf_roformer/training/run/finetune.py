"""Fine-tuning with transformers' `Trainer`: any task (`tasks/`: GLUE, one's own text files, CAIL2019-SCM, the
demo's reviews) on the run skeleton every training command shares (`training_run.py`), from the first check to the
model card.

`fine_tune` runs a task as `FineTuning`, the steps `TrainingRun.run` performs in the order every training command
shares (`training_run.py`):

1. the model and tokenizer names are resolved (`shipped:NAME`, a directory, a Hub id checked with one request);
2. after the output directory's check, the tokenizer is loaded and `max_seq_length` checked against its special
   tokens, an upload is checked against the Hub, and the task's data are read, validated (`load_task`) and encoded;
3. the model with the task's head is loaded (from the finished training's model when a training is already done:
   the Trainer would run one step past the end);
4. a summary says what will happen; the Trainer trains, evaluates and predicts, and the model card says what the
   task reached.

Messages go to the `hf_roformer` logger (INFO: what happens; WARNING: what needs attention), on the main process
only; the command line prints them.
"""

import dataclasses
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import transformers
from transformers import AutoConfig, TrainingArguments

from ...pretrained.sources import ModelSource, check_hub_upload, load_tokenizer, resolve_model_source
from ...utils.logs import transformers_warnings_off
from .batching import LengthAwareTrainer
from .cards import evaluation_results, write_fine_tuning_card
from .distributed import start_deepspeed_communication
from .fine_tuning_task import Head, Task
from .lengths import (
    beyond_trained_length_note,
    check_sequence_length,
    record_trained_length,
    set_model_max_length,
)
from .run_steps import WEIGHTS_AND_TOKENIZER, Phases, RunSteps, Training, counted, metric_line
from .training_run import FinishedTraining, TrainingRun


logger = logging.getLogger(__name__)

DEFAULT_TOKEN_BUDGET = 4096  # padded tokens per training pass, chosen by measurement: docs/long-documents.md
# What the heads a checkpoint may bring besides the encoder are called in messages.
HEAD_NAMES = {"cls": "masked-LM", "qa_outputs": "question-answering", "classifier": "classification"}


@dataclass
class ModelOptions:
    """Which checkpoint to fine-tune and how its inputs are encoded (transformers' `run_glue.py` names), plus
    `config_overrides` (configuration values set on top of the checkpoint's, as `run_mlm.py`'s) and `from_scratch`
    (the checkpoint's architecture with random weights)."""

    model_name_or_path: str
    tokenizer_name: str | None = None
    max_seq_length: int = 512
    pad_to_max_length: bool = False
    model_max_length: int | None = None
    rope_parameters: dict | None = None
    cache_dir: str | None = None
    model_revision: str = "main"
    token: str | None = None
    trust_remote_code: bool = False
    ignore_mismatched_sizes: bool = False
    config_overrides: dict | None = None
    from_scratch: bool = False

    def hub_kwargs(self) -> dict:
        """`from_pretrained` keyword arguments for Hub downloads and remote code."""
        return dict(
            cache_dir=self.cache_dir,
            revision=self.model_revision,
            token=self.token,
            trust_remote_code=self.trust_remote_code,
        )

    def resolve(self, name: str, flag: str) -> ModelSource:
        """Where `name` (given with `flag`) comes from, checked before loading."""
        return resolve_model_source(name, flag, self.model_revision, self.cache_dir, self.token)


@dataclass(frozen=True)
class Batching:
    """How batches are laid out (`batching.py`): training batches run as passes by length of at most `token_budget`
    padded tokens (None: whole batches), and evaluation runs in length order (`sort_evaluation`). The default budget
    was chosen by measurement on mixed-length data (docs/long-documents.md)."""

    token_budget: int | None = DEFAULT_TOKEN_BUDGET
    sort_evaluation: bool = True

    def trainer_class(self) -> Callable:
        """The Trainer that lays batches out this way."""
        return functools.partial(
            LengthAwareTrainer, token_budget=self.token_budget, sort_evaluation=self.sort_evaluation
        )

    def describe(self) -> str:
        """The run summary's line."""
        training = (
            f"training batches run in length-sorted passes of at most {self.token_budget:,} padded tokens "
            "(--token_budget)"
            if self.token_budget
            else "whole training batches (--token_budget 0)"
        )
        evaluation = "evaluation in length order" if self.sort_evaluation else "evaluation in data order"
        return f"batching: {training}, {evaluation} (--sort_evaluation)"


def load_model(model_source: ModelSource, model_options: ModelOptions, seed: int, head: Head):
    """The model with the task's head (registered classes or remote code), the head initialized under `seed` so every
    run (and every process of a distributed run) starts from the same weights; and the load report's findings, which
    the caller states in its own words (None for a model built from scratch)."""
    transformers.set_seed(seed)
    settings = {**head.config, **(model_options.config_overrides or {})}
    if model_options.rope_parameters is not None:
        settings["rope_parameters"] = model_options.rope_parameters
    options = {**model_options.hub_kwargs(), **model_source.load_kwargs}
    with transformers_warnings_off():  # the report's findings are returned and described by `describe_head`
        if model_options.from_scratch:
            config = AutoConfig.from_pretrained(model_source.path, **options, **settings)
            return head.auto_class.from_config(config, trust_remote_code=model_options.trust_remote_code), None
        return head.auto_class.from_pretrained(
            model_source.path,
            ignore_mismatched_sizes=model_options.ignore_mismatched_sizes,
            output_loading_info=True,
            **options,
            **settings,
        )


def head_is_new(info: dict | None, head: Head) -> bool:
    """Whether loading gave the model a new head: its weights were missing from the checkpoint or of another shape
    (`info`: the load report; None for a model built from scratch, whose weights are all new)."""
    if info is None:
        return True
    missing = [str(key) for key in info.get("missing_keys") or []]
    mismatched = [str(key[0] if isinstance(key, tuple) else key) for key in info.get("mismatched_keys") or []]
    return any(key.startswith(head.weight_prefixes) for key in missing + mismatched)


def configure_new_head(
    model, info: dict | None, head: Head, resumed_from: Path | None = None, overrides: dict | None = None
) -> None:
    """Set the task's `new_head_config` on the model's configuration when its head is new (saved with the model),
    except the keys the user's `overrides` set; a head the checkpoint brought keeps the configuration it was trained
    with, and so does a training resumed from `resumed_from` (the values its saved config holds, none where it holds
    none: a run begun by an earlier release)."""
    if not head_is_new(info, head):
        return
    settings = {key: value for key, value in head.new_head_config.items() if key not in (overrides or {})}
    saved_config = Path(resumed_from) / "config.json" if resumed_from is not None else None
    if settings and saved_config is not None and saved_config.is_file():
        saved = json.loads(saved_config.read_text(encoding="utf-8"))
        settings = {key: saved[key] for key in settings if key in saved}
    for key, value in settings.items():
        setattr(model.config, key, value)


def describe_head(model, info: dict, head: Head) -> list[tuple[int, str]]:
    """What loading the checkpoint into the model with the task's head did, as (log level, message) lines: a new head
    (the usual case when starting from a pre-trained encoder; the checkpoint's masked-LM head then goes unused), the
    head of a fine-tuned checkpoint, and, as a warning, any encoder weight the checkpoint lacked."""
    missing = sorted(str(key) for key in info.get("missing_keys") or [])
    unused = sorted(str(key) for key in info.get("unexpected_keys") or [] if "embed_positions" not in str(key))
    lines = []
    labels = model.config.num_labels
    names = head.label_names
    listed = f" ({', '.join(map(str, names))})" if names and len(names) <= 8 else ""
    regression = labels == 1 and model.config.problem_type == "regression"
    kind = head.outputs or ("regression" if regression else f"{counted(labels, 'label')}{listed}")
    if head_is_new(info, head):
        unused_heads = sorted({HEAD_NAMES.get(key.split(".")[0], key.split(".")[0] + ".*") for key in unused})
        note = f", {head.new_head_note}" if head.new_head_note else ""
        note += f"; the checkpoint's {' and '.join(unused_heads)} head goes unused" if unused_heads else ""
        lines.append((logging.INFO, f"new {head.name} head: {kind}{note}"))
    else:
        lines.append((logging.INFO, f"{head.name} head from the checkpoint: {kind}"))
    encoder_missing = [key for key in missing if not key.startswith(head.weight_prefixes)]
    if encoder_missing:
        shown = ", ".join(encoder_missing[:5]) + (" ..." if len(encoder_missing) > 5 else "")
        lines.append(
            (logging.WARNING, f"{len(encoder_missing)} weights are not in the checkpoint and start random: {shown}")
        )
    return lines


def input_lengths(encoded) -> list[int]:
    """The real tokens of each encoded example (padding to `--pad_to_max_length` not counted), of its longest
    sequence when it holds several (multiple choice): the lengths the model actually sees."""
    masked = "attention_mask" in encoded.column_names
    measure = sum if masked else len
    rows = encoded["attention_mask" if masked else "input_ids"]
    return [max(map(measure, row)) if row and isinstance(row[0], list) else measure(row) for row in rows]


def describe_data(encoded: dict, max_length: int) -> str:
    """Examples per split and how many texts the length limit cuts."""
    counts = ", ".join(f"{len(data):,} {split}" for split, data in encoded.items())
    truncated = sum(sum(data["truncated"]) for data in encoded.values())
    total = sum(len(data) for data in encoded.values())
    cut = f"{truncated:,} of {total:,} truncated" if truncated else "none truncated"
    return f"examples: {counts}; inputs cut to {max_length} tokens: {cut}"


class FineTuning(RunSteps):
    """A fine-tuning task (`load_task()` reads it) on a checkpoint, as `fine_tune` runs it: the steps of its run."""

    def __init__(
        self,
        command: str,
        load_task: Callable[[], Task],
        model_options: ModelOptions,
        training_args: TrainingArguments,
        phases: Phases,
        arguments: dict,
        inputs: dict[str, object] | None,
        batching: Batching,
        trainer_class: Callable | None,
    ):
        self.command, self.arguments, self.phases = command, arguments, phases
        self.load_task, self.model_options, self.training_args = load_task, model_options, training_args
        self.extra_inputs, self.batching, self.trainer_class = inputs or {}, batching, trainer_class
        self.model_name = model_options.model_name_or_path

    def inputs(self) -> dict[str, object]:
        """The model's and tokenizer's names resolved (`shipped:NAME`, a directory, a Hub id checked with one request);
        the local ones are inputs, with the task's files."""
        options = self.model_options
        self.model_source = options.resolve(options.model_name_or_path, "--model_name_or_path")
        self.tokenizer_source = (
            self.model_source
            if options.tokenizer_name is None
            else options.resolve(options.tokenizer_name, "--tokenizer_name")
        )
        return {
            "model": self.model_source.path if self.model_source.local else None,
            "tokenizer": self.tokenizer_source.path if self.tokenizer_source.local else None,
            **self.extra_inputs,
        }

    def read(self, run: TrainingRun) -> None:
        """The tokenizer (`max_seq_length` checked against its special tokens), an upload checked against the Hub,
        and the task's data read, validated and encoded: before the model, as the training's length in steps decides
        whether its weights are a checkpoint's."""
        options = self.model_options
        tokenizer_flag = "--model_name_or_path" if options.tokenizer_name is None else "--tokenizer_name"
        with transformers_warnings_off():
            self.tokenizer = load_tokenizer(
                self.tokenizer_source, tokenizer_flag, "--tokenizer_name", **options.hub_kwargs()
            )
        check_sequence_length(self.tokenizer, options.max_seq_length, pairs=False)
        if self.training_args.push_to_hub and self.phases.train:
            check_hub_upload(token=self.training_args.hub_token)
        self.task = task = self.load_task()
        self.description = task.description
        task.inputs.check(self.tokenizer, options.max_seq_length, task.raw)
        self.encoded = {
            split: task.inputs.encode(data, self.tokenizer, options.max_seq_length, options.pad_to_max_length)
            for split, data in task.raw.items()
        }
        self.train_examples = len(self.encoded["train"]) if self.phases.train else 0

    def build(self, run: TrainingRun, checkpoint: Path | None, finished: FinishedTraining | None) -> None:
        """The model with the task's head: a finished training's own model, else the checkpoint's (its new head
        configured); the longest input trained on saved with it, and its tokenizer truncating there."""
        weights_source, self.load_options = self.model_source, self.model_options
        if finished is not None:
            weights_source = ModelSource(self.model_source.name, str(finished.model), True)
            self.load_options = dataclasses.replace(
                self.model_options, from_scratch=False, ignore_mismatched_sizes=False
            )
        start_deepspeed_communication(self.training_args)  # ZeRO-3 partitions the weights as they load
        self.model, self.info = load_model(weights_source, self.load_options, self.training_args.seed, self.task.head)
        overrides = self.load_options.config_overrides
        configure_new_head(self.model, self.info, self.task.head, resumed_from=checkpoint, overrides=overrides)
        lengths = {split: input_lengths(data) for split, data in self.encoded.items()}
        every_length = [length for split_lengths in lengths.values() for length in split_lengths]
        longer = sum(length > self.model.config.max_position_embeddings for length in every_length)
        self.length_note = beyond_trained_length_note(
            self.model.config, max(every_length, default=0), longer, len(every_length)
        )
        if self.phases.train:
            record_trained_length(self.model.config, max(lengths["train"], default=0))
        set_model_max_length(self.tokenizer, self.model.config, self.model_options.model_max_length)

    def describe(self, run: TrainingRun, checkpoint: Path | None, finished: FinishedTraining | None) -> None:
        """The run summary: the task, its data, the head, the batching."""
        if not run.main_process:
            return
        options, task = self.model_options, self.task
        logger.info(f"fine-tuning {options.model_name_or_path} on {task.description}")
        logger.info(describe_data(self.encoded, options.max_seq_length))
        for line in task.notes:
            logger.info(line)
        if self.length_note:
            logger.info(f"note: {self.length_note}")
        if self.load_options.from_scratch:
            logger.info(f"random weights: the architecture of {options.model_name_or_path}")
        elif checkpoint is None and finished is None:
            for level, line in describe_head(self.model, self.info, task.head):
                logger.log(level, line)
        if self.phases.train and self.trainer_class is None and finished is None:
            logger.info(self.batching.describe())

    def trainer(self, run: TrainingRun):
        """The length-aware Trainer (or `trainer_class`) on the encoded splits, scoring the first evaluation split."""
        self.encoded = {split: data.remove_columns("truncated") for split, data in self.encoded.items()}
        task, first_evaluation = self.task, self.task.evaluation[0][0]
        return run.trainer(
            self.trainer_class or self.batching.trainer_class(),
            model=self.model,
            train_dataset=self.encoded["train"],
            eval_dataset=self.encoded[first_evaluation],
            processing_class=self.tokenizer,
            data_collator=task.inputs.collator(self.tokenizer, self.model.config, self.model_options.max_seq_length),
            compute_metrics=task.metrics_for(first_evaluation),
            compute_loss_func=task.loss,
            preprocess_logits_for_metrics=task.preprocess_logits,
        )

    def score(self, run: TrainingRun, training: Training) -> tuple[dict[str, float], list[str]]:
        """Every evaluation split (`eval_results.json`, the task's evaluation files), then the test splits."""
        trainer, task = training.trainer, self.task
        metrics: dict[str, float] = {}
        written = []
        if self.phases.evaluate:
            for split, prefix in task.evaluation:
                trainer.compute_metrics = task.metrics_for(split)
                evaluated = trainer.evaluate(self.encoded[split], metric_key_prefix=prefix)
                metrics.update(evaluated)
                if run.main_process:
                    logger.info(metric_line(prefix, evaluated))
            run.save_metrics(trainer, "eval", metrics)
            if task.write_evaluation is not None:
                for split, _ in task.evaluation:
                    written += run.write_new_files(functools.partial(task.write_evaluation, split))
            written.append("eval_results.json")
        if self.phases.predict:
            written += predict(run, trainer, task, self.encoded, metrics)
        return metrics, written

    def write_card(self, training: Training, metrics: dict) -> Path:
        """The fine-tuned model's card, with its results."""
        options, task = self.model_options, self.task
        return write_fine_tuning_card(
            training.trainer,
            None if options.from_scratch else options.model_name_or_path,
            results=evaluation_results(metrics),
            from_scratch=options.from_scratch,
            architecture_of=Path(self.model_source.path).name if options.from_scratch else None,
            note=task.card_note(metrics) if task.card_note is not None else None,
            tasks=task.head.pipeline_tag,
            **task.card,
        )


def fine_tune(
    command: str,
    load_task: Callable[[], Task],
    model_options: ModelOptions,
    training_args: TrainingArguments,
    phases: Phases,
    *,
    arguments: dict,
    inputs: dict[str, object] | None = None,
    overwrite_output_dir: bool = False,
    batching: Batching = Batching(),
    trainer_class: Callable | None = None,
) -> dict[str, float]:
    """Run fine-tuning task `command` (e.g. "finetune glue") as the module describes and return its metrics.

    `arguments` are the command's arguments that decide the result (recorded in the output directory: a rerun with
    other ones is refused unless `overwrite_output_dir`); `inputs` the local files and directories it reads (the
    output directory must stay apart from them). `trainer_class` replaces the length-aware Trainer of `batching`.
    """
    steps = FineTuning(
        command, load_task, model_options, training_args, phases, arguments, inputs, batching, trainer_class
    )
    return TrainingRun.run(steps, training_args, overwrite_output_dir)


def predict(run: TrainingRun, trainer, task: Task, encoded: dict, metrics: dict) -> list[str]:
    """Predict the task's test splits (every process: a collective operation), write the predictions on the main one,
    score the labelled ones into `metrics` (and `test_results.json`); returns the files written."""
    written, test_metrics = [], {}
    for split in task.tests:
        labelled = "label" in task.raw[split].column_names
        trainer.compute_metrics = task.metrics_for(split) if labelled else None
        prefix = "test" if split == "test" else split
        output = trainer.predict(encoded[split], metric_key_prefix=prefix)
        if labelled:
            scores = {k: v for k, v in output.metrics.items() if not k.endswith(("_runtime", "_second"))}
            test_metrics.update(scores)
            if run.main_process:
                logger.info(metric_line(prefix, scores))
        written += run.write_new_files(functools.partial(task.write_predictions, split, output.predictions))
    if test_metrics:
        run.save_metrics(trainer, "test", test_metrics)
        metrics.update(test_metrics)
        written.append("test_results.json")
    return written


__all__ = ["WEIGHTS_AND_TOKENIZER", "Batching", "FineTuning", "ModelOptions", "Phases", "fine_tune"]
