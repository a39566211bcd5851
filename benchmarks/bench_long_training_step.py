"""One training step on long inputs: time and peak resident memory, hf_roformer against BERT with SDPA of the same size.

    python benchmarks/bench_long_training_step.py              # 32 x 1,024 tokens, attention dropout 0.1, 2 threads
    python benchmarks/bench_long_training_step.py --rounds 1 --batch 8 --length 512   # a quick look
    PYTHONPATH=/path/to/older/checkout python benchmarks/bench_long_training_step.py --models hf_roformer \
        --output long_training_step_cpu_before     # the same step on an older commit (recorded in the results)

Both models have the size of the shipped checkpoint (hf_roformer/pretrained/roformer-zh-char-small: hidden 256, 4
layers, 4 heads, intermediate 1024, vocab 4188) with a sequence-classification head and random weights; BERT's
position table is widened to the input length. Dropouts are the checkpoint's (hidden and attention 0.1) unless
`--attention-dropout` says otherwise. Each measurement runs in a fresh process, so the peak resident set (VmHWM) is
that model's alone: it builds the model, runs `--steps` steps (forward, backward, AdamW) on one random batch and reports
the last step's wall time and the process's peak resident memory. Rounds alternate the models, so drifting load hits
both alike. Results: benchmarks/results/long_training_step_cpu.{json,md}, with the machine, the library versions, the
measured hf_roformer commit and OMP_WAIT_POLICY (on a loaded machine, OpenMP's spinning threads slow code with many
operator calls most: compare runs made under the same setting).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402


CHECKPOINT_CONFIG = Path(hf_roformer.__file__).resolve().parent / "pretrained/roformer-zh-char-small/config.json"
SIZE_KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
MODELS = ("hf_roformer", "bert_sdpa")


def checkpoint_size() -> dict:
    """The shipped checkpoint's size and dropouts, read from its config."""
    config = json.loads(CHECKPOINT_CONFIG.read_text())
    return {key: config[key] for key in (*SIZE_KEYS, "hidden_dropout_prob", "attention_probs_dropout_prob")}


def build_model(kind: str, length: int, attention_dropout: float | None) -> torch.nn.Module:
    """A sequence classifier (2 labels) of the checkpoint's size with seeded random weights, in training mode."""
    size = checkpoint_size()
    if attention_dropout is not None:
        size["attention_probs_dropout_prob"] = attention_dropout
    torch.manual_seed(0)
    if kind == "bert_sdpa":
        config = transformers.BertConfig(**size, max_position_embeddings=length, num_labels=2)
        config._attn_implementation = "sdpa"
        model = transformers.BertForSequenceClassification(config)
    else:
        config = hf_roformer.HfRoFormerConfig(**size, num_labels=2, attn_implementation="sdpa")
        model = hf_roformer.HfRoFormerForSequenceClassification(config)
    return model.train()


def probe(kind: str, batch: int, length: int, steps: int, attention_dropout: float | None) -> dict:
    """Build one model, run `steps` training steps, return the last step's seconds and the peak resident memory."""
    model = build_model(kind, length, attention_dropout)
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, model.config.vocab_size, (batch, length), generator=generator)
    labels = torch.randint(0, 2, (batch,), generator=generator)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    built_kib = benchlib.resident_kib("VmRSS")
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - start)
    return {
        "step_s": seconds[-1],
        "step_s_all": seconds,
        "peak_rss_mb": benchlib.resident_kib("VmHWM") / 1024,
        "built_rss_mb": built_kib / 1024,
        "loss": loss.item(),
    }


def run_probe(kind: str, args) -> dict:
    """`probe` in a fresh Python process (its own peak resident set)."""
    command = [
        sys.executable, __file__, "--probe", kind, "--batch", str(args.batch), "--length", str(args.length),
        "--steps", str(args.steps), "--threads", str(args.threads),
    ]  # fmt: skip
    if args.attention_dropout is not None:
        command += ["--attention-dropout", str(args.attention_dropout)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def code_version() -> dict:
    """Which hf_roformer was measured: its directory, that checkout's commit and whether the package's files differ
    from it (a benchmark of an older commit, run with `PYTHONPATH=<that checkout>`, says so)."""
    directory = Path(hf_roformer.__file__).resolve().parent
    result = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(directory), "status", "--porcelain", "--", "."], capture_output=True, text=True
    )
    return {
        "path": str(directory),
        "commit": result.stdout.strip() or None,
        "uncommitted_changes": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None,
    }


def to_markdown(payload: dict) -> str:
    """The table of medians and ratios."""
    machine, settings = payload["machine"], payload["settings"]
    rows = []
    for kind, result in payload["summary"].items():
        rows.append(
            [
                kind,
                f"{result['step_s_median']:.2f}",
                f"{result['step_s_min']:.2f}-{result['step_s_max']:.2f}",
                f"{result['peak_rss_mb_median']:,.0f}",
                f"{result['peak_rss_mb_median'] - result['built_rss_mb_median']:,.0f}",
            ]
        )
    table = benchlib.markdown_table(
        ["model", "step s (median)", "step s (range)", "peak RSS MB", "peak above the built model MB"], rows
    )
    ratios = ""
    if set(MODELS) <= set(payload["summary"]):
        ours, bert = payload["summary"]["hf_roformer"], payload["summary"]["bert_sdpa"]
        ratios = (
            f"hf_roformer / BERT-SDPA: time {ours['step_s_median'] / bert['step_s_median']:.2f}x, peak memory "
            f"{ours['peak_rss_mb_median'] / bert['peak_rss_mb_median']:.2f}x.\n"
        )
    return (
        f"# One training step at {settings['batch']} x {settings['length']} (CPU)\n\n"
        f"Machine: {machine['cpu']}, {machine['torch_threads']} threads, torch {machine['torch']}, transformers "
        f"{machine['transformers']}, Python {machine['python']}, {machine['date']}; OMP_WAIT_POLICY "
        f"{payload['omp_wait_policy'] or 'unset'}. hf_roformer at commit {payload['hf_roformer']['commit']}.\n\n"
        f"Sequence classification at the size of the shipped checkpoint ({payload['size']}), attention dropout "
        f"{payload['attention_dropout']}, float32, AdamW. Each model runs in its own fresh process per round "
        f"({settings['rounds']} rounds, the models alternating), {settings['steps']} steps per process on one random "
        f"batch; time: the last step's wall time; peak: the process's peak resident set (VmHWM).\n\n{table}\n"
        + ratios
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="steps per process; the last one is timed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--attention-dropout", type=float, default=0.1, help="attention_probs_dropout_prob of both models"
    )
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS), help="models to measure")
    parser.add_argument("--probe", choices=MODELS, help=argparse.SUPPRESS)
    parser.add_argument("--output", default="long_training_step_cpu", help="results file name (without extension)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.probe:
        transformers.logging.set_verbosity_error()
        print(json.dumps(probe(args.probe, args.batch, args.length, args.steps, args.attention_dropout)))
        return

    runs = {kind: [] for kind in args.models}
    for round_index in range(args.rounds):
        order = args.models if round_index % 2 == 0 else args.models[::-1]
        for kind in order:
            result = run_probe(kind, args)
            runs[kind].append(result)
            print(
                f"round {round_index + 1} {kind:12s} {result['step_s']:7.2f} s  {result['peak_rss_mb']:8,.0f} MB peak",
                flush=True,
            )
    summary = {}
    for kind, results in runs.items():
        times = [result["step_s"] for result in results]
        summary[kind] = {
            "step_s_median": statistics.median(times),
            "step_s_min": min(times),
            "step_s_max": max(times),
            "peak_rss_mb_median": statistics.median(result["peak_rss_mb"] for result in results),
            "built_rss_mb_median": statistics.median(result["built_rss_mb"] for result in results),
        }
    payload = {
        "machine": benchlib.machine_info(torch.device("cpu")),
        "settings": {key: getattr(args, key) for key in ("batch", "length", "rounds", "steps", "threads")},
        "size": {key: checkpoint_size()[key] for key in SIZE_KEYS},
        "attention_dropout": args.attention_dropout,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "hf_roformer": code_version(),
        "runs": runs,
        "summary": summary,
    }
    markdown = to_markdown(payload)
    paths = benchlib.write_results(args.output, payload, markdown)
    print(markdown)
    print("\n".join(str(path) for path in paths))


if __name__ == "__main__":
    main()
