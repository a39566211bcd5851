"""Where a bf16-autocast training step's time and memory go on CPU, hf_roformer against BERT-SDPA at base size: the
training row of bench_cpu_limit.py (forward, backward and an AdamW step, fp32 weights, 8 x 512 tokens) taken apart.

    python benchmarks/bench_training_profile.py                 # base size, 8 x 512, 2 threads, bf16 autocast
    python benchmarks/bench_training_profile.py --precision fp32
    python benchmarks/bench_training_profile.py --quick         # a tiny model: checks that it runs

Each model runs in processes of its own, so that neither inherits the other's freed memory:
- a timing process: one step to warm up (it creates the gradients and AdamW's moments), then the best of `--steps`
  steps, then one step under the profiler, its self time per operator summed by the part of the model it does
  (bench_cpu_limit.py's parts, and the optimizer's);
- a memory process with the C library's allocator returning every freed buffer of 128 KiB or more to the system
  (`MALLOC_MMAP_THRESHOLD_=131072`; by default it keeps them, so a process's resident high-water mark also counts
  buffers already freed): the process's resident memory after a warm-up step (the libraries, the model, its
  gradients and AdamW's moments), and how far one more step raises it (activations kept for the backward pass,
  autocast's bf16 copies of the weights).

The processes run one after another, not interleaved: every timed step is listed, and a ratio of best steps within
their scatter says nothing.
`--precision fp32` runs the same step without autocast: on a CPU without bf16 instructions (AVX-512 BF16, AMX),
where bf16 products are emulated and a base-size step takes minutes.
-> results/training_profile_cpu_PRECISION.{json,md} (`--quick`: training_profile_quick_PRECISION.*)
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from bench_cpu_limit import (  # noqa: E402
    BASE,
    PROFILE_PARTS,
    QUICK,
    build,
    cpu_flags,
    flops_per_token,
    inputs,
    training_step,
)


KINDS = ("hf_roformer", "bert_sdpa")
# The optimizer's operators first: AdamW's `_foreach_mul_` would otherwise count as the rotation's products.
TRAINING_PARTS = {"optimizer (AdamW)": ("_foreach", "lerp", "addcdiv", "sqrt"), **PROFILE_PARTS}
FIXED_MMAP_THRESHOLD = {"MALLOC_MMAP_THRESHOLD_": "131072"}


def part_of(operator: str) -> str:
    """The part of a training step an operator's name says it does."""
    return next((part for part, words in TRAINING_PARTS.items() if any(word in operator for word in words)), "other")


def timed(kind: str, size: dict, batch: int, length: int, precision: str, steps: int) -> dict:
    """Best step time of `kind` and one profiled step's self time by part (ms) and its costliest operators."""
    from torch.profiler import ProfilerActivity, profile

    step = training_step(build(kind, size, length).train(), inputs(batch, length), precision)
    step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        step()
    operators = [(event.key, event.self_cpu_time_total / 1000) for event in profiler.key_averages()]
    parts: dict[str, float] = {}
    for name, ms in operators:
        part = part_of(name.removeprefix("aten::"))
        parts[part] = parts.get(part, 0.0) + ms
    top = sorted(operators, key=lambda operator: -operator[1])[:10]
    return {"best_s": min(times), "all_s": times, "parts_ms": parts, "top_ms": dict(top)}


def memory(kind: str, size: dict, batch: int, length: int, precision: str) -> dict:
    """Resident MB of the model with its gradients and moments (after a warm-up step) and the rise one step adds."""
    step = training_step(build(kind, size, length).train(), inputs(batch, length), precision)
    step()
    settled = benchlib.reset_peak_memory(torch.device("cpu"))
    step()
    peak = benchlib.peak_memory(torch.device("cpu"))
    return {"settled_mb": settled / 2**20, "step_rise_mb": (peak - settled) / 2**20}


def in_fresh_process(job: str, kind: str, args: argparse.Namespace, environment: dict | None = None) -> dict:
    """`job` ("timed" or "memory") for `kind` in a new interpreter; its JSON result."""
    command = [sys.executable, __file__, "--job", job, "--kind", kind, "--batch", str(args.batch),
               "--length", str(args.length), "--steps", str(args.steps), "--threads", str(args.threads),
               "--precision", args.precision,
               *(["--quick"] if args.quick else [])]  # fmt: skip
    finished = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(environment or {})})
    if finished.returncode:
        raise RuntimeError(f"{job} {kind} failed:\n{finished.stderr[-4000:]}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


def render(payload: dict) -> str:
    """The results as Markdown: step time and memory per model, then each model's time by part."""
    machine, runs, size = payload["machine"], payload["runs"], payload["size"]
    shape = f"{payload['batch']} x {payload['length']}"
    step_kind = "bf16-autocast" if payload["precision"] == "bf16" else "fp32"
    how = "under bf16 autocast, fp32 weights" if payload["precision"] == "bf16" else "in fp32"
    lines = [
        f"# A {step_kind} training step on CPU, taken apart ({machine['date']})",
        "",
        f"{machine['cpu']} (flags: {', '.join(payload['cpu_flags'])}), {payload['threads']} threads, "
        f"torch {machine['torch']}, transformers "
        f"{machine['transformers']}; hidden {size['hidden_size']}, {size['num_hidden_layers']} layers, "
        f"{size['num_attention_heads']} heads, feed-forward {size['intermediate_size']}; random weights, dropout 0; "
        f"{shape} tokens; forward, backward and AdamW {how}. Each model in processes of "
        f"its own; best of {payload['steps']} steps after one warm-up; memory with the allocator returning freed "
        f"buffers (`MALLOC_MMAP_THRESHOLD_=131072`). Load average (1 min) {payload['load_before']:.2f} before, "
        f"{payload['load_after']:.2f} after.",
        "",
    ]
    table = []
    for kind in KINDS:
        run = runs[kind]
        tokens = payload["batch"] * payload["length"]
        gflops = 3 * tokens * flops_per_token(size, payload["length"]) / run["best_s"] / 1e9
        every = ", ".join(f"{seconds:.1f}" for seconds in run["all_s"])
        table.append([kind, f"{run['best_s']:.2f}", every, f"{tokens / run['best_s']:,.0f}", f"{gflops:.0f}",
                      f"{run['settled_mb']:,.0f}", f"{run['step_rise_mb']:,.0f}"])  # fmt: skip
    ratio = runs["bert_sdpa"]["best_s"] / runs["hf_roformer"]["best_s"]
    headers = ["model", "best step s", "every timed step s", "tokens/s", "model GFLOP/s",
               "resident MB after a step (whole process)", "one step adds MB"]  # fmt: skip
    ratio_line = f"hf_roformer / BERT-SDPA throughput, best steps: {ratio:.2f}x"
    lines += [benchlib.markdown_table(headers, table), "", ratio_line, ""]
    for kind in KINDS:
        parts = runs[kind]["parts_ms"]
        total = sum(parts.values())
        layers = size["num_hidden_layers"]
        rows = [[part, f"{ms:.0f}", f"{ms / layers:.1f}", f"{ms / total:.0%}"]
                for part, ms in sorted(parts.items(), key=lambda item: -item[1])]  # fmt: skip
        lines += [f"## {kind}: one profiled step by part (profiler self time)", "",
                  benchlib.markdown_table(["part", "ms", "ms / layer", "share"], rows), "", "Costliest operators:", "",
                  benchlib.markdown_table(["operator", "ms"], [[name, f"{ms:.0f}"] for name, ms in
                                                               runs[kind]["top_ms"].items()]), ""]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny model: checks that every step runs")
    parser.add_argument("--batch", type=int, help="default 8 (2 with --quick)")
    parser.add_argument("--length", type=int, help="default 512 (64 with --quick)")
    parser.add_argument(
        "--precision",
        choices=("bf16", "fp32"),
        default="bf16",
        help="bf16 autocast (default; for CPUs with bf16 instructions) or fp32 throughout",
    )
    parser.add_argument("--steps", type=int, default=3, help="timed steps; the best counts")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--job", choices=("timed", "memory"), help=argparse.SUPPRESS)  # a child process's job
    parser.add_argument("--kind", choices=KINDS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    size = QUICK if args.quick else BASE
    args.batch = args.batch or (2 if args.quick else 8)
    args.length = args.length or (64 if args.quick else 512)
    if args.job:
        job = timed if args.job == "timed" else memory
        extra = (args.steps,) if args.job == "timed" else ()
        print(json.dumps(job(args.kind, size, args.batch, args.length, args.precision, *extra)))
        return
    load_before = os.getloadavg()[0]
    runs = {}
    for kind in KINDS:
        runs[kind] = {**in_fresh_process("timed", kind, args), **in_fresh_process("memory", kind, args,
                                                                                  FIXED_MMAP_THRESHOLD)}  # fmt: skip
        print(kind, {name: value for name, value in runs[kind].items() if name.endswith(("_s", "_mb"))}, flush=True)
    payload = {"machine": benchlib.machine_info(torch.device("cpu")), "cpu_flags": cpu_flags(),
               "precision": args.precision, "size": size, "batch": args.batch,
               "length": args.length, "steps": args.steps, "threads": args.threads, "load_before": load_before,
               "load_after": os.getloadavg()[0], "runs": runs}  # fmt: skip
    markdown = render(payload)
    name = f"training_profile_{'quick' if args.quick else 'cpu'}_{args.precision}"
    for path in benchlib.write_results(name, payload, markdown):
        print(path)
    print(markdown)


if __name__ == "__main__":
    main()
