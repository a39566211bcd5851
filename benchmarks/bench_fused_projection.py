"""The query/key/value projection as one matrix product against the model's three separate products, at base size
(768 hidden, 12 layers, 12 heads, 3,072 feed-forward), inference on CPU in float32 and bfloat16, at 1 x 128 and
8 x 512 tokens. The two paths alternate in every round; each row keeps its fastest call.

    python benchmarks/bench_fused_projection.py            # -> results/fused_projection_cpu.{json,md}
    python benchmarks/bench_fused_projection.py --smoke    # tiny model, checks the script runs
"""

import argparse
import os
import sys
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402
from hf_roformer.remote_code import attention_hf_roformer  # noqa: E402


SEPARATE = attention_hf_roformer.HfRoFormerAttentionBase.project_query_key_value


def one_product(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The three projections as one matrix product of the weights concatenated per forward (the parameters stay
    three): the alternative measured here against the model's three calls."""
    projections = (self.query, self.key, self.value)
    weight = torch.cat([projection.weight for projection in projections])
    bias = None if self.query.bias is None else torch.cat([projection.bias for projection in projections])
    return torch.nn.functional.linear(hidden_states, weight, bias).split([p.weight.shape[0] for p in projections], -1)


def forward_seconds(model, input_ids: torch.Tensor, fused: bool) -> float:
    """One timed forward (after one warm-up call), with the projections as one product or three."""
    attention_hf_roformer.HfRoFormerAttentionBase.project_query_key_value = one_product if fused else SEPARATE
    try:
        with torch.no_grad():
            model(input_ids)
            start = time.perf_counter()
            model(input_ids)
            return time.perf_counter() - start
    finally:
        attention_hf_roformer.HfRoFormerAttentionBase.project_query_key_value = SEPARATE


def main() -> None:
    """Measure, print and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="tiny model, one round")
    args = parser.parse_args()
    size = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
    shapes = [(1, 128), (8, 512)]
    if args.smoke:
        size = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
        shapes, args.rounds = [(1, 16)], 1
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(vocab_size=12000, attn_implementation="sdpa", **size)
    model = hf_roformer.HfRoFormerModel(config).eval()
    rows, payload = [], {"machine": benchlib.machine_info(torch.device("cpu")), "size": size, "results": []}
    for shape in shapes:
        input_ids = torch.randint(1, config.vocab_size, shape)
        for dtype in (torch.float32, torch.bfloat16):
            model.to(dtype)
            times = {True: [], False: []}
            for _ in range(args.rounds):
                for fused in (False, True):
                    times[fused].append(forward_seconds(model, input_ids, fused))
            fused_s, separate_s = min(times[True]), min(times[False])
            result = dict(shape=shape, dtype=str(dtype), fused_ms=fused_s * 1e3, separate_ms=separate_s * 1e3)
            payload["results"].append(result)
            rows.append([f"{shape[0]} x {shape[1]}", str(dtype).removeprefix("torch."), f"{fused_s * 1e3:.1f}",
                         f"{separate_s * 1e3:.1f}", f"{separate_s / fused_s:.3f}x"])  # fmt: skip
            print(rows[-1], flush=True)
    machine = payload["machine"]
    markdown = (
        "# Query, key and value in one product against three (CPU, base size, inference)\n\n"
        f"`python benchmarks/bench_fused_projection.py`, {machine['date']}; {machine['cpu']}, "
        f"{machine['torch_threads']} threads, load average {os.getloadavg()[0]:.1f}; "
        f"torch {machine['torch']}, transformers {machine['transformers']}; "
        f"fastest of {args.rounds} alternating rounds.\n\n"
        + benchlib.markdown_table(["tokens", "dtype", "one product ms", "three products ms", "speedup"], rows)
    )
    if not args.smoke:
        benchlib.write_results("fused_projection_cpu", payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
