"""Fine-tuning with transformers' `Trainer`: any task (`tasks/`: GLUE, one's own text files, CAIL2019-SCM, the
demo's reviews) on the run skeleton every training command shares (`training_run.py`), from the first check to the
model card.

`fine_tune` works in this order, so that a mistake stops the run before anything is read or written:

1. the model and tokenizer names are resolved (`shipped:NAME`, a directory, a Hub id checked with one request);
2. the output directory is checked (never an input; an earlier run of other arguments is refused unless
   `overwrite_output_dir`; the same arguments resume an interrupted run or find it finished);
3. the tokenizer is loaded and `max_seq_length` checked against its special tokens; an upload is checked against
   the Hub;
4. the task's data are read, validated (`load_task`) and encoded, and the model with the task's head is loaded: from
   the resume point when that checkpoint already holds every step of the training, which then is not resumed (the
   Trainer would run one step past the end), and a checkpoint past the end is refused;
5. the run record is written, and a summary says what will happen; then the Trainer trains (resuming from the last
   complete checkpoint, or the one `--resume_from_checkpoint` names), evaluates and predicts, and the model card and
   the finished marker are written last. Ctrl-C raises `RunInterrupted`, which says where a rerun resumes.

Messages go to the `hf_roformer` logger (INFO: what happens; WARNING: what needs attention), on the main process
only; the command line prints them.
"""

import contextlib
import dataclasses
import functools
import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import transformers
from transformers import AutoConfig, TrainerState, TrainingArguments
from transformers.trainer_utils import SaveStrategy

from .. import __version__
from ..pretrained.sources import ModelSource, check_hub_upload, load_tokenizer, resolve_model_source
from ..utils.errors import HubError
from ..utils.logs import transformers_warnings_off
from .batching import LengthAwareTrainer
from .cards import evaluation_results, push_with_model_card, write_fine_tuning_card
from .distributed import start_deepspeed_communication
from .lengths import (
    beyond_trained_length_note,
    check_sequence_length,
    record_trained_length,
    set_model_max_length,
)
from .tasks import Head, Task
from .training_run import FinishedTraining, TrainingRun, metric_line


logger = logging.getLogger(__name__)

WEIGHTS_AND_TOKENIZER = ("config.json", "model.safetensors", "tokenizer_config.json")
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


@dataclass(frozen=True)
class Phases:
    """What a run does; all three unless the command line names some."""

    train: bool = True
    evaluate: bool = True
    predict: bool = True


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


def planned_steps(training_args: TrainingArguments, train_examples: int) -> tuple[int, float]:
    """(optimizer steps, epochs) the Trainer will run for `train_examples` examples."""
    per_step = training_args.per_device_train_batch_size * max(training_args.world_size, 1)
    if training_args.dataloader_drop_last:
        batches = train_examples // per_step
    else:
        batches = math.ceil(train_examples / per_step)
    steps_per_epoch = max(batches // training_args.gradient_accumulation_steps, 1)
    if training_args.max_steps > 0:
        return training_args.max_steps, training_args.max_steps / steps_per_epoch
    return math.ceil(training_args.num_train_epochs * steps_per_epoch), training_args.num_train_epochs


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


def describe_training(training_args: TrainingArguments, train_examples: int, checkpoint: Path | None) -> list[str]:
    """The summary's lines about training: steps and batch, where checkpoints go, where it resumes."""
    steps, epochs = planned_steps(training_args, train_examples)
    processes = max(training_args.world_size, 1)
    batch = f"batch {training_args.per_device_train_batch_size} x {counted(processes, 'process', 'processes')}"
    if training_args.gradient_accumulation_steps > 1:
        batch += f" x {training_args.gradient_accumulation_steps} accumulated"
    saving = training_args.save_strategy != SaveStrategy.NO
    kept = f", checkpoints in {training_args.output_dir}/" if saving else ", no checkpoints (--save_strategy no)"
    lines = [f"training: {counted(steps, 'step')} ({epochs:g} epoch{'' if epochs == 1 else 's'}, {batch}){kept}"]
    if checkpoint is not None:
        explicit = training_args.resume_from_checkpoint is not None
        source = "as --resume_from_checkpoint asks" if explicit else "the last complete checkpoint"
        lines.append(f"resuming from {checkpoint}, {source}")
    return lines


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
    model_source = model_options.resolve(model_options.model_name_or_path, "--model_name_or_path")
    tokenizer_source = (
        model_source
        if model_options.tokenizer_name is None
        else model_options.resolve(model_options.tokenizer_name, "--tokenizer_name")
    )
    local_inputs = {
        "model": model_source.path if model_source.local else None,
        "tokenizer": tokenizer_source.path if tokenizer_source.local else None,
        **(inputs or {}),
    }
    run = TrainingRun.open(command, arguments, training_args, local_inputs, overwrite_output_dir)
    if run.finished is not None and phases.train:
        return run.nothing_to_do()
    checkpoint = run.resume_point(requested=training_args.resume_from_checkpoint) if phases.train else None

    tokenizer_flag = "--model_name_or_path" if model_options.tokenizer_name is None else "--tokenizer_name"
    with transformers_warnings_off():
        tokenizer = load_tokenizer(tokenizer_source, tokenizer_flag, "--tokenizer_name", **model_options.hub_kwargs())
    check_sequence_length(tokenizer, model_options.max_seq_length, pairs=False)
    if training_args.push_to_hub and phases.train:
        check_hub_upload(token=training_args.hub_token)
    task = load_task()
    task.inputs.check(tokenizer, model_options.max_seq_length, task.raw)
    encoded = {  # before the model: the training's length in steps decides whether its weights are a checkpoint's
        split: task.inputs.encode(data, tokenizer, model_options.max_seq_length, model_options.pad_to_max_length)
        for split, data in task.raw.items()
    }
    finished_training = None
    if phases.train:
        finished_training = run.finished_training(checkpoint, planned_steps(training_args, len(encoded["train"]))[0])
    weights_source, load_options = model_source, model_options
    if finished_training is not None:  # its model is loaded instead of the checkpoint's, and nothing resumes
        checkpoint = None
        weights_source = ModelSource(model_source.name, str(finished_training.model), True)
        load_options = dataclasses.replace(model_options, from_scratch=False, ignore_mismatched_sizes=False)

    start_deepspeed_communication(training_args)  # ZeRO-3 partitions the weights as they load
    model, info = load_model(weights_source, load_options, training_args.seed, task.head)
    configure_new_head(model, info, task.head, resumed_from=checkpoint, overrides=load_options.config_overrides)
    run.begin(__version__)
    lengths = {split: input_lengths(data) for split, data in encoded.items()}
    every_length = [length for split_lengths in lengths.values() for length in split_lengths]
    longer = sum(length > model.config.max_position_embeddings for length in every_length)
    note = beyond_trained_length_note(model.config, max(every_length, default=0), longer, len(every_length))
    if phases.train:  # the longest input trained on: saved with the model, and its tokenizer truncates there
        record_trained_length(model.config, max(lengths["train"], default=0))
    set_model_max_length(tokenizer, model.config, model_options.model_max_length)
    if run.main_process:
        logger.info(f"fine-tuning {model_options.model_name_or_path} on {task.description}")
        logger.info(describe_data(encoded, model_options.max_seq_length))
        for line in task.notes:
            logger.info(line)
        if note:
            logger.info(f"note: {note}")
        if load_options.from_scratch:
            logger.info(f"random weights: the architecture of {model_options.model_name_or_path}")
        elif checkpoint is None and finished_training is None:
            for level, line in describe_head(model, info, task.head):
                logger.log(level, line)
        if phases.train and trainer_class is None and finished_training is None:
            logger.info(batching.describe())
    encoded = {split: data.remove_columns("truncated") for split, data in encoded.items()}
    first_evaluation = task.evaluation[0][0]
    trainer = run.trainer(
        trainer_class or batching.trainer_class(),
        model=model,
        train_dataset=encoded["train"],
        eval_dataset=encoded[first_evaluation],
        processing_class=tokenizer,
        data_collator=task.inputs.collator(tokenizer, model.config, model_options.max_seq_length),
        compute_metrics=task.metrics_for(first_evaluation),
        compute_loss_func=task.loss,
        preprocess_logits_for_metrics=task.preprocess_logits,
    )
    metrics: dict[str, float] = {}
    written = (
        train_phase(run, trainer, len(encoded["train"]), checkpoint, finished_training, phases) if phases.train else []
    )
    trained = phases.train and trainer.state.global_step > 0
    with run.after_training(trainer, written) if trained else contextlib.nullcontext():
        if phases.evaluate:
            for split, prefix in task.evaluation:
                trainer.compute_metrics = task.metrics_for(split)
                evaluated = trainer.evaluate(encoded[split], metric_key_prefix=prefix)
                metrics.update(evaluated)
                if run.main_process:
                    logger.info(metric_line(prefix, evaluated))
            run.save_metrics(trainer, "eval", metrics)
            if task.write_evaluation is not None:
                for split, _ in task.evaluation:
                    written += run.write_new_files(functools.partial(task.write_evaluation, split))
            written.append("eval_results.json")
        if phases.predict:
            written += predict(run, trainer, task, encoded, metrics)

        def write_card():
            return write_fine_tuning_card(
                trainer,
                None if model_options.from_scratch else model_options.model_name_or_path,
                results=evaluation_results(metrics),
                from_scratch=model_options.from_scratch,
                architecture_of=Path(model_source.path).name if model_options.from_scratch else None,
                note=task.card_note(metrics) if task.card_note is not None else None,
                tasks=task.head.pipeline_tag,
                **task.card,
            )

        if trained:
            run.write_card(write_card)
            written.append("model card (README.md)")
            finished = {"command": command, "global_step": trainer.state.global_step, "metrics": metrics}
            run.finish(finished, [*WEIGHTS_AND_TOKENIZER, "README.md"])
    if run.main_process:
        report_end(model_options.model_name_or_path, task.description, trainer, phases, trained, written)
    if trained and training_args.push_to_hub:
        try:
            push_with_model_card(trainer, write_card)
        except Exception as error:  # any failure of the upload: the trained model is safe on disk either way
            raise HubError(
                f"the model is saved in {run.output_dir}, but the upload to the Hub failed ({type(error).__name__}: "
                f"{error}); upload the directory later with `hf upload`"
            ) from error
        if run.main_process:
            logger.info(f"uploaded to https://huggingface.co/{trainer.hub_model_id}")
    return metrics


def train_phase(
    run: TrainingRun,
    trainer,
    train_examples: int,
    checkpoint: Path | None,
    finished: FinishedTraining | None,
    phases: Phases,
    model_files: tuple[str, ...] = WEIGHTS_AND_TOKENIZER,
) -> list[str]:
    """Train (from `checkpoint`, None: the start) and write the model, tokenizer, training metrics and state, then the
    training marker (`trained.json`) vouching for them and the saved `model_files`; or, when the training is already
    `finished` (by an earlier run of these arguments that stopped later, or in the checkpoint `--resume_from_checkpoint`
    names), take its model and state without training a step. Every fine-tuning task trains through it, so that all
    rerun alike. Returns the outputs, as the closing line names them."""
    outputs = ["model", "tokenizer", "train_results.json", "trainer_state.json"]
    if finished is not None:
        trainer.state = TrainerState.load_from_json(str(finished.state))
        trainer.state.max_steps = finished.max_steps  # as the Trainer sets it when resuming
        if run.main_process:
            logger.info(describe_finished_training(finished, trainer.state.global_step, phases))
        if finished.outputs_whole:
            return outputs
        outputs.remove("train_results.json")  # the final checkpoint holds no training metrics
    else:
        if run.main_process:
            for line in describe_training(trainer.args, train_examples, checkpoint):
                logger.info(line)
        result = run.train(trainer, checkpoint)
        run.save_metrics(trainer, "train", result.metrics)
    run.save_model(trainer)
    with run.writing():
        trainer.save_state()
    if trainer.state.global_step > 0:
        record = {"command": run.command, "global_step": trainer.state.global_step}
        run.finish_training(record, [*model_files, "train_results.json", "trainer_state.json"])
    return outputs


def describe_finished_training(finished: FinishedTraining, steps: int, phases: Phases) -> str:
    """The line saying that the training is already done, where, and what the run does with its model instead."""
    if finished.requested is not None:
        done = (
            f"--resume_from_checkpoint {finished.requested}: the checkpoint holds the finished training "
            f"({steps:,} of {finished.max_steps:,} steps);"
        )
    else:
        done = f"training finished in an earlier run ({counted(steps, 'step')}):"
    uses = " and ".join(
        name for name, wanted in (("evaluating", phases.evaluate), ("predicting", phases.predict)) if wanted
    )
    instead = f"{uses} with its model" if uses else "saving its model"
    return f"{done} {instead} ({finished.model}), without training again"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 step`, `75 steps`: `count` and `noun`, in the plural (default: with an s) unless one."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {plural or noun + 's'}"


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


def report_end(model: str, description: str, trainer, phases: Phases, trained: bool, written: list):
    """The closing line of a run of `model` on the data `description` names: what happened and where everything went,
    and nothing that did not happen."""
    output_dir = trainer.args.output_dir
    files = ", ".join(written)
    if trained:
        logger.info(
            f"fine-tuned {model} on {description} ({counted(trainer.state.global_step, 'step')}); in {output_dir}/: "
            f"{files}"
        )
    elif phases.train:
        logger.warning(f"no training step ran; no model card written to {output_dir}/")
    else:
        done = " and ".join(
            name for name, wanted in (("evaluated", phases.evaluate), ("predicted", phases.predict)) if wanted
        )
        logger.info(
            f"{done} {model} on {description} without training (--do_train not given); in {output_dir}/: {files}; no "
            "model card written"
        )


__all__ = [
    "WEIGHTS_AND_TOKENIZER",
    "Batching",
    "ModelOptions",
    "Phases",
    "fine_tune",
    "planned_steps",
    "report_end",
    "train_phase",
]
