"""CAIL2019-SCM, similar-case matching of long legal documents, as the original recipe reads it: each triplet
(A, B, C) becomes the pairs (A, B) and (A, C), scored through a sigmoid with masked mean pooling; the metric is the
triplet accuracy."""

import dataclasses
import json
from pathlib import Path

import datasets
import numpy as np

from ...run.fine_tuning_task import SampleLimits, Task
from ..classification_metrics import triplet_accuracy
from ..sequence_classification import SentenceInputs, classification_head
from .files import cail_pairs, read_cail_split


def cail_task_data(data_dir: str, limits: SampleLimits) -> Task:
    """CAIL2019-SCM from `data_dir` (train.json, valid.json, optional test.json); the sample limits count whole
    triplets."""
    directory = Path(data_dir)
    triplets = {split: read_cail_split(directory / f"{split}.json") for split in ("train", "valid")}
    if (directory / "test.json").exists():
        triplets["test"] = read_cail_split(directory / "test.json")
    counts = {"train": limits.train, "valid": limits.evaluation, "test": limits.prediction}
    triplets = {split: records[: counts[split]] for split, records in triplets.items()}
    raw = datasets.DatasetDict({split: cail_pairs(records) for split, records in triplets.items()})

    def metrics_for(split):
        labels = [record["label"] for record in triplets[split]]
        return lambda prediction: {"triplet_accuracy": triplet_accuracy(prediction.predictions, labels)}

    def write_predictions(split, scores, output_dir):
        with open(output_dir / "test_predictions.json", "w", encoding="utf-8") as handle:
            for score_b, score_c in np.asarray(scores).reshape(-1, 2):
                handle.write(json.dumps({"label": "B" if score_b > score_c else "C"}) + "\n")
        return ["test_predictions.json"]

    # One sigmoid score a pair (a label list per pair: `multi_label_classification`), named in messages only.
    config = dict(num_labels=1, problem_type="multi_label_classification", classifier_pooling="mean")
    head = dataclasses.replace(classification_head(("more similar",)), config=config)
    return Task(
        description="CAIL2019-SCM",
        raw=raw,
        head=head,
        inputs=SentenceInputs(),
        evaluation=[("valid", "eval")],
        metrics_for=metrics_for,
        card=dict(dataset="CAIL2019-SCM", dataset_tags="cail2019-scm", language="zh"),
        tests=["test"] if "test" in raw else [],
        write_predictions=write_predictions,
        sources={"data directory": data_dir},
    )


def from_command_line(args, limits: SampleLimits):
    """The data directory `hf-roformer finetune cail2019-scm` names, as `(load_task, inputs)`: its triplets are read
    when the run asks."""
    return (lambda: cail_task_data(args.data_dir, limits)), {"data directory": args.data_dir}


__all__ = ["cail_task_data", "from_command_line"]
