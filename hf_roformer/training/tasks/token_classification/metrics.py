"""Entity-level precision, recall and F1 as transformers' `run_ner.py` reports them (seqeval over IOB2, strict
spans), overall and, with `entity_level`, per type: `precision`, `recall`, `f1`, `accuracy`, or `overall_*` and
`{type}_precision`, `{type}_recall`, `{type}_f1`, `{type}_number`.

Nested entities (a GlobalPointer head) are scored by the same definition on sets of spans, written here because
seqeval reads tag sequences, which cannot hold two entities on one token.
"""

from .tags import IOB2, Span, spans_to_tags


def entity_scores(
    gold: list[list[Span]], predicted: list[list[Span]], lengths: list[int], entity_level: bool = False
) -> dict[str, float]:
    """Scores of `predicted` against `gold` entities (token spans of sentences of `lengths` tokens), from seqeval."""
    from seqeval.metrics import accuracy_score, classification_report
    from seqeval.scheme import IOB2 as SEQEVAL_IOB2

    truth = [spans_to_tags(spans, length, IOB2) for spans, length in zip(gold, lengths, strict=True)]
    guess = [spans_to_tags(spans, length, IOB2) for spans, length in zip(predicted, lengths, strict=True)]
    report = classification_report(truth, guess, mode="strict", scheme=SEQEVAL_IOB2, output_dict=True, zero_division=0)
    overall = report["micro avg"]
    scores = {
        "precision": float(overall["precision"]),
        "recall": float(overall["recall"]),
        "f1": float(overall["f1-score"]),
        "accuracy": float(accuracy_score(truth, guess)),
    }
    if not entity_level:
        return scores
    result = {f"overall_{name}": value for name, value in scores.items()}
    for kind, values in report.items():
        if kind.endswith(" avg"):
            continue
        result.update(
            {
                f"{kind}_precision": float(values["precision"]),
                f"{kind}_recall": float(values["recall"]),
                f"{kind}_f1": float(values["f1-score"]),
                f"{kind}_number": int(values["support"]),
            }
        )
    return result


def span_set_scores(
    gold: list[list[Span]], predicted: list[list[Span]], entity_level: bool = False
) -> dict[str, float]:
    """The same scores for entities that may nest or overlap: an entity counts when its type and both ends match."""
    truth = {(index, *span) for index, spans in enumerate(gold) for span in spans}
    guess = {(index, *span) for index, spans in enumerate(predicted) for span in spans}

    def scored(truth, guess):
        hits = len(truth & guess)
        precision = hits / len(guess) if guess else 0.0
        recall = hits / len(truth) if truth else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return precision, recall, f1

    precision, recall, f1 = scored(truth, guess)
    if not entity_level:
        return {"precision": precision, "recall": recall, "f1": f1}
    result = {"overall_precision": precision, "overall_recall": recall, "overall_f1": f1}
    for kind in sorted({item[3] for item in truth | guess}):
        of_kind = [{item for item in items if item[3] == kind} for items in (truth, guess)]
        precision, recall, f1 = scored(*of_kind)
        result.update(
            {
                f"{kind}_precision": precision,
                f"{kind}_recall": recall,
                f"{kind}_f1": f1,
                f"{kind}_number": len(of_kind[0]),
            }
        )
    return result


__all__ = ["entity_scores", "span_set_scores"]
