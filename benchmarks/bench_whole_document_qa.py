"""Whole-document reading against windows: the documented `hf-roformer finetune question-answering` command on long
People's Daily documents (500 to 3,000 characters; `hf_roformer.apps.people_daily_sets`), from the shipped
checkpoint, once reading each document whole (`--max_seq_length` past the longest) and once in 512-token windows with
a 128-token stride, as a BERT-style reader must (transformers' `run_qa.py` uses 384 / 128). Same model, same steps,
same batch size (in inputs: documents or windows), same learning rate: exact match, F1 (CMRC2018's formulas), wall
time, training and evaluation time and peak memory of each.

    python benchmarks/bench_whole_document_qa.py                        # 800 training and 200 held-out questions
    python benchmarks/bench_whole_document_qa.py --train 64 --validation 32 --steps 16 --output NAME   # smaller
    python benchmarks/bench_whole_document_qa.py --readers windows --windows_steps 3900 --output NAME  # at equal time

Each run is the command in a fresh process; its peak resident memory is the process's own (`wait4`), its time the
wall time of the whole command. The load average before and after is recorded (the machine may be shared).
Results: benchmarks/results/whole_document_qa_cpu.{json,md}.
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
# --readers' name -> (the results' label, the reader's options)
READERS = {
    "whole": ("whole document", ["--max_seq_length", "3200"]),
    "windows": ("windows 512 / 128", ["--max_seq_length", "512"]),
}


def run(label: str, files: dict, work: Path, steps: int, batch: int, learning_rate: str, extra: list) -> dict:
    """The question-answering command in a fresh process: scores, times, peak resident memory."""
    output = work / f"run-{len(list(work.glob('run-*.log')))}"
    command = [
        sys.executable, "-m", "hf_roformer_cli", "finetune", "question-answering",
        "--model_name_or_path", "shipped:roformer-zh-char-small", "--language", "zh",
        "--train_file", str(files["train.jsonl"]), "--validation_file", str(files["dev.jsonl"]),
        "--output_dir", str(output), "--max_steps", str(steps), "--per_device_train_batch_size", str(batch),
        "--per_device_eval_batch_size", str(batch), "--learning_rate", learning_rate, "--save_strategy", "no",
        "--eval_strategy", "no", "--doc_stride", "128", "--disable_tqdm", "true", *extra,
    ]  # fmt: skip
    log = work / f"{output.name}.log"
    seconds, usage = benchlib.run_command(command, work, log, label)
    results = json.loads((output / "all_results.json").read_text())
    windows = [line for line in log.read_text().splitlines() if line.startswith("examples:")]
    row = {
        "reader": label, "exact_match": round(results["eval_exact_match"], 2), "f1": round(results["eval_f1"], 2),
        "wall_s": round(seconds, 1), "train_s": round(results["train_runtime"], 1),
        "eval_s": round(results["eval_runtime"], 1), "peak_rss_gb": round(usage.ru_maxrss * 1024 / 1e9, 2),
        "steps": steps, "inputs": windows[0].removeprefix("examples: ") if windows else "",
    }  # fmt: skip
    print(json.dumps(row, ensure_ascii=False), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=800, help="training questions")
    parser.add_argument("--validation", type=int, default=200, help="held-out questions")
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps of each reader")
    parser.add_argument("--readers", choices=("both", *READERS), default="both", help="which readers run")
    parser.add_argument(
        "--windows_steps", type=int, help="steps of the windowed reader (default: --steps); it trains about 10 times "
        "faster a step, so matching the whole-document reader's time takes about 10 times the steps",
    )  # fmt: skip
    parser.add_argument("--batch", type=int, default=4, help="inputs (documents or windows) a step")
    parser.add_argument("--learning_rate", default="3e-4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="whole_document_qa_cpu", help="results file name")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    from hf_roformer.apps.people_daily_sets import write_people_daily_sets

    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        files = write_people_daily_sets(work / "data", args.train, args.validation)
        questions = [json.loads(line) for line in files["dev.jsonl"].read_text(encoding="utf-8").splitlines()]
        lengths = sorted(len(question["context"]) for question in questions)
        for name, (label, extra) in READERS.items():
            if args.readers not in ("both", name):
                continue
            steps = args.windows_steps if name == "windows" and args.windows_steps else args.steps
            rows.append(run(label, files, work, steps, args.batch, args.learning_rate, extra))
    info = benchlib.machine_info(torch.device("cpu")) | {
        "threads": args.threads,
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in os.getloadavg()],
        "questions": {"train": args.train, "validation": args.validation},
        "held_out_document_chars": {"min": lengths[0], "median": lengths[len(lengths) // 2], "max": lengths[-1]},
        "batch": args.batch,
        "learning_rate": args.learning_rate,
    }
    headers = ["reader", "exact_match", "f1", "wall_s", "train_s", "eval_s", "peak_rss_gb", "steps", "inputs"]
    table = benchlib.markdown_table(headers, [[row[key] for key in headers] for row in rows])
    machine = ", ".join(f"{key} {value}" for key, value in info.items())
    command = "python benchmarks/bench_whole_document_qa.py " + " ".join(sys.argv[1:])
    benchlib.write_results(
        args.output,
        {"machine": info, "command": command, "rows": rows},
        f"# {args.output}\n\n`{command}`\n\n{machine}\n\n{table}",
    )
    print(table)


if __name__ == "__main__":
    main()
