"""Sentence vectors as docs/reading-comprehension.md trains them: Spearman's correlation of cosine similarities on
held-out pairs before training (`--do_eval` alone: the checkpoint mean-pooled as it is) and after
`hf-roformer finetune sentence-embedding`, with its steps, wall time and peak memory, on two sets made of data
packages ship:

- People's Daily pairs (`write_people_daily_sets`, the page's data): a question and the sentence it was made from
  (1) or another question's sentence (0). A question is its sentence but one word, so these pairs measure whether
  the command runs, not whether it learns: an untrained encoder already ranks them at the ceiling.
- Same-opinion reviews (`write_same_opinion_pairs`): two reviews, 1 when both praise or both complain, 0 otherwise.
  They share few characters, so only an encoder that learned the opinion scores them above chance (0).

    python benchmarks/bench_sentence_vectors.py                       # 1,500 training pairs of each set, 2 epochs
    python benchmarks/bench_sentence_vectors.py --train 1000 --epochs 1

For balanced 0/1 labels, Spearman's correlation with any score is at most about 0.866 (a perfect ranking). Each run
is the command in a fresh process (its own peak resident memory and CPU time). Results:
benchmarks/results/sentence_vectors_cpu.{json,md}.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import torch  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODEL = "shipped:roformer-zh-char-small"


def write_sets(directory: Path, train: int, validation: int) -> dict[str, Path]:
    """The two pair sets in `directory`: set name -> its folder (pairs-train.tsv, pairs-dev.tsv)."""
    from hf_roformer.apps.people_daily_sets import write_people_daily_sets
    from hf_roformer.apps.review_sets import write_same_opinion_pairs

    write_people_daily_sets(directory / "people-daily", train=train // 2, validation=validation // 2)
    write_same_opinion_pairs(directory / "reviews", train=train, validation=validation)
    return {
        "People's Daily (question, sentence)": directory / "people-daily",
        "same-opinion reviews": directory / "reviews",
    }


def run(work: Path, data: Path, name: str, flags: list[str], label: str, model=MODEL, scored="dev") -> dict:
    """One command in a fresh process: the Spearman of the `scored` pairs (dev or train), steps, wall and CPU time,
    peak memory."""
    command = [
        sys.executable, "-m", "hf_roformer_cli", "finetune", "sentence-embedding", "--model_name_or_path", model,
        "--train_file", str(data / "pairs-train.tsv"), "--validation_file", str(data / f"pairs-{scored}.tsv"),
        "--max_seq_length", "128", "--output_dir", str(work / name), "--disable_tqdm", "true", *flags,
    ]  # fmt: skip
    measured = benchlib.run_fine_tuning(command, work / name, label, "eval_spearman_cosine")
    return {"spearman": measured.pop("eval_spearman_cosine"), **measured}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=1500, help="training pairs of each set")
    parser.add_argument("--validation", type=int, default=1000, help="held-out pairs of each set")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--learning_rate", type=float, default=2e-4)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="sentence_vectors_cpu", help="results file name")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    training = [
        "--num_train_epochs", str(args.epochs), "--learning_rate", str(args.learning_rate),
        "--per_device_train_batch_size", str(args.batch_size),
    ]  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for index, (pair_set, data) in enumerate(write_sets(work, args.train, args.validation).items()):
            before = run(work, data, f"before-{index}", ["--do_eval"], f"{pair_set}: untrained")
            after = run(work, data, f"after-{index}", training, f"{pair_set}: trained")
            model = str(work / f"after-{index}")
            learned = run(work, data, f"seen-{index}", ["--do_eval"], f"{pair_set}: its training pairs", model, "train")
            row = {"pairs": pair_set, "spearman_before": before["spearman"], **after}
            row["spearman_training_pairs"] = learned["spearman"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    machine = {**benchlib.machine_info(torch.device("cpu")), "torch_threads": args.threads}
    payload = {"machine": machine, "command": " ".join(training), "sizes": vars(args), "runs": rows}
    headers = ["pairs", "Spearman untrained", "Spearman trained", "trained, on its training pairs", "steps",
               "wall s", "CPU s", "peak RSS GB", "load avg"]  # fmt: skip
    table = benchlib.markdown_table(
        headers,
        [
            [row["pairs"], row["spearman_before"], row["spearman"], row["spearman_training_pairs"], row["steps"],
             row["wall_s"], row["cpu_s"],
             row["peak_rss_gb"], f"{row['load_before']} -> {row['load_after']}"]
            for row in rows
        ],
    )  # fmt: skip
    markdown = (
        f"# Sentence vectors trained by `finetune sentence-embedding` ({machine['date']})\n\n{machine['cpu']}, "
        f"{args.threads} thread(s), torch {machine['torch']}, transformers {machine['transformers']}; "
        f"`{MODEL}`, {args.train} training and {args.validation} held-out pairs of each set, "
        f"`{' '.join(training)} --max_seq_length 128` (CoSENT, mean pooling); Spearman's correlation of cosine "
        f"similarities on the held-out pairs (at most about 0.866 for balanced 0/1 labels; 0 is chance), and of the "
        f"trained encoder on the pairs it was trained on (whether training moved it at all); wall and CPU time and "
        f"peak memory of the training command; load average (1 min) before -> after training.\n\n{table}"
    )
    benchlib.write_results(args.output, payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
