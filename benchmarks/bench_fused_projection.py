"""The query/key/value projection as one matrix product against the model's three separate products, at base size
(768 hidden, 12 layers, 12 heads, 3,072 feed-forward), inference.

On CPU: float32 and bfloat16 at 1 x 128 and 8 x 512 tokens, the weights joined per forward; the paths alternate in
every round and each row keeps its fastest call. On CUDA (bf16, 32 x 128 to 1 x 8,192): three layouts of the
projection (three products; one product of the weights joined per forward; one product of weights joined once, the
layout a load-time weight conversion would give) and transformers' BERT with SDPA of the same size, interleaved, each
with its time per forward launched back to back (throughput), its host time per forward and its kernel time.

    python benchmarks/bench_fused_projection.py                  # CPU -> results/fused_projection_cpu.{json,md}
    python benchmarks/bench_fused_projection.py --device cuda    # -> results/fused_projection_<gpu>.{json,md}
    python benchmarks/bench_fused_projection.py --smoke          # tiny model, checks the script runs
"""

import argparse
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
from hf_roformer.remote_code import attention_hf_roformer  # noqa: E402


SEPARATE = attention_hf_roformer.HfRoFormerAttentionBase.project_query_key_value
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
SMOKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
CUDA_SHAPES = [(32, 128), (8, 512), (4, 2048), (1, 8192)]


def one_product(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The three projections as one matrix product of the weights concatenated per forward (the parameters stay
    three): the alternative measured here against the model's three calls."""
    projections = (self.query, self.key, self.value)
    weight = torch.cat([projection.weight for projection in projections])
    bias = None if self.query.bias is None else torch.cat([projection.bias for projection in projections])
    return torch.nn.functional.linear(hidden_states, weight, bias).split([p.weight.shape[0] for p in projections], -1)


def joined_once(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One matrix product of weights concatenated before the run (`join_weights`), as a checkpoint converted to one
    fused projection at load time would hold them."""
    weight, bias, sizes = self.joined_projection
    return torch.nn.functional.linear(hidden_states, weight, bias).split(sizes, -1)


LAYOUTS = {"three products": SEPARATE, "joined per forward": one_product, "joined once": joined_once}


def join_weights(model: torch.nn.Module) -> None:
    """Give every attention module its query, key and value weights concatenated once (for `joined_once`)."""
    for module in model.modules():
        if isinstance(module, attention_hf_roformer.HfRoFormerAttentionBase):
            projections = (module.query, module.key, module.value)
            weight = torch.cat([p.weight for p in projections]).detach()
            bias = None if module.query.bias is None else torch.cat([p.bias for p in projections]).detach()
            module.joined_projection = (weight, bias, [p.weight.shape[0] for p in projections])


def with_layout(layout: str, call):
    """`call` run with the projection of `layout` patched in (restored afterwards)."""

    def run():
        attention_hf_roformer.HfRoFormerAttentionBase.project_query_key_value = LAYOUTS[layout]
        try:
            return call()
        finally:
            attention_hf_roformer.HfRoFormerAttentionBase.project_query_key_value = SEPARATE

    return run


def inference_call(model, input_ids: torch.Tensor):
    """A callable running one forward of `input_ids` without autograd."""

    def call():
        with torch.inference_mode():
            model(input_ids=input_ids)

    return call


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


def run_cpu(args) -> None:
    """The CPU table: one product (joined per forward) against three, float32 and bfloat16."""
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


def run_cuda(args) -> None:
    """The CUDA table: three projection layouts and BERT-SDPA, bf16, per forward: back-to-back, host and kernel
    time; the median of interleaved rounds."""
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
    join_weights(ours)
    payload = {"machine": benchlib.machine_info(device), "size": size, "results": []}
    rows = []
    for batch, length in shapes:
        input_ids = torch.randint(1, common["vocab_size"], (batch, length), device=device)

        calls = {layout: with_layout(layout, inference_call(ours, input_ids)) for layout in LAYOUTS}
        calls["BERT-SDPA"] = inference_call(bert, input_ids)
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
