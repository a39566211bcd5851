"""Sentence vectors as docs/reading-comprehension.md trains them: Spearman's correlation of cosine similarities on
held-out pairs before training (`--do_eval` alone: the checkpoint mean-pooled as it is) and after
`hf-roformer finetune sentence-embedding`, with its steps, wall time and peak memory, on sets made of data packages
ship (`--set`, each once by default):

- `paragraphs` (`write_same_paragraph_pairs`, the page's data): two sentences of one People's Daily paragraph,
  unlabelled, trained with in-batch negatives; held out, a sentence with another of its paragraph (1) or of another
  paragraph (0). They share a topic, seldom their characters: the untrained encoder ranks them part of the way.
- `people-daily` (`write_people_daily_sets`): a question and the sentence it was made from (1) or another question's
  sentence (0). A question is its sentence but one word, so these pairs measure whether the command runs, not whether
  it learns: an untrained encoder already ranks them at the ceiling.
- `reviews` (`write_same_opinion_pairs`): two reviews, 1 when both praise or both complain, 0 otherwise. They share
  few characters, so only an encoder that learned the opinion scores them above chance (0).

    python benchmarks/bench_sentence_vectors.py --set paragraphs --train 3500 --validation 500 --epochs 2 \
        --batch_size 32 --max_seq_length 64 --output sentence_vectors_paragraphs_cpu
    python benchmarks/bench_sentence_vectors.py --set people-daily --set reviews   # 1,500 pairs each, 2 epochs

For balanced 0/1 labels, Spearman's correlation with any score is at most about 0.866 (a perfect ranking). Each run
is the command in a fresh process (its own peak resident memory and CPU time). Where the training pairs are labelled
(CoSENT), the trained encoder also scores them: whether training moved it at all. Results:
benchmarks/results/sentence_vectors_cpu.{json,md} by default.
"""

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import torch  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODEL = "shipped:roformer-zh-char-small"
SETS = ("paragraphs", "people-daily", "reviews")


@dataclass
class PairSet:
    """A written set: its name in the table, its training and held-out files, and whether the training pairs are
    labelled (so that the trained encoder can score them)."""

    title: str
    train_file: Path
    validation_file: Path
    labelled_training: bool


def write_set(directory: Path, name: str, train: int, validation: int) -> PairSet:
    """The set `name` (see the module) of `train` and `validation` pairs in `directory`/`name`."""
    from hf_roformer.apps.people_daily_sets import write_people_daily_sets, write_same_paragraph_pairs
    from hf_roformer.apps.review_sets import write_same_opinion_pairs

    folder = directory / name
    if name == "paragraphs":
        paths = write_same_paragraph_pairs(folder, train=train, validation=validation)
        train_file, validation_file = paths["paragraph-pairs-train.tsv"], paths["paragraph-pairs-dev.tsv"]
        return PairSet("same-paragraph sentences (in-batch negatives)", train_file, validation_file, False)
    if name == "people-daily":
        paths = write_people_daily_sets(folder, train=train // 2, validation=validation // 2)
        title = "People's Daily (question, sentence)"
    else:
        paths = write_same_opinion_pairs(folder, train=train, validation=validation)
        title = "same-opinion reviews"
    return PairSet(title, paths["pairs-train.tsv"], paths["pairs-dev.tsv"], True)


def run(work: Path, pairs: PairSet, name: str, flags: list[str], label: str, model=MODEL, scored=None) -> dict:
    """One command in a fresh process: the Spearman of the `scored` pairs (default the held-out ones), steps, wall
    and CPU time, peak memory."""
    command = [
        sys.executable, "-m", "hf_roformer_cli", "finetune", "sentence-embedding", "--model_name_or_path", model,
        "--train_file", str(pairs.train_file), "--validation_file", str(scored or pairs.validation_file),
        "--output_dir", str(work / name), "--disable_tqdm", "true", *flags,
    ]  # fmt: skip
    measured = benchlib.run_fine_tuning(command, work / name, label, "eval_spearman_cosine")
    return {"spearman": measured.pop("eval_spearman_cosine"), **measured}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", dest="sets", action="append", choices=SETS, help="a set to run (default: each)")
    parser.add_argument("--train", type=int, default=1500, help="training pairs of each set")
    parser.add_argument("--validation", type=int, default=1000, help="held-out pairs of each set")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--learning_rate", type=float, default=2e-4)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="sentence_vectors_cpu", help="results file name")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    length = ["--max_seq_length", str(args.max_seq_length)]
    training = [
        "--num_train_epochs", str(args.epochs), "--learning_rate", str(args.learning_rate),
        "--per_device_train_batch_size", str(args.batch_size), *length,
    ]  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for index, name in enumerate(args.sets or SETS):
            pairs = write_set(work, name, args.train, args.validation)
            before = run(work, pairs, f"before-{index}", ["--do_eval", *length], f"{pairs.title}: untrained")
            after = run(work, pairs, f"after-{index}", training, f"{pairs.title}: trained")
            row = {"pairs": pairs.title, "spearman_before": before["spearman"], **after}
            row["spearman_training_pairs"] = None
            if pairs.labelled_training:
                seen = run(work, pairs, f"seen-{index}", ["--do_eval", *length], f"{pairs.title}: its training pairs",
                           str(work / f"after-{index}"), pairs.train_file)  # fmt: skip
                row["spearman_training_pairs"] = seen["spearman"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    machine = {**benchlib.machine_info(torch.device("cpu")), "torch_threads": args.threads}
    payload = {"machine": machine, "command": " ".join(training), "sizes": vars(args), "runs": rows}
    headers = ["pairs", "Spearman untrained", "Spearman trained", "trained, on its training pairs", "steps",
               "wall s", "CPU s", "peak RSS GB", "load avg"]  # fmt: skip
    table = benchlib.markdown_table(
        headers,
        [
            [row["pairs"], row["spearman_before"], row["spearman"],
             "-" if row["spearman_training_pairs"] is None else row["spearman_training_pairs"], row["steps"],
             row["wall_s"], row["cpu_s"],
             row["peak_rss_gb"], f"{row['load_before']} -> {row['load_after']}"]
            for row in rows
        ],
    )  # fmt: skip
    markdown = (
        f"# Sentence vectors trained by `finetune sentence-embedding` ({machine['date']})\n\n{machine['cpu']}, "
        f"{args.threads} thread(s), torch {machine['torch']}, transformers {machine['transformers']}; "
        f"`{MODEL}`, {args.train} training and {args.validation} held-out pairs of each set, "
        f"`{' '.join(training)}` (mean pooling; CoSENT on labelled pairs, in-batch negatives on unlabelled ones); "
        f"Spearman's correlation of cosine similarities on the held-out pairs (at most about 0.866 for balanced 0/1 "
        f"labels; 0 is chance), and of the trained encoder on the pairs it was trained on where they are labelled "
        f"(whether training moved it at all; - where they are not); wall and CPU time and "
        f"peak memory of the training command; load average (1 min) before -> after training.\n\n{table}"
    )
    benchlib.write_results(args.output, payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
