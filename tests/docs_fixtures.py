"""Tiny stand-ins, in a page's scratch directory, for the external files its code blocks name: what a reader brings
(data in published formats, a corpus), made small so the documented commands run in seconds.

Every page also finds `tests/fixtures/` of the repository at the same relative path, as a reader running the blocks
from a clone does (the test vocabularies and the original checkpoints written by bert4keras live there).
"""

import json
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


def fine_tuning_data(directory: Path) -> None:
    """glue_data/MRPC (published layout), train/dev/test.csv and train/dev.jsonl (Chinese reviews), cail/."""
    from test_finetune import make_glue

    make_glue(directory / "glue_data", "mrpc", examples=24)
    rows = "".join(f"{text},{label}\n" for text, label in REVIEWS)
    for name in ("train.csv", "dev.csv", "test.csv"):
        (directory / name).write_text("sentence,label\n" + rows, encoding="utf-8")
    for name in ("train.jsonl", "dev.jsonl"):
        lines = [json.dumps({"text": text, "label": label}, ensure_ascii=False) for text, label in REVIEWS]
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "cail").mkdir()
    for split in ("train", "valid", "test"):
        records = [{"A": "原告诉称被告欠款", "B": "被告拖欠货款", "C": "双方离婚纠纷", "label": "B"}] * 3
        records += [{"A": "原告要求离婚", "B": "借款合同纠纷", "C": "夫妻感情破裂", "label": "C"}] * 3
        text = "\n".join(json.dumps(record, ensure_ascii=False) for record in records) + "\n"
        (directory / "cail" / f"{split}.json").write_text(text, encoding="utf-8")


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
