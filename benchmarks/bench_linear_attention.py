"""RoPE with linear attention (paper eq. 19) vs softmax attention (SDPA): time and peak memory from 1k to 64k tokens.

    python benchmarks/bench_linear_attention.py            # CPU, 2 threads -> results/linear_attention_cpu.*
    python benchmarks/bench_linear_attention.py --device cuda   # -> results/linear_attention_cuda.*

On CPU each measurement runs in a fresh process, so its resident-set peak is its own; on GPU the allocator's peak is
reset before each.
The model: hidden 256, 4 heads, 2 layers, batch 1, fp32 on CPU / bf16 on GPU; encoder (bidirectional) and decoder
(causal) forward passes.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402


LENGTHS = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]
SIZE = dict(vocab_size=1000, hidden_size=256, num_attention_heads=4, num_hidden_layers=2, intermediate_size=1024)
# Softmax attention stops being measured once one forward exceeds this many seconds (it grows as N^2).
SOFTMAX_TIME_LIMIT_S = 60.0


def probe(device: str, attention_type: str, causal: bool, length: int) -> dict:
    """One measurement in this process: seconds per forward and peak memory above the loaded model."""
    device = torch.device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.set_num_threads(2) if device.type == "cpu" else None
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        **SIZE, attention_type=attention_type, is_decoder=causal, use_cache=False, attn_implementation="sdpa"
    )
    model = hf_roformer.HfRoFormerModel(config).to(device, dtype).eval()
    input_ids = torch.randint(1, 1000, (1, length), device=device)

    def forward():
        with torch.inference_mode():
            model(input_ids)

    baseline = benchlib.reset_peak_memory(device)
    forward()
    benchlib.synchronize(device)
    peak = benchlib.peak_memory(device)
    repeats = 3 if length <= 8192 else 1
    timing = benchlib.time_call(forward, device, repeats=repeats, warmup=0)
    return {"seconds": timing["median_s"], "peak_extra_mb": (peak - baseline) / 2**20}


def probe_in_subprocess(device: str, attention_type: str, causal: bool, length: int) -> dict:
    """`probe` in a fresh process, so that the resident-set peak on CPU is this measurement's alone."""
    command = [sys.executable, __file__, "--device", device, "--probe", attention_type, str(int(causal)), str(length)]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        print(completed.stderr[-2000:], file=sys.stderr)
        return {"error": completed.stderr.strip().splitlines()[-1][:200]}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def probe_in_process(device: str, attention_type: str, causal: bool, length: int) -> dict:
    """`probe` here: on GPU the allocator's peak is reset per measurement, so no fresh process is needed."""
    try:
        return probe(device, attention_type, causal, length)
    except torch.OutOfMemoryError as error:
        return {"error": str(error).splitlines()[0][:200]}
    finally:
        torch.cuda.empty_cache()


def run(device: str) -> dict:
    """Every (mode, attention type, length): in a subprocess each on CPU, in this process on GPU."""
    measure = probe_in_process if torch.device(device).type == "cuda" else probe_in_subprocess
    results = {}
    for mode, causal in (("bidirectional", False), ("causal", True)):
        for attention_type in ("linear", "softmax"):
            for length in LENGTHS:
                result = measure(device, attention_type, causal, length)
                results.setdefault(mode, {}).setdefault(attention_type, {})[length] = result
                print(mode, attention_type, length, result, flush=True)
                if attention_type == "softmax" and result.get("seconds", 0) > SOFTMAX_TIME_LIMIT_S:
                    break
    return results


def to_markdown(payload: dict) -> str:
    machine = payload["machine"]
    lines = [
        "# RoPE with linear attention vs softmax attention (SDPA)\n",
        f"{machine.get('gpu', machine['cpu'])}, torch {machine['torch']}, transformers {machine['transformers']}, "
        f"{machine['torch_threads']} CPU threads, {machine['date']}. Model {SIZE}, batch 1; one forward.\n",
    ]
    for mode, by_type in payload["results"].items():
        rows = []
        crossover = None
        for length in LENGTHS:
            linear = by_type["linear"].get(length, {})
            softmax = by_type["softmax"].get(length, {})
            speedup = ""
            if "seconds" in linear and "seconds" in softmax:
                speedup = f"{softmax['seconds'] / linear['seconds']:.2f}x"
                if crossover is None and linear["seconds"] < softmax["seconds"]:
                    crossover = length

            def show(result, key, fmt):
                return fmt.format(result[key]) if key in result else "not run" if not result else "failed"

            rows.append(
                [
                    length,
                    show(linear, "seconds", "{:.3f}"),
                    show(softmax, "seconds", "{:.3f}"),
                    speedup,
                    show(linear, "peak_extra_mb", "{:,.0f}"),
                    show(softmax, "peak_extra_mb", "{:,.0f}"),
                ]
            )
        headers = ["tokens", "linear s", "softmax s", "linear speedup", "linear peak MB", "softmax peak MB"]
        lines.append(f"\n## {mode.capitalize()}\n\n" + benchlib.markdown_table(headers, rows))
        linear_memory = {n: r["peak_extra_mb"] for n, r in by_type["linear"].items() if "peak_extra_mb" in r}
        growth = (
            linear_memory[LENGTHS[-1]] / linear_memory[LENGTHS[-1] // 8] if len(linear_memory) == len(LENGTHS) else None
        )
        lines.append(
            f"\nFirst length where linear attention is faster: {crossover or 'none measured'}. Linear-attention peak "
            f"memory at 8x the length ({LENGTHS[-1] // 8} -> {LENGTHS[-1]}): "
            + (f"{growth:.1f}x." if growth else "not measured.")
            + "\n"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--probe", nargs=3, metavar=("TYPE", "CAUSAL", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        attention_type, causal, length = args.probe
        print(json.dumps(probe(args.device, attention_type, bool(int(causal)), int(length))))
        return
    payload = {"machine": benchlib.machine_info(torch.device(args.device)), "size": SIZE, "results": run(args.device)}
    for path in benchlib.write_results(
        f"linear_attention_{torch.device(args.device).type}", payload, to_markdown(payload)
    ):
        print(path)


if __name__ == "__main__":
    main()
