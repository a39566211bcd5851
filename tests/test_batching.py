"""Batches that cost their real tokens (`training/run/batching.py`): a training batch split into passes within
a token budget trains as the whole batch does, every example is seen once per epoch, and length-sorted evaluation
gives the metrics and predictions of the data's order."""

from collections import Counter

import numpy as np
import pytest
import torch
from datasets import Dataset
from transformers import TrainingArguments

import hf_roformer
from hf_roformer.training.run.batching import LengthAwareTrainer, passes_by_length, split_by_token_budget


pytestmark = pytest.mark.releases("training.run.batching")  # see setup.cfg


VOCAB = 60


def pad(features: list[dict]) -> dict:
    """A padded batch (pad id 0, on the right) of tokenized examples with labels."""
    width = max(len(feature["input_ids"]) for feature in features)
    ids = [list(feature["input_ids"]) + [0] * (width - len(feature["input_ids"])) for feature in features]
    mask = [[1] * len(feature["input_ids"]) + [0] * (width - len(feature["input_ids"])) for feature in features]
    labels = [feature["labels"] for feature in features]
    return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask), "labels": torch.tensor(labels)}


def mixed_lengths(count: int = 40, seed: int = 0, regression: bool = False) -> Dataset:
    """`count` distinct examples: most short, a few long (as in documents among reviews); labels 0/1 (or scores)."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        length = int(rng.integers(40, 60)) if index % 8 == 0 else int(rng.integers(3, 12))
        ids = [2, 3 + index % 50, *rng.integers(5, VOCAB, length).tolist()]  # the second id names the example
        label = float(rng.uniform(0, 5)) if regression else int(rng.integers(0, 2))
        rows.append({"input_ids": ids, "labels": label, "example": index})
    return Dataset.from_list(rows)


def tiny_classifier(num_labels: int = 2) -> hf_roformer.HfRoFormerForSequenceClassification:
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=num_labels, pad_token_id=0,
    )  # fmt: skip
    return hf_roformer.HfRoFormerForSequenceClassification(config)


def trainer_for(tmp_path, dataset, token_budget, **arguments) -> LengthAwareTrainer:
    regression = isinstance(dataset[0]["labels"], float)
    defaults = dict(
        output_dir=str(tmp_path), per_device_train_batch_size=8, per_device_eval_batch_size=8, learning_rate=1e-2,
        max_steps=6, report_to=[], save_strategy="no", logging_strategy="no", seed=3, use_cpu=True,
        dataloader_pin_memory=False, disable_tqdm=True, remove_unused_columns=False,
    )  # fmt: skip
    return LengthAwareTrainer(
        model=tiny_classifier(1 if regression else 2), args=TrainingArguments(**(defaults | arguments)),
        train_dataset=dataset.remove_columns("example"), eval_dataset=dataset.remove_columns("example"),
        data_collator=pad, token_budget=token_budget,
        compute_metrics=None if regression else accuracy_and_first_errors,
    )  # fmt: skip


def count_forwards(model) -> list[int]:
    """A list that gets the padded width of every batch `model` runs, from now on."""
    widths = []

    def record(module, args, kwargs):
        widths.append(kwargs["input_ids"].shape[1])

    model.register_forward_pre_hook(record, with_kwargs=True)
    return widths


def accuracy_and_first_errors(prediction) -> dict:
    """Accuracy, and which examples of the first ten are wrong (a metric that notices a reordering)."""
    predicted = prediction.predictions.argmax(-1)
    wrong = predicted != prediction.label_ids
    return {"accuracy": float((~wrong).mean()), "first_errors": int(sum(2**i for i in range(10) if wrong[i]))}


def test_a_batch_splits_into_passes_within_the_budget_and_keeps_every_row():
    batch = pad([{"input_ids": [1] * n, "labels": i} for i, n in enumerate([3, 50, 7, 4])])
    passes = split_by_token_budget(batch, 64)
    assert [part["labels"].tolist() for part, _ in passes] == [[1], [2, 3, 0]]  # longest first, each pass trimmed
    assert [part["input_ids"].shape for part, _ in passes] == [(1, 50), (3, 7)]
    assert [share for _, share in passes] == [0.25, 0.75]
    similar = pad([{"input_ids": [1] * n, "labels": i} for i, n in enumerate([10, 9, 10, 8])])
    assert split_by_token_budget(similar, 200) == [(similar, 1.0)]  # splitting would save less than a pass costs


def test_passes_keep_long_documents_apart_from_short_texts():
    """Two documents of 1,024 tokens among 30 texts of about 50: the documents run together, the texts together
    (a greedy fill would pad two texts to 1,024)."""
    lengths = [50 + index % 7 for index in range(30)]
    lengths[4] = lengths[17] = 1024
    assert passes_by_length(lengths, 4096) == [[4, 17], sorted(set(range(30)) - {4, 17}, key=lambda row: -lengths[row])]


def test_passes_hold_every_row_once_within_the_budget():
    rng = np.random.default_rng(0)
    for _ in range(200):
        lengths = rng.integers(1, 1100, int(rng.integers(1, 40))).tolist()
        budget = int(rng.choice([512, 2048, 4096, 8192]))
        groups = passes_by_length(lengths, budget)
        assert sorted(row for group in groups for row in group) == list(range(len(lengths)))
        for group in groups:
            assert len(group) == 1 or len(group) * max(lengths[row] for row in group) <= budget


@pytest.mark.parametrize("accumulation", [1, 2])
@pytest.mark.parametrize("problem", ["classification", "regression"])  # a loss over the batch's items; a mean
def test_training_within_a_token_budget_ends_with_the_whole_batches_weights(problem, accumulation, tmp_path):
    """The passes' weighted losses add up to the batch's: the same weights after several optimizer steps, with and
    without gradient accumulation (only the order of float sums differs). Plain SGD, whose update is the gradient
    itself (Adam divides by the square root of tiny second moments, which magnifies the summation order to ~1e-5)
    and no clipping."""
    dataset = mixed_lengths(48, regression=problem == "regression")
    weights, passes = {}, {}
    for budget in (None, 64):
        trainer = trainer_for(
            tmp_path / str(budget), dataset, budget, gradient_accumulation_steps=accumulation, optim="sgd",
            max_grad_norm=0,  # no clipping, which would hide a gradient of the wrong scale
        )
        calls = count_forwards(trainer.model)
        trainer.train()
        weights[budget] = {name: value.detach().clone() for name, value in trainer.model.named_parameters()}
        passes[budget] = len(calls)
    assert passes[None] == 6 * accumulation < passes[64]  # one forward a batch, or several passes for some
    for name, value in weights[None].items():
        torch.testing.assert_close(weights[64][name], value, atol=1e-7, rtol=0, msg=name)


@pytest.mark.parametrize("sampling", ["random", "group_by_length"])
def test_every_example_is_seen_once_per_epoch_under_the_token_budget(sampling, tmp_path):
    dataset = mixed_lengths()
    trainer = trainer_for(
        tmp_path, dataset, 64, max_steps=-1, num_train_epochs=3, train_sampling_strategy=sampling
    )  # 40 examples, batches of 8: 5 steps an epoch
    seen = []

    def record(module, args, kwargs):
        mask = kwargs["attention_mask"].bool()
        seen.extend(tuple(ids[keep].tolist()) for ids, keep in zip(kwargs["input_ids"], mask, strict=True))

    trainer.model.register_forward_pre_hook(record, with_kwargs=True)
    trainer.train()
    expected = Counter(tuple(ids) for ids in dataset["input_ids"])
    assert len(seen) == 3 * len(dataset)
    for epoch in range(3):
        assert Counter(seen[epoch * len(dataset) : (epoch + 1) * len(dataset)]) == expected, epoch


def test_length_sorted_evaluation_gives_the_data_orders_metrics_and_predictions(tmp_path):
    dataset = mixed_lengths(37)  # the last batch is short
    results = {}
    for sort in (False, True):
        trainer = trainer_for(tmp_path / str(sort), dataset, None)
        trainer.sort_evaluation = sort
        order = count_forwards(trainer.model)
        metrics = trainer.evaluate()
        widths = list(order)
        predicted = trainer.predict(dataset.remove_columns("example"))
        results[sort] = metrics, predicted, widths
    (plain, plain_predicted, plain_widths), (sorted_, sorted_predicted, sorted_widths) = results[False], results[True]
    assert sorted_widths == sorted(sorted_widths, reverse=True) != plain_widths  # longest batches first
    assert sum(sorted_widths) < sum(plain_widths)  # less padding
    assert sorted_["eval_first_errors"] == plain["eval_first_errors"]
    assert sorted_["eval_accuracy"] == plain["eval_accuracy"]
    assert sorted_["eval_loss"] == pytest.approx(plain["eval_loss"], abs=1e-6)
    np.testing.assert_allclose(sorted_predicted.predictions, plain_predicted.predictions, atol=1e-5, rtol=0)
    np.testing.assert_array_equal(sorted_predicted.label_ids, plain_predicted.label_ids)
    assert sorted_predicted.metrics["test_first_errors"] == plain_predicted.metrics["test_first_errors"]


@pytest.mark.parametrize("problem", ["single_label_classification", "multi_label_classification", "regression"])
def test_gradient_accumulation_gives_the_update_of_the_whole_batch(problem, tmp_path):
    """2 accumulated batches of 4 take the step one batch of 8 takes, for every problem type (the Trainer passes
    `num_items_in_batch` and does not divide by the accumulation steps itself; a mean loss would double the step)."""
    rng = np.random.default_rng(1)
    labels = {
        "single_label_classification": lambda: int(rng.integers(0, 3)),
        "multi_label_classification": lambda: rng.integers(0, 2, 3).astype(float).tolist(),
        "regression": lambda: float(rng.uniform(0, 5)),
    }[problem]
    dataset = Dataset.from_list([{"input_ids": row["input_ids"], "labels": labels()} for row in mixed_lengths(16)])
    steps = {}
    for accumulation, batch in ((1, 8), (2, 4)):
        torch.manual_seed(0)
        config = tiny_classifier().config
        config.num_labels, config.problem_type = (1 if problem == "regression" else 3), problem
        model = hf_roformer.HfRoFormerForSequenceClassification(config)
        before = {name: value.detach().clone() for name, value in model.named_parameters()}
        arguments = TrainingArguments(
            output_dir=str(tmp_path / str(accumulation)), per_device_train_batch_size=batch, max_steps=1,
            gradient_accumulation_steps=accumulation, optim="sgd", learning_rate=0.1, max_grad_norm=0,
            lr_scheduler_type="constant", report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
            dataloader_pin_memory=False, train_sampling_strategy="sequential",
        )  # fmt: skip
        LengthAwareTrainer(model=model, args=arguments, train_dataset=dataset, data_collator=pad).train()
        steps[accumulation] = {name: value.detach() - before[name] for name, value in model.named_parameters()}
    for name, step in steps[1].items():
        torch.testing.assert_close(steps[2][name], step, atol=1e-7, rtol=1e-5, msg=name)
