"""Exact match and F1 of extractive question answering, as the official scripts compute them: CMRC2018's for Chinese
(character-level F1 over the longest common substring, after its punctuation list) and SQuAD's for English (token F1
after SQuAD's normalization; v2.0's rules for unanswerable questions). Scores are percentages, the best over the
reference answers of each question, averaged over questions.

Written here from the official formulas because no installed library carries them offline: `evaluate`'s squad
metrics are scripts fetched from the Hub, and CMRC2018's script exists only in its repository.
"""

import collections
import re
import string


# CMRC2018's `sp_char` (cmrc2018_evaluate.py), kept as the script has it: "……" is two characters and never matches
# one, and "‘" is not in the list although "’" is.
CMRC_PUNCTUATION = frozenset(
    ["-", ":", "_", "*", "^", "/", "\\", "~", "`", "+", "=", "，", "。", "：", "？", "！", "“", "”", "；", "’", "《",
     "》", "……", "·", "、", "「", "」", "（", "）", "－", "～", "『", "』"]
)  # fmt: skip
CJK_CHARACTER = re.compile(r"[\u4e00-\u9fa5]")
# The script splits runs of non-Chinese text with `nltk.word_tokenize`; nltk is not a dependency, and this expression
# splits words, numbers (3.5, 1,000) and punctuation as it does on such runs (it differs on English contractions).
WORD_OR_MARK = re.compile(r"\d+(?:[.,]\d+)*|\w+|[^\w\s]")
ASCII_PUNCTUATION = frozenset(string.punctuation)  # SQuAD's `exclude`


def cmrc_segments(text: str, drop_punctuation: bool = False) -> list[str]:
    """CMRC2018's `mixed_segmentation`: lowercased, each Chinese character and each listed punctuation mark a segment,
    the runs between them split into words."""
    segments, run = [], ""
    for char in text.lower().strip():
        if drop_punctuation and char in CMRC_PUNCTUATION:
            continue
        if CJK_CHARACTER.match(char) or char in CMRC_PUNCTUATION:
            segments.extend(WORD_OR_MARK.findall(run))
            run = ""
            segments.append(char)
        else:
            run += char
    segments.extend(WORD_OR_MARK.findall(run))
    return segments


def cmrc_without_punctuation(text: str) -> str:
    """CMRC2018's `remove_punctuation`: lowercased and stripped, the listed marks removed."""
    return "".join(char for char in text.lower().strip() if char not in CMRC_PUNCTUATION)


def longest_common_substring(first: list[str], second: list[str]) -> int:
    """Length of the longest run of segments common to both (CMRC2018's `find_lcs`)."""
    best, previous = 0, [0] * (len(second) + 1)
    for item in first:
        current = [0] * (len(second) + 1)
        for j, other in enumerate(second):
            if item == other:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def cmrc_f1(prediction: str, answer: str) -> float:
    """CMRC2018's F1 of one prediction against one answer."""
    predicted, expected = cmrc_segments(prediction, True), cmrc_segments(answer, True)
    common = longest_common_substring(expected, predicted)
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def cmrc_exact(prediction: str, answer: str) -> float:
    """CMRC2018's exact match of one prediction against one answer."""
    return float(cmrc_without_punctuation(prediction) == cmrc_without_punctuation(answer))


def squad_normalized(text: str) -> str:
    """SQuAD's `normalize_answer`: lowercased, punctuation and articles removed, whitespace collapsed."""
    text = "".join(char for char in text.lower() if char not in ASCII_PUNCTUATION)
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text, flags=re.UNICODE).split())


def squad_f1(prediction: str, answer: str) -> float:
    """SQuAD's token F1 of one prediction against one answer (v2.0's rule: an empty side scores 1 only against an
    empty side, as v1.1 never meets)."""
    predicted, expected = squad_normalized(prediction).split(), squad_normalized(answer).split()
    if not predicted or not expected:
        return float(predicted == expected)
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def squad_exact(prediction: str, answer: str) -> float:
    """SQuAD's exact match of one prediction against one answer."""
    return float(squad_normalized(prediction) == squad_normalized(answer))


SCORERS = {"zh": (cmrc_exact, cmrc_f1), "en": (squad_exact, squad_f1)}
LANGUAGES = tuple(SCORERS)


def question_answering_scores(
    predictions: dict[str, str], references: dict[str, list[str]], language: str
) -> dict[str, float]:
    """`exact_match` and `f1` (percentages) of `predictions` (question id -> answer, "" for no answer) against
    `references` (question id -> reference answers; an empty list: unanswerable) with the official formulas of
    `language` ("zh": CMRC2018, "en": SQuAD). An unanswerable question scores 1 exactly when the prediction is empty
    (SQuAD v2.0's rule, applied to both languages: CMRC2018 has no such questions)."""
    exact, f1 = SCORERS[language]
    totals = {"exact_match": 0.0, "f1": 0.0}
    for question_id, answers in references.items():
        predicted = predictions[question_id]
        if not answers:
            score = float(predicted.strip() == "")
            totals["exact_match"] += score
            totals["f1"] += score
            continue
        totals["exact_match"] += max(exact(predicted, answer) for answer in answers)
        totals["f1"] += max(f1(predicted, answer) for answer in answers)
    count = max(len(references), 1)
    return {name: 100.0 * total / count for name, total in totals.items()}


__all__ = [
    "LANGUAGES",
    "cmrc_exact",
    "cmrc_f1",
    "cmrc_segments",
    "question_answering_scores",
    "squad_exact",
    "squad_f1",
]
