"""Batches that cost their real tokens, for data of mixed lengths (a few long documents among many short texts).

A padded batch costs its rows times its longest text: with 7% of documents past 1,000 tokens, nine random batches of
32 in ten hold one, and each costs what 32 long documents cost. Two things keep the cost at the real tokens while
keeping every result what the plain Trainer computes:

- **Training passes within a token budget.** A batch runs as one or several forward/backward passes over runs of its
  rows in length order, each at most `token_budget` padded tokens and split where that saves more padding than a pass
  costs, each trimmed to its own longest text, with each pass's loss weighted by its share of the rows (and the item
  count a loss divides by scaled to match): the gradients add up to the batch's (the same examples, the same mean;
  only the order of float sums and the dropout draws differ), so the batch size, learning-rate schedule and step
  count stay those the user set. Peak memory follows the budget, not the longest text times the batch size.
- **Evaluation in length order.** Evaluation and prediction batches are drawn longest first (little padding in each);
  the predictions are put back in the dataset's order before metrics are computed or written, so metrics and
  prediction files are those of the plain order.

Under DeepSpeed, whose engine counts backward passes itself, batches are not split.
"""

from contextlib import nullcontext

import numpy as np
import torch
from torch.utils.data import Sampler
from transformers import EvalPrediction, Trainer
from transformers.trainer_utils import denumpify_detensorize


class LengthSortedSampler(Sampler):
    """The indices of a dataset from its longest example to its shortest (ties in dataset order)."""

    def __init__(self, lengths: list[int]):
        self.order = np.argsort(-np.asarray(lengths), kind="stable")

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self):
        return iter(self.order.tolist())


def example_lengths(dataset, column: str = "input_ids") -> list[int]:
    """The token count of every example of a tokenized dataset: of its longest sequence when it holds several (the
    choices of a multiple-choice question)."""
    return [max(map(len, ids)) if ids and isinstance(ids[0], list) else len(ids) for ids in dataset[column]]


# A pass's fixed work (its operator calls, per layer and direction), counted as padded tokens: a split must save more
# padding than this. Small against a long document; it keeps a batch of similar short texts in one pass.
PASS_COST_TOKENS = 64


def passes_by_length(lengths: list[int], token_budget: int) -> list[list[int]]:
    """The rows of a batch (their lengths given) as passes: runs of rows in descending length order, each within
    `token_budget` padded tokens (a row longer than the budget alone), chosen to cost the fewest padded tokens plus
    `PASS_COST_TOKENS` a pass. Written here because a greedy fill pads short rows to a long one: for a random batch
    of 32 with two documents of 1,024 tokens among texts of 50, it runs two short texts at 1,024 tokens."""
    order = sorted(range(len(lengths)), key=lambda row: -lengths[row])
    ordered = [lengths[row] for row in order]
    best = [0] + [None] * len(ordered)  # best[j]: the cheapest cost of the first j rows; start[j]: its last pass
    start = [0] * (len(ordered) + 1)
    for stop in range(1, len(ordered) + 1):
        for first in range(stop - 1, -1, -1):
            padded = (stop - first) * ordered[first]  # rows first..stop-1, padded to the longest (the first)
            if padded > token_budget and stop - first > 1:
                break  # earlier starts are longer rows and more of them
            cost = best[first] + padded + PASS_COST_TOKENS
            if best[stop] is None or cost < best[stop]:
                best[stop], start[stop] = cost, first
    groups, stop = [], len(ordered)
    while stop:
        groups.append(order[start[stop] : stop])
        stop = start[stop]
    return groups[::-1]


def split_by_token_budget(inputs: dict, token_budget: int) -> list[tuple[dict, float]]:
    """`inputs` (a padded batch) as passes (`passes_by_length`), columns trimmed to each pass's longest row, with
    each pass's share of the rows. A batch that one pass serves best comes back whole."""
    mask = inputs["attention_mask"]
    if mask.dim() != 2:  # several sequences a row (multiple choice): rows run whole
        return [(inputs, 1.0)]
    rows, width = mask.shape
    if rows == 1:
        return [(inputs, 1.0)]
    groups = passes_by_length(mask.sum(dim=1).tolist(), token_budget)
    if len(groups) == 1:
        return [(inputs, 1.0)]
    passes = []
    for group in groups:
        index = torch.tensor(group, device=mask.device)
        columns = mask[index].any(dim=0).nonzero()
        start, stop = int(columns.min()), int(columns.max()) + 1
        sliced = {}
        for key, value in inputs.items():
            if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != rows:
                sliced[key] = value
                continue
            value = value.index_select(0, index)
            if value.dim() >= 2 and value.shape[1] == width and key != "labels":
                value = value[:, start:stop]
            sliced[key] = value
        passes.append((sliced, len(group) / rows))
    return passes


def reorder(predictions, order: np.ndarray):
    """`predictions` (an array or a nested tuple of arrays, rows in sampler order) back in dataset order."""
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    if isinstance(predictions, (tuple, list)):
        return type(predictions)(reorder(item, order) for item in predictions)
    return predictions[inverse] if predictions is not None else None


class LengthAwareTrainer(Trainer):
    """transformers' `Trainer` with batches that cost their real tokens (see the module): training batches above
    `token_budget` padded tokens run as several passes (None or 0: whole batches), and evaluation runs in length order
    with results in dataset order (`sort_evaluation`)."""

    def __init__(self, *args, token_budget: int | None = None, sort_evaluation: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.token_budget = token_budget or None
        self.sort_evaluation = sort_evaluation
        self._loss_share = 1.0
        self._evaluation_order: np.ndarray | None = None

    def training_step(self, model, inputs, num_items_in_batch=None):
        """One optimizer batch: whole, or as passes within the token budget whose weighted losses add up to it."""
        splits = self.token_budget is not None and not self.is_deepspeed_enabled
        passes = split_by_token_budget(inputs, self.token_budget) if splits else [(inputs, 1.0)]
        if len(passes) == 1:
            return super().training_step(model, inputs, num_items_in_batch)
        total = 0.0
        try:
            for index, (part, share) in enumerate(passes):
                # Each pass's loss is weighted by its share of the rows, and the count a loss may divide its sum by
                # (`num_items_in_batch`) scaled by the same share: a mean over the pass's rows and a sum over the
                # batch's items both come out as the whole batch's loss restricted to the pass.
                self._loss_share = share
                items = None if num_items_in_batch is None else num_items_in_batch * share
                last = index == len(passes) - 1
                with nullcontext() if last else self.accelerator.no_sync(model):  # reduce gradients once, at the end
                    total = total + super().training_step(model, part, items)
        finally:
            self._loss_share = 1.0
        return total

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The Trainer's loss, weighted by the share of the batch's rows in this pass."""
        result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if self._loss_share == 1.0:
            return result
        if return_outputs:
            return result[0] * self._loss_share, result[1]
        return result * self._loss_share

    def _get_eval_sampler(self, eval_dataset):
        """Longest examples first; the order is kept to put the results back (not with persistent workers, whose
        cached loaders would skip this)."""
        sorting = self.sort_evaluation and not self.args.dataloader_persistent_workers
        if not sorting or eval_dataset is None or "input_ids" not in eval_dataset.column_names:
            self._evaluation_order = None
            return super()._get_eval_sampler(eval_dataset)
        sampler = LengthSortedSampler(example_lengths(eval_dataset))
        self._evaluation_order = sampler.order
        return sampler

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                        metric_key_prefix="eval"):  # fmt: skip
        """The Trainer's loop over length-sorted batches, with predictions, labels and metrics in dataset order."""
        order, compute_metrics = self._evaluation_order, self.compute_metrics
        self._evaluation_order = None
        arguments = (dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix)
        if order is None:
            return super().evaluation_loop(*arguments)
        self.compute_metrics = None  # computed below, on the predictions in dataset order
        try:
            output = super().evaluation_loop(*arguments)
        finally:
            self.compute_metrics = compute_metrics
        predictions, labels = reorder(output.predictions, order), reorder(output.label_ids, order)
        metrics = dict(output.metrics)
        if compute_metrics is not None and predictions is not None and labels is not None:
            scores = denumpify_detensorize(compute_metrics(EvalPrediction(predictions=predictions, label_ids=labels)))
            metrics.update({f"{metric_key_prefix}_{key}": value for key, value in scores.items()})
        return type(output)(predictions=predictions, label_ids=labels, metrics=metrics, num_samples=output.num_samples)


__all__ = ["LengthAwareTrainer", "LengthSortedSampler", "passes_by_length", "split_by_token_budget"]
