"""Evaluation metrics as GLUE and CAIL2019-SCM define them (and those of one's own classification data), computed
with scikit-learn and SciPy (offline)."""

import numpy as np


def glue_metrics(names: tuple[str, ...], predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Metrics by name: accuracy, f1 (positive class 1), macro_f1, matthews_correlation, pearson, spearmanr, mse."""
    from scipy.stats import pearsonr, spearmanr  # imported when first scored: a command's start stays short
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef, mean_squared_error

    scores = {}
    for name in names:
        if name == "accuracy":
            scores[name] = float(accuracy_score(labels, predictions))
        elif name == "f1":
            scores[name] = float(f1_score(labels, predictions))
        elif name == "macro_f1":
            scores[name] = float(f1_score(labels, predictions, average="macro"))
        elif name == "mse":
            scores[name] = float(mean_squared_error(labels, predictions))
        elif name == "matthews_correlation":
            scores[name] = float(matthews_corrcoef(labels, predictions))
        elif name == "pearson":
            scores[name] = float(pearsonr(predictions, labels)[0])
        elif name == "spearmanr":
            scores[name] = float(spearmanr(predictions, labels)[0])
        else:
            raise ValueError(f"unknown GLUE metric {name!r}")
    return scores


def triplet_accuracy(pair_scores: np.ndarray, labels: list[str]) -> float:
    """CAIL2019-SCM accuracy: the share of triplets where the candidate labelled more similar scores strictly higher.

    `pair_scores` holds score(A, B) and score(A, C) of each triplet in turn (shape `(2 * n,)` or `(2 * n, 1)`);
    `labels` holds "B" or "C" per triplet.
    """
    scores = np.asarray(pair_scores, dtype=np.float64).reshape(-1, 2)
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} score pairs for {len(labels)} triplets")
    b_is_label = np.asarray(labels) == "B"
    correct = np.where(b_is_label, scores[:, 0] > scores[:, 1], scores[:, 1] > scores[:, 0])
    return float(np.mean(correct))
