"""The query/key/value projection as one matrix product against the model's three separate products, at base size
(768 hidden, 12 layers, 12 heads, 3,072 feed-forward), inference: the model as it is (three products), the weights
joined anew in every forward (one product, the parameters kept three), and `model.fuse_qkv_projections()` (one
product of weights joined once).

On CPU: float32 and bfloat16 at 1 x 128 and 8 x 512 tokens; the runs alternate in every round and each row keeps its
fastest forward. On CUDA (bf16, 32 x 128 to 1 x 8,192): the three runs and transformers' BERT with SDPA of the same
size, interleaved, each with its time per forward launched back to back (throughput), its host time per forward and
its kernel time.

    python benchmarks/bench_fused_projection.py                  # CPU -> results/fused_projection_cpu.{json,md}
    python benchmarks/bench_fused_projection.py --device cuda    # -> results/fused_projection_<gpu>.{json,md}
    python benchmarks/bench_fused_projection.py --smoke          # tiny model, checks the script runs

(The recorded H200 table, results/fused_projection_nvidia_h200.md, was taken before `fuse_qkv_projections()` existed:
its "joined once" run held the same joined weights, set by the script itself.)
"""

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402
from hf_roformer.remote_code import modeling_hf_roformer  # noqa: E402


SEPARATE = modeling_hf_roformer.HfRoFormerAttentionBase.project_query_key_value
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
SMOKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
CUDA_SHAPES = [(32, 128), (8, 512), (4, 2048), (1, 8192)]
RUNS = ("three products", "joined per forward", "fuse_qkv_projections")


def one_product(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The three projections as one matrix product of the weights concatenated per forward (the parameters stay
    three): an alternative measured here, patched in for its run."""
    projections = (self.query, self.key, self.value)
    weight = torch.cat([projection.weight for projection in projections])
    bias = None if self.query.bias is None else torch.cat([projection.bias for projection in projections])
    return torch.nn.functional.linear(hidden_states, weight, bias).split([p.weight.shape[0] for p in projections], -1)


def run_calls(model, input_ids: torch.Tensor) -> dict:
    """A no-grad forward of `input_ids` per run: the model as it is, with `one_product` patched in, and a copy of it
    fused with `fuse_qkv_projections()`."""
    fused = copy.deepcopy(model)
    fused.fuse_qkv_projections()

    def forward(of):
        def call():
            with torch.inference_mode():
                of(input_ids=input_ids)

        return call

    def joined_per_forward():
        modeling_hf_roformer.HfRoFormerAttentionBase.project_query_key_value = one_product
        try:
            forward(model)()
        finally:
            modeling_hf_roformer.HfRoFormerAttentionBase.project_query_key_value = SEPARATE

    return {
        "three products": forward(model),
        "joined per forward": joined_per_forward,
        "fuse_qkv_projections": forward(fused),
    }


def run_cpu(args) -> None:
    """The CPU table: the three runs in float32 and bfloat16, fastest forward of alternating rounds."""
    size, shapes = BASE, [(1, 128), (8, 512)]
    if args.smoke:
        size, shapes, args.rounds = SMOKE, [(1, 16)], 1
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(vocab_size=12000, attn_implementation="sdpa", **size)
    model = hf_roformer.HfRoFormerModel(config).eval()
    rows, payload = [], {"machine": benchlib.machine_info(torch.device("cpu")), "size": size, "results": []}
    for shape in shapes:
        input_ids = torch.randint(1, config.vocab_size, shape)
        for dtype in (torch.float32, torch.bfloat16):
            calls = run_calls(model.to(dtype), input_ids)
            times = {name: [] for name in calls}
            for call in calls.values():  # warm-up
                call()
            for _ in range(args.rounds):
                for name, call in calls.items():
                    start = time.perf_counter()
                    call()
                    times[name].append(time.perf_counter() - start)
            best = {name: min(values) for name, values in times.items()}
            payload["results"].append(
                dict(shape=shape, dtype=str(dtype), best_ms={k: v * 1e3 for k, v in best.items()})
            )
            separate = best["three products"]
            rows.append([f"{shape[0]} x {shape[1]}", str(dtype).removeprefix("torch."),
                         *(f"{best[name] * 1e3:.1f}" for name in RUNS),
                         *(f"{separate / best[name]:.3f}x" for name in RUNS[1:])])  # fmt: skip
            print(rows[-1], flush=True)
    machine = payload["machine"]
    markdown = (
        "# Query, key and value in one product against three (CPU, base size, inference)\n\n"
        f"`python benchmarks/bench_fused_projection.py`, {machine['date']}; {machine['cpu']}, "
        f"{machine['torch_threads']} threads, load average {os.getloadavg()[0]:.1f}; "
        f"torch {machine['torch']}, transformers {machine['transformers']}; "
        f"fastest of {args.rounds} alternating rounds, ms per forward.\n\n"
        + benchlib.markdown_table(
            ["tokens", "dtype", *RUNS, "joined per forward speedup", "fuse_qkv_projections speedup"], rows
        )
    )
    if not args.smoke:
        benchlib.write_results("fused_projection_cpu", payload, markdown)
    print(markdown)


def run_cuda(args) -> None:
    """The CUDA table: the three runs and BERT-SDPA, bf16, per forward: back-to-back, host and kernel time; the
    median of interleaved rounds."""
    device, dtype = torch.device("cuda"), torch.bfloat16
    size, shapes = (SMOKE, [(2, 32)]) if args.smoke else (BASE, CUDA_SHAPES)
    common = dict(vocab_size=30000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **size)
    torch.manual_seed(0)
    ours = hf_roformer.HfRoFormerModel(hf_roformer.HfRoFormerConfig(**common, attn_implementation="sdpa"))
    bert_config = transformers.BertConfig(
        **common, max_position_embeddings=max(length for _, length in shapes), attn_implementation="sdpa"
    )
    bert = transformers.BertModel(bert_config, add_pooling_layer=False)
    ours, bert = (model.to(device, dtype).eval() for model in (ours, bert))
    payload = {"machine": benchlib.machine_info(device), "size": size, "results": []}
    rows = []
    for batch, length in shapes:
        input_ids = torch.randint(1, common["vocab_size"], (batch, length), device=device)
        calls = run_calls(ours, input_ids)

        def bert_call(input_ids=input_ids):
            with torch.inference_mode():
                bert(input_ids=input_ids)

        calls["BERT-SDPA"] = bert_call
        rounds = {name: {"back_to_back": [], "host": []} for name in calls}
        for _ in range(args.rounds):
            for name, call in calls.items():
                rounds[name]["back_to_back"].append(benchlib.back_to_back_seconds(call, device, calls=args.calls))
                rounds[name]["host"].append(benchlib.host_seconds(call, device, calls=args.calls))
        bert_s = statistics.median(rounds["BERT-SDPA"]["back_to_back"])
        for name, call in calls.items():
            back_to_back = statistics.median(rounds[name]["back_to_back"])
            host = statistics.median(rounds[name]["host"])
            kernels = benchlib.kernel_seconds(call, device, calls=5)
            result = dict(shape=[batch, length], run=name, back_to_back_ms=back_to_back * 1e3, host_ms=host * 1e3,
                          kernel_ms=kernels * 1e3, tokens_per_s=batch * length / back_to_back)  # fmt: skip
            payload["results"].append(result)
            rows.append([f"{batch} x {length}", name, f"{batch * length / back_to_back:,.0f}",
                         f"{back_to_back * 1e3:.2f}", f"{host * 1e3:.2f}", f"{kernels * 1e3:.2f}",
                         f"{bert_s / back_to_back:.2f}x"])  # fmt: skip
            print(rows[-1], flush=True)
    machine = payload["machine"]
    markdown = (
        f"# Query, key and value in one product against three ({machine['gpu']}, base size, bf16 inference)\n\n"
        f"`python benchmarks/bench_fused_projection.py --device cuda`, {machine['date']}; torch {machine['torch']} "
        f"(CUDA {machine['cuda']}), transformers {machine['transformers']}; host {machine['cpu']}. Median of "
        f"{args.rounds} interleaved rounds of {args.calls} forwards. Back to back: forwards launched without waiting "
        "(throughput); host: the host's time per forward; kernels: the device's (profiler).\n\n"
        + benchlib.markdown_table(
            ["tokens", "run", "tokens/s", "back to back ms", "host ms", "kernels ms", "vs BERT-SDPA"], rows
        )
    )
    if not args.smoke:
        slug = "".join(c if c.isalnum() else "_" for c in machine["gpu"].lower()).strip("_")
        benchlib.write_results(f"fused_projection_{slug}", payload, markdown)
    print(markdown)


def main() -> None:
    """Measure, print and write the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--rounds", type=int, default=None, help="default: 4 on CPU, 5 on CUDA")
    parser.add_argument("--calls", type=int, default=30, help="forwards per timing on CUDA")
    parser.add_argument("--smoke", action="store_true", help="tiny model, one round")
    args = parser.parse_args()
    if args.device == "cuda":
        args.rounds = 1 if args.smoke else args.rounds or 5
        run_cuda(args)
    else:
        args.rounds = args.rounds or 4
        run_cpu(args)


if __name__ == "__main__":
    main()
