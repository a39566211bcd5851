"""Extractive question answering (SQuAD, CMRC2018, DRCD) as transformers' `run_qa.py` trains it: a question and its
context are one input when they fit `max_seq_length` tokens (RoFormer has no length limit, so a whole document can be
one input), and windows of `max_seq_length` tokens overlapping by `doc_stride` beyond it. Answers are located through
the tokenizer's character offsets (char- and word-level checkpoints alike); a window that does not hold the whole
answer is labelled with [CLS]. Predictions and metrics map every window back to its question (`qa_predictions.py`);
the metrics are CMRC2018's or SQuAD's, as `language` says (`qa_metrics.py`)."""

from dataclasses import dataclass
from pathlib import Path

import datasets
from transformers import AutoModelForQuestionAnswering, DataCollatorWithPadding

from ....utils.errors import DataError, UsageError
from ...run.fine_tuning_task import Head, SampleLimits, Task, limited
from .files import read_question_answering_file
from .metrics import LANGUAGES, question_answering_scores
from .predictions import QuestionAnswers, best_answers, write_answer_files


# The prefixes of run_qa.py's prediction files: evaluation and test splits.
FILE_PREFIXES = {"validation": "eval", "test": "predict"}


@dataclass(frozen=True)
class QuestionFiles:
    """Where the questions are and how they are read and answered (`run_qa.py`'s names): `language` picks the
    metrics ("zh": CMRC2018, "en": SQuAD)."""

    train_file: str
    validation_file: str
    language: str
    test_file: str | None = None
    doc_stride: int = 128
    n_best_size: int = 20
    max_answer_length: int = 30
    version_2_with_negative: bool = False
    null_score_diff_threshold: float = 0.0

    def paths(self) -> dict[str, object]:
        """The local paths these files are (for the output directory's checks)."""
        return {"training file": self.train_file, "validation file": self.validation_file, "test file": self.test_file}


def token_span(offsets: list, sequence_ids: list, start_char: int, end_char: int) -> tuple[int, int] | None:
    """The first and last context tokens of the characters `start_char:end_char`, or None when the window does not
    hold them all. A token that holds the answer's first (last) character starts (ends) the span: with word-level
    tokens, an answer that begins or ends inside a word is labelled with the whole word."""
    context = [index for index, sequence in enumerate(sequence_ids) if sequence == 1]
    first, last = context[0], context[-1]
    if offsets[first][0] > start_char or offsets[last][1] < end_char:
        return None
    start = max(index for index in context if offsets[index][0] <= start_char)
    end = min(index for index in context if offsets[index][1] >= end_char)
    return start, end


class QuestionInputs:
    """Questions and contexts encoded whole up to `max_length` tokens and in windows overlapping by `doc_stride`
    tokens beyond it; `features[split]` keeps, for every window, its question id and its tokens' character offsets in
    the context (None outside it), for the answers."""

    def __init__(self, raw: datasets.DatasetDict, doc_stride: int, files: dict[str, str] | None = None):
        self.raw, self.doc_stride, self.files = raw, doc_stride, files or {}
        self.features: dict[str, tuple[list[str], list[list]]] = {}

    def check(self, tokenizer, max_length: int, raw: datasets.DatasetDict) -> None:
        """Refuse a stride that leaves no room and a question too long for a window: each needs its question, the
        special tokens, the stride and at least one new token of context within `max_length`."""
        if self.doc_stride >= max_length:
            raise UsageError(f"--doc_stride {self.doc_stride} must be below --max_seq_length {max_length}")
        specials = tokenizer.num_special_tokens_to_add(pair=True)
        for split, data in raw.items():
            lengths = [
                len(ids)
                for ids in tokenizer([q.lstrip() for q in data["question"]], add_special_tokens=False)["input_ids"]
            ]
            for question_id, length in zip(data["id"], lengths, strict=True):
                if length + specials + self.doc_stride >= max_length:
                    where = self.files.get(split, split)
                    raise DataError(
                        f"{where}: question {question_id!r} takes {length} tokens: with {specials} special tokens and "
                        f"--doc_stride {self.doc_stride} it leaves no context in --max_seq_length {max_length}"
                    )

    def encode(self, data: datasets.Dataset, tokenizer, max_length: int, pad_to_max_length: bool) -> datasets.Dataset:
        """One feature per window, labelled with the answer's tokens (the first answer; [CLS] when the window lacks it
        or the question has none) where the split has answers; `truncated`: the question's context took several
        windows."""
        split = next(name for name, split_data in self.raw.items() if split_data is data)
        encoded = tokenizer(
            [question.lstrip() for question in data["question"]],
            list(data["context"]),
            truncation="only_second",
            max_length=max_length,
            stride=self.doc_stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding="max_length" if pad_to_max_length else False,
        )
        questions = encoded["overflow_to_sample_mapping"]
        windows = [0] * len(data)
        for question in questions:
            windows[question] += 1
        question_ids, all_answers = list(data["id"]), list(data["answers"])
        labelled = any(answers["text"] for answers in all_answers)
        columns = {name: encoded[name] for name in tokenizer.model_input_names if name in encoded}
        starts, ends, feature_ids, feature_offsets = [], [], [], []
        held: set[int] = set()  # the questions whose first answer some window holds whole
        for index, question in enumerate(questions):
            sequence_ids = encoded.sequence_ids(index)
            offsets = encoded["offset_mapping"][index]
            feature_ids.append(question_ids[question])
            feature_offsets.append(
                [offset if sequence == 1 else None for offset, sequence in zip(offsets, sequence_ids, strict=True)]
            )
            answers = all_answers[question]
            span = None
            if answers["text"]:
                start_char = answers["answer_start"][0]
                span = token_span(offsets, sequence_ids, start_char, start_char + len(answers["text"][0]))
            starts.append(span[0] if span else 0)
            ends.append(span[1] if span else 0)
            if span:
                held.add(question)
        if split == "train" and labelled:
            self.check_every_answer_is_held(data, held, max_length)
        if labelled:
            columns.update(start_positions=starts, end_positions=ends)
        columns["truncated"] = [windows[question] > 1 for question in questions]
        self.features[split] = (feature_ids, feature_offsets)
        return datasets.Dataset.from_dict(columns)

    def check_every_answer_is_held(self, data: datasets.Dataset, held: set[int], max_length: int) -> None:
        """Refuse a training question whose answer no window holds whole (an answer longer than a window's context):
        it would train as unanswerable. The `DataError` names the file, the question and its answer."""
        for index, answers in enumerate(data["answers"]):
            if answers["text"] and index not in held:
                raise DataError(
                    f"{self.files.get('train', 'train')}: question {data['id'][index]!r}: its answer "
                    f"{answers['text'][0][:40]!r} does not fit whole in any window of --max_seq_length {max_length} "
                    f"(--doc_stride {self.doc_stride}), so it would train as unanswerable; raise --max_seq_length or "
                    "shorten the answer"
                )

    def collator(self, tokenizer, config, max_length: int):
        """Batches padded to their longest window."""
        return DataCollatorWithPadding(tokenizer)


def question_answering_head() -> Head:
    """The span head: a start and an end logit per token."""
    return Head(
        auto_class=AutoModelForQuestionAnswering,
        config={},
        weight_prefixes=("qa_outputs.",),
        name="question-answering",
        pipeline_tag="question-answering",
        outputs="a start and an end score a token",
    )


def question_answering_task_data(files: QuestionFiles, limits: SampleLimits) -> Task:
    """Questions from `files` (splits cut to `limits`), answered per question as run_qa.py does; predictions of the
    evaluation and test splits written as run_qa.py writes them."""
    if files.language not in LANGUAGES:
        raise UsageError(f"--language must be one of {', '.join(LANGUAGES)}, not {files.language!r}")
    paths = {"train": files.train_file, "validation": files.validation_file, "test": files.test_file}
    raw = datasets.DatasetDict(
        {
            split: read_question_answering_file(path, files.version_2_with_negative, need_answers=split != "test")
            for split, path in paths.items()
            if path is not None
        }
    )
    raw = limited(raw, ["test"], limits)
    if "train" in raw and not any(answers["text"] for answers in raw["train"]["answers"]):
        raise DataError(
            f"{files.train_file}: none of the {len(raw['train'])} questions trained on has an answer; the training "
            "loss needs answerable questions (unanswerable ones are learned beside them)"
        )
    inputs = QuestionInputs(raw, files.doc_stride, {split: path for split, path in paths.items() if path})
    answered: dict[str, QuestionAnswers] = {}

    def answers_of(split: str, predictions) -> QuestionAnswers:
        start_logits, end_logits = predictions[:2]
        feature_ids, feature_offsets = inputs.features[split]
        answered[split] = best_answers(
            list(raw[split].select_columns(["id", "context"])),
            feature_ids,
            feature_offsets,
            start_logits,
            end_logits,
            n_best_size=files.n_best_size,
            max_answer_length=files.max_answer_length,
            with_negative=files.version_2_with_negative,
            null_score_diff_threshold=files.null_score_diff_threshold,
        )
        return answered[split]

    def metrics_for(split):
        references = dict(zip(raw[split]["id"], (answers["text"] for answers in raw[split]["answers"]), strict=True))

        def compute(prediction):
            found = answers_of(split, prediction.predictions)
            return question_answering_scores(found.answers, references, files.language)

        return compute

    def write_predictions(split, predictions, output_dir: Path):
        return write_answer_files(answers_of(split, predictions), output_dir, FILE_PREFIXES.get(split, split))

    def write_evaluation(split, output_dir: Path):
        """The answers of the last evaluation of `split`."""
        return (
            write_answer_files(answered[split], output_dir, FILE_PREFIXES.get(split, split))
            if split in answered
            else []
        )

    train_file = Path(files.train_file)
    metric = "CMRC2018" if files.language == "zh" else "SQuAD v2.0" if files.version_2_with_negative else "SQuAD"
    return Task(
        description=f"{train_file.name} (question answering, {metric} metrics)",
        raw=raw,
        head=question_answering_head(),
        inputs=inputs,
        evaluation=[("validation", "eval")],
        metrics_for=metrics_for,
        card=dict(dataset=train_file.name, dataset_tags="json", language=files.language),
        tests=["test"] if "test" in raw else [],
        write_predictions=write_predictions,
        write_evaluation=write_evaluation,
        sources=files.paths(),
        notes=[question_counts(split, data) for split, data in raw.items() if split != "test"],
    )


def question_counts(split: str, data: datasets.Dataset) -> str:
    """The run summary's line of what was read of a split: `train: 120 questions (100 answerable, 20 unanswerable)`."""
    answerable = sum(bool(answers["text"]) for answers in data["answers"])
    return f"{split}: {len(data):,} questions ({answerable:,} answerable, {len(data) - answerable:,} unanswerable)"


def from_command_line(args, limits: SampleLimits):
    """The files `hf-roformer finetune question-answering` names and how answers are found and scored, as
    `(load_task, inputs)`: their questions are read when the run asks."""
    files = QuestionFiles(
        args.train_file, args.validation_file, args.language, args.test_file, args.doc_stride, args.n_best_size,
        args.max_answer_length, bool(args.version_2_with_negative), args.null_score_diff_threshold,
    )  # fmt: skip
    return (lambda: question_answering_task_data(files, limits)), files.paths()


__all__ = [
    "QuestionFiles",
    "QuestionInputs",
    "from_command_line",
    "question_answering_head",
    "question_answering_task_data",
    "token_span",
]
