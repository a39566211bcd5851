"""Sentence-vector training with sentence-transformers' own trainer and losses, on the run skeleton every training
command shares (`training_run.py`: output directory, record, Ctrl-C and resume, save, finished marker).

- Scored or labelled pairs (LCQMC, AFQMC, STS-B) train with CoSENT (`CoSENTLoss`: the cosine of every pair ranked by
  its score against every other pair of the batch, the loss bert4torch users train Chinese encoders with); pairs
  without labels train with in-batch negatives (`MultipleNegativesRankingLoss`: each first sentence against every
  second sentence of the batch, batches without repeated texts). The file decides: a training file with labels is
  CoSENT, one without is in-batch negatives; `loss` may only confirm it.
- The encoder is the checkpoint's own sentence-transformers model when it has one (RoFormer-Sim: the [CLS] state
  through its pooler, `sentence_transformers_hf_roformer.py`), kept as it is; otherwise a Transformer module and a
  pooling module (`pooling`, mean by default, as sentence-transformers pools a plain encoder).
- The held-out split (the validation file, with scores) is scored by Spearman's correlation of cosine similarities
  (`EmbeddingSimilarityEvaluator`) after training, and a test file with scores likewise.
- The phases are those of every fine-tuning task (`run_steps.Phases`): training, the validation score, the test score;
  all three unless some are named. Without training, the model is scored as it is given and nothing of it is written;
  a training file is needed only to train.
- Training, and running again, follow every training command's order (`TrainingRun.run`): the model is saved and
  vouched for (`trained.json`) before it is scored, so a rerun after a stop while scoring only scores; a checkpoint
  at the training's last step is used as it is (resuming would train past the end), one past it is refused.

The saved directory is a sentence-transformers model: `SentenceTransformer(output_dir)` loads it, with the same
vectors.
"""

import contextlib
import dataclasses
import io
import logging
from dataclasses import dataclass
from pathlib import Path

from transformers import TrainingArguments, set_seed

from ....pretrained.sources import check_hub_upload
from ....utils.errors import DataError, UsageError
from ...run.fine_tuning_task import SampleLimits, first
from ...run.run_steps import WEIGHTS_AND_TOKENIZER, Phases, RunSteps, Training
from ...run.training_run import FinishedTraining, TrainingRun
from .files import read_sentence_pairs


logger = logging.getLogger(__name__)

LOSSES = ("cosent", "in-batch-negatives")
POOLINGS = ("mean", "cls", "max")
# What a saved sentence-transformers model's markers vouch for: its module list beside the transformer's own files.
SENTENCE_MODEL_FILES = ("modules.json", *WEIGHTS_AND_TOKENIZER)


@dataclass(frozen=True)
class SentenceEmbeddingOptions:
    """What to train (`finetune sentence-embedding`'s options)."""

    model_name_or_path: str
    train_file: str | None  # needed only to train
    validation_file: str
    test_file: str | None = None
    loss: str | None = None
    pooling: str | None = None
    max_seq_length: int = 128
    max_train_samples: int | None = None
    max_eval_samples: int | None = None
    max_predict_samples: int | None = None

    def paths(self) -> dict[str, object]:
        """The local paths this run reads (for the output directory's checks)."""
        model = self.model_name_or_path if Path(self.model_name_or_path).is_dir() else None
        return {
            "model": model,
            "training file": self.train_file,
            "validation file": self.validation_file,
            "test file": self.test_file,
        }


def chosen_loss(train, requested: str | None) -> str:
    """The loss the training pairs call for: CoSENT for scored pairs, in-batch negatives for unlabelled ones;
    `requested` must agree."""
    natural = "cosent" if "score" in train.column_names else "in-batch-negatives"
    if requested is not None and requested != natural:
        has = "has labels" if natural == "cosent" else "has no labels"
        raise UsageError(f"--loss {requested} does not fit the training file, which {has} (it trains with {natural})")
    return natural


def sentence_encoder(model_path: str, pooling: str | None, max_seq_length: int, device: str | None):
    """The SentenceTransformer to train: the checkpoint's own modules (its pooler kept) unless `pooling` is asked
    for, else a Transformer and `pooling` (default mean)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    if pooling is None and (Path(model_path) / "modules.json").exists():
        encoder = SentenceTransformer(model_path, device=device)
        encoder.max_seq_length = max_seq_length
        return encoder
    transformer = Transformer(model_path, max_seq_length=max_seq_length)
    pooled = Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling or "mean")
    return SentenceTransformer(modules=[transformer, pooled], device=device)


def sentence_training_arguments(training_args: TrainingArguments, in_batch_negatives: bool):
    """`training_args` as sentence-transformers' arguments; in-batch negatives get batches without repeated texts
    (a repeated text would be its own negative)."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    fields = dataclasses.fields(TrainingArguments)
    values = {field.name: getattr(training_args, field.name) for field in fields if field.init}
    if in_batch_negatives:
        values["batch_sampler"] = "no_duplicates"
    return SentenceTransformerTrainingArguments(**values)


def similarity_evaluator(pairs, name: str):
    """Spearman's correlation of cosine similarities with the pairs' scores."""
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    return EmbeddingSimilarityEvaluator(
        list(pairs["sentence1"]), list(pairs["sentence2"]), list(pairs["score"]), name=name, write_csv=False
    )


def pick_card_examples(encoder, pairs, seed: int) -> None:
    """sentence-transformers' model-card examples, picked from `pairs` by its own `set_widget_examples` (seeded by
    the run's seed, as the trainer seeds before it picks them) before the trainer would pick them, without the
    progress bar it draws while picking (it ignores `--disable_tqdm` and leaves a stray line in logs). Only that
    call's direct writes to stderr are dropped; logging keeps its own stream and errors still raise."""
    if not encoder.model_card_data.widget:
        set_seed(seed)
        with contextlib.redirect_stderr(io.StringIO()):
            encoder.model_card_data.set_widget_examples(pairs)


@contextlib.contextmanager
def removing_if_left_empty(directory: Path, main_process: bool):
    """Removes `directory` on leaving (also on Ctrl-C or an error) when it did not exist on entering and nothing was
    written into it; only the main process removes it, as only it writes."""
    existed = directory.exists()
    try:
        yield
    finally:
        if main_process and not existed and directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()


class SentenceEmbedding(RunSteps):
    """Sentence-vector training as `train_sentence_embedding` runs it: the steps of its run."""

    command = "finetune sentence-embedding"
    model_files = SENTENCE_MODEL_FILES

    def __init__(self, options: SentenceEmbeddingOptions, training_args: TrainingArguments, phases: Phases,
                 arguments: dict):  # fmt: skip
        if phases.train and options.train_file is None:
            raise UsageError(
                "--train_file is needed to train; to score the model as it is, pass --do_eval (or --do_predict with "
                "--test_file) without --do_train"
            )
        self.options, self.training_args, self.phases, self.arguments = options, training_args, phases, arguments
        self.model_name = options.model_name_or_path

    def inputs(self) -> dict[str, object]:
        """The model's directory and the pair files."""
        return self.options.paths()

    def read(self, run: TrainingRun) -> None:
        """The Hub checked when the trained model is to be uploaded; the pairs of every split, the held-out ones with
        scores; the loss the training pairs call for; the pooling named."""
        options = self.options
        if self.training_args.push_to_hub and self.phases.train:
            check_hub_upload(token=self.training_args.hub_token)
        splits = {"train": options.train_file, "validation": options.validation_file, "test": options.test_file}
        limits = {"train": options.max_train_samples, "validation": options.max_eval_samples}
        limits["test"] = options.max_predict_samples
        pairs = {split: first(read_sentence_pairs(path), limits[split]) for split, path in splits.items() if path}
        for split in ("validation", "test"):
            if split in pairs and "score" not in pairs[split].column_names:
                raise DataError(f"{splits[split]}: the {split} pairs need labels or scores (Spearman's correlation)")
        self.pairs = pairs
        self.loss_name = chosen_loss(pairs["train"], options.loss) if "train" in pairs else options.loss or LOSSES[0]
        if options.pooling is not None and options.pooling not in POOLINGS:
            raise UsageError(f"--pooling must be one of {', '.join(POOLINGS)}, not {options.pooling!r}")
        self.phases = dataclasses.replace(self.phases, predict=self.phases.predict and "test" in pairs)
        # the sampler's batches: `planned_steps` counts them as sentence-transformers' samplers do
        self.train_examples = len(pairs["train"]) if self.phases.train else 0
        if "train" in pairs:
            self.description = f"{Path(options.train_file).name} (sentence pairs, {self.loss_name} loss)"
        else:  # scoring only: the loss is only the evaluation's
            self.description = f"{Path(options.validation_file).name} (sentence pairs)"

    def build(self, run: TrainingRun, checkpoint: Path | None, finished: FinishedTraining | None) -> None:
        """The encoder (the trained sentence-transformers model, its modules as saved, when the training is done)
        and its loss."""
        from sentence_transformers.sentence_transformer.losses import CoSENTLoss, MultipleNegativesRankingLoss

        from ....pretrained import resolve_checkpoint

        options = self.options
        device = "cpu" if self.training_args.use_cpu else None
        if finished is None:
            model = resolve_checkpoint(options.model_name_or_path)
            self.encoder = sentence_encoder(model, options.pooling, options.max_seq_length, device)
        else:
            self.encoder = sentence_encoder(str(finished.model), None, options.max_seq_length, device)
        self.loss = (CoSENTLoss if self.loss_name == "cosent" else MultipleNegativesRankingLoss)(self.encoder)

    def describe(self, run: TrainingRun, checkpoint: Path | None, finished: FinishedTraining | None) -> None:
        """The pairs and the encoder's modules; the card's examples picked."""
        if run.main_process:
            counts = ", ".join(f"{len(data):,} {split}" for split, data in self.pairs.items())
            logger.info(f"sentence vectors of {self.model_name} on {self.description}: {counts} pairs")
            logger.info(f"encoder: {' -> '.join(type(module).__name__ for module in self.encoder)}")
        pick_card_examples(self.encoder, self.pairs["validation"], self.training_args.seed)

    def around_training(self, run: TrainingRun):
        """sentence-transformers' trainer makes `eval/` in the output directory for its evaluator's files, which
        `write_csv=False` leaves empty: a run that made it removes it when it is still empty."""
        return removing_if_left_empty(Path(self.training_args.output_dir) / "eval", run.main_process)

    def trainer(self, run: TrainingRun):
        """sentence-transformers' trainer, with the loss and the validation pairs' evaluator."""
        from sentence_transformers import SentenceTransformerTrainer

        return run.trainer(
            SentenceTransformerTrainer,
            args=sentence_training_arguments(self.training_args, self.loss_name == "in-batch-negatives"),
            model=self.encoder,
            train_dataset=self.pairs.get("train"),
            eval_dataset=self.pairs["validation"],
            loss=self.loss,
            evaluator=similarity_evaluator(self.pairs["validation"], "validation"),
        )

    def score(self, run: TrainingRun, training: Training) -> tuple[dict[str, float], list[str]]:
        """Spearman's correlation on the validation pairs and on the test pairs."""
        trainer, metrics, written = training.trainer, {}, []
        if self.phases.evaluate:
            evaluated = trainer.evaluate()
            metrics = {name.replace("eval_validation_", "eval_"): value for name, value in evaluated.items()}
            timings = ("_runtime", "_per_second", "_preparation_time")  # differ from run to run
            metrics = {name: value for name, value in metrics.items() if not name.endswith(timings)}
            run.save_metrics(trainer, "eval", metrics)
            written.append("eval_results.json")
        if self.phases.predict:
            scores = similarity_evaluator(self.pairs["test"], "test")(self.encoder)
            test_metrics = {f"test_{name.removeprefix('test_')}": value for name, value in scores.items()}
            run.save_metrics(trainer, "test", test_metrics)
            metrics.update(test_metrics)
            written.append("test_results.json")
        if run.main_process and metrics:
            shown = ", ".join(f"{name} {value:.4f}" for name, value in metrics.items() if "spearman_cosine" in name)
            logger.info(f"Spearman's correlation of cosine similarities: {shown}")
        return metrics, written

    def write_card(self, training: Training, metrics: dict) -> Path:
        """sentence-transformers' card, written again now that it holds the scores."""
        return write_card(training.trainer)


def train_sentence_embedding(
    options: SentenceEmbeddingOptions,
    training_args: TrainingArguments,
    phases: Phases,
    *,
    arguments: dict,
    overwrite: bool = False,
) -> dict[str, float]:
    """Run the `phases` the module describes (train, score the validation pairs, score the test pairs) and return the
    held-out metrics (`eval_spearman_cosine`, `test_spearman_cosine`); without training, the model is scored as it is
    given and nothing of it is written. Reruns and resuming follow the rules of every training command
    (`TrainingRun.run`): a training already finished (by an earlier run stopped while scoring, or in the checkpoint
    `--resume_from_checkpoint` names) is not trained again, and a checkpoint past this run's steps is refused."""
    steps = SentenceEmbedding(options, training_args, phases, arguments)
    return TrainingRun.run(steps, training_args, overwrite)


def write_card(trainer) -> Path:
    """sentence-transformers' model card of the trainer's model (with the scores it has seen) in its output directory;
    returns its path."""
    trainer.create_model_card()
    return Path(trainer.args.output_dir) / "README.md"


def from_command_line(args, limits: SampleLimits):
    """The options of the run `hf-roformer finetune sentence-embedding` describes (its model, files, loss, pooling,
    lengths) and the local paths it reads; the run reads the pairs itself."""
    options = SentenceEmbeddingOptions(
        args.model_name_or_path, args.train_file, args.validation_file, args.test_file, args.loss, args.pooling,
        args.max_seq_length, limits.train, limits.evaluation, limits.prediction,
    )  # fmt: skip
    return options, options.paths()


__all__ = [
    "LOSSES",
    "POOLINGS",
    "SentenceEmbedding",
    "SentenceEmbeddingOptions",
    "from_command_line",
    "train_sentence_embedding",
]
