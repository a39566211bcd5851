"""Answers from the start and end logits of extractive question answering, and the files `run_qa.py` writes.

Each question may have several features (windows of a long context); every window proposes its `n_best_size` best
starts and ends, spans that run backwards, leave the context or exceed `max_answer_length` tokens are dropped, and the
best span over all windows is the answer, cut from the context through the tokenizer's character offsets. With
unanswerable questions, the lowest [CLS] score of the question's windows is the null score, and the answer is empty
when it beats the best span by more than `null_score_diff_threshold`.

The rules are those of `postprocess_qa_predictions` in transformers' `examples/pytorch/question-answering/utils_qa.py`,
written here because that file is an example script, not part of the installed library.
"""

import collections
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class QuestionAnswers:
    """What `best_answers` found: the answer per question id; the n-best list per question id (text, probability,
    score, logits and, beyond run_qa.py's fields, the character offsets); with unanswerable questions, each
    question's null score minus its best span score (`null_odds`)."""

    answers: dict[str, str]
    n_best: dict[str, list[dict]]
    null_odds: dict[str, float] = field(default_factory=dict)


def spans_of_window(start_logits, end_logits, offsets, n_best_size: int, max_answer_length: int) -> list[dict]:
    """The candidate spans of one window: pairs of its `n_best_size` best starts and ends that lie in the context
    (`offsets` None outside it), run forward and span at most `max_answer_length` tokens."""
    starts = np.argsort(start_logits)[-1 : -n_best_size - 1 : -1]
    ends = np.argsort(end_logits)[-1 : -n_best_size - 1 : -1]
    spans = []
    for start in starts:
        for end in ends:
            if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                continue
            if end < start or end - start + 1 > max_answer_length:
                continue
            spans.append(
                {
                    "offsets": (int(offsets[start][0]), int(offsets[end][1])),
                    "score": float(start_logits[start] + end_logits[end]),
                    "start_logit": float(start_logits[start]),
                    "end_logit": float(end_logits[end]),
                }
            )
    return spans


def best_answers(
    questions: list[dict],
    feature_questions: list[str],
    feature_offsets: list[list],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    *,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> QuestionAnswers:
    """The answer of every question (`id`, `context`) from the logits of its features: `feature_questions[i]` is
    the question id of feature `i`, `feature_offsets[i]` its tokens' character offsets in the context (None outside
    the context)."""
    features_of = collections.defaultdict(list)
    for index, question_id in enumerate(feature_questions):
        features_of[question_id].append(index)
    found = QuestionAnswers({}, {})
    for question in questions:
        question_id, context = question["id"], question["context"]
        spans, null = [], None
        for index in features_of[question_id]:
            starts, ends, offsets = start_logits[index], end_logits[index], feature_offsets[index]
            null_score = float(starts[0] + ends[0])
            if null is None or null_score < null["score"]:
                null = {
                    "offsets": (0, 0),
                    "score": null_score,
                    "start_logit": float(starts[0]),
                    "end_logit": float(ends[0]),
                }
            spans += spans_of_window(starts, ends, offsets, n_best_size, max_answer_length)
        if with_negative and null is not None:
            spans.append(null)
        best = sorted(spans, key=lambda span: span["score"], reverse=True)[:n_best_size]
        if with_negative and null is not None and not any(span is null for span in best):
            best.append(null)
        for span in best:
            span["text"] = context[span["offsets"][0] : span["offsets"][1]]
        if not best or (len(best) == 1 and best[0]["text"] == ""):
            best.insert(0, {"offsets": (0, 0), "text": "empty", "score": 0.0, "start_logit": 0.0, "end_logit": 0.0})
        scores = np.array([span["score"] for span in best])
        probabilities = np.exp(scores - scores.max())
        probabilities /= probabilities.sum()
        for span, probability in zip(best, probabilities, strict=True):
            span["probability"] = float(probability)
        if not with_negative:
            found.answers[question_id] = best[0]["text"]
        else:
            best_span = next((span for span in best if span["text"] != ""), best[0])
            odds = null["score"] - best_span["start_logit"] - best_span["end_logit"]
            found.null_odds[question_id] = float(odds)
            found.answers[question_id] = "" if odds > null_score_diff_threshold else best_span["text"]
        found.n_best[question_id] = best
    return found


def write_answer_files(answers: QuestionAnswers, directory: Path, prefix: str) -> list[str]:
    """`{prefix}_predictions.json` ({id: answer}), `{prefix}_nbest_predictions.json` and, with unanswerable
    questions, `{prefix}_null_odds.json`, as `run_qa.py` writes them; returns the file names."""
    files = {f"{prefix}_predictions.json": answers.answers, f"{prefix}_nbest_predictions.json": answers.n_best}
    if answers.null_odds:
        files[f"{prefix}_null_odds.json"] = answers.null_odds
    for name, content in files.items():
        with open(directory / name, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(content, indent=4, ensure_ascii=False) + "\n")
    return list(files)


__all__ = ["QuestionAnswers", "best_answers", "spans_of_window", "write_answer_files"]
