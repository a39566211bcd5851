"""Attention alone in bf16 on CPU: PyTorch's fused SDPA kernel against attention written as matrix products (scores,
softmax, weighted values; whole, and in blocks of 256 queries), at base size (12 heads of 64) and the shapes of
`bench_cpu_limit.py`'s bf16 targets, 8 x 512 and 4 x 2,048. It asks whether attention built from matrix products
(which run at several times SDPA's rate in `bench_cpu_limit.py`'s profiles) would be faster than SDPA's kernel; a
linear layer of the encoder's (768 -> 3,072) on the same tokens gives the matrix products' rate in the same run.

    python benchmarks/bench_attention_kernels.py      # 2 threads; writes results/attention_kernels_cpu.{json,md}
"""

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402


HEADS, HEAD_SIZE, HIDDEN, INTERMEDIATE = 12, 64, 768, 3072
SHAPES = ((8, 512), (4, 2048))
BLOCK = 256
COMMAND = "python benchmarks/bench_attention_kernels.py"


def kernels(batch: int, length: int) -> tuple[dict, float]:
    """The attention variants on random bf16 inputs with a padding mask of zeros, and a linear layer of the encoder's
    on as many tokens: name -> (call, its FLOPs); and the largest difference of the matrix-product variants from
    SDPA's output."""
    generator = torch.Generator().manual_seed(0)
    query, key, value = (
        torch.randn(batch, HEADS, length, HEAD_SIZE, generator=generator, dtype=torch.bfloat16) for _ in range(3)
    )
    mask = torch.zeros(batch, 1, 1, length, dtype=torch.bfloat16)
    scale = HEAD_SIZE**-0.5

    def sdpa():
        return F.scaled_dot_product_attention(query, key, value, attn_mask=mask)

    def products():
        scores = torch.matmul(query, key.transpose(-1, -2)) * scale + mask
        return torch.matmul(torch.softmax(scores, -1), value)

    def product_blocks():
        output = torch.empty_like(query)
        keys = key.transpose(-1, -2)
        for start in range(0, length, BLOCK):
            scores = torch.matmul(query[:, :, start : start + BLOCK], keys) * scale + mask
            output[:, :, start : start + BLOCK] = torch.matmul(torch.softmax(scores, -1), value)
        return output

    tokens = torch.randn(batch * length, HIDDEN, generator=generator, dtype=torch.bfloat16)
    weight = torch.randn(INTERMEDIATE, HIDDEN, generator=generator, dtype=torch.bfloat16)

    def linear():
        return F.linear(tokens, weight)

    reference = sdpa().float()
    difference = max((call().float() - reference).abs().max().item() for call in (products, product_blocks))
    attention_flops = 4 * batch * HEADS * length * length * HEAD_SIZE
    calls = {
        "SDPA (fused kernel)": (sdpa, attention_flops),
        "matrix products": (products, attention_flops),
        f"matrix products, {BLOCK}-query blocks": (product_blocks, attention_flops),
        "linear 768 -> 3,072 (same tokens)": (linear, 2 * batch * length * HIDDEN * INTERMEDIATE),
    }
    return calls, difference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows, differences = [], {}
    for batch, length in SHAPES:
        calls, differences[f"{batch}x{length}"] = kernels(batch, length)
        for name, (call, work) in calls.items():
            timed = benchlib.time_call(call, torch.device("cpu"), args.repeats, warmup=1)
            rows.append([f"{batch}x{length}", name, round(timed["min_s"] * 1e3, 1), round(work / timed["min_s"] / 1e9)])
    info = benchlib.machine_info(torch.device("cpu")) | {"threads": args.threads, "repeats": args.repeats}
    headers = ["shape", "kernel", "best ms", "GFLOP/s"]
    table = benchlib.markdown_table(headers, rows)
    machine = ", ".join(f"{key} {value}" for key, value in info.items())
    note = f"Largest difference of the matrix-product outputs from SDPA's (bf16): {differences}."
    benchlib.write_results(
        "attention_kernels_cpu",
        {"machine": info, "rows": [dict(zip(headers, row, strict=True)) for row in rows], "differences": differences},
        f"# attention_kernels_cpu\n\n`{COMMAND}`\n\n{machine}\n\n{table}\n\n{note}\n",
    )
    print(table)
    print(note)


if __name__ == "__main__":
    main()
