"""Where the time of one inference forward, or one training step, goes on the GPU: hf_roformer (with and without the
fused RoPE kernel) vs transformers' BERT with SDPA, same size and batch. Prints per model the host time per step, the
device time, the number of kernel launches and the kernels that take the most device time.

    python benchmarks/profile_gpu.py [--batch 8 --length 512]
    python benchmarks/profile_gpu.py --training       # masked-LM step (bf16 autocast): forward, backward, AdamW
    python benchmarks/profile_gpu.py --compile        # each model under torch.compile (default mode)
    python benchmarks/profile_gpu.py --attention-mask # with an all-ones mask, as a padding collator passes
    python benchmarks/profile_gpu.py --launch-costs   # host time of one call: the RoPE kernel, an add, a linear
    python benchmarks/profile_gpu.py --device cpu --smoke   # tiny model: checks the script runs
"""

import argparse
import sys
from pathlib import Path

import torch
import transformers
from torch.profiler import ProfilerActivity, profile


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402
from hf_roformer.remote_code import rotary_kernels_hf_roformer  # noqa: E402


SIZE = dict(vocab_size=50000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
SMOKE_SIZE = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)


def make_step(model, inputs: dict, training: bool):
    """One inference forward, or one masked-LM training step (bf16 autocast on CUDA, AdamW), on `inputs`."""
    if not training:

        def forward():
            with torch.inference_mode():
                model(**inputs)

        return forward
    input_ids = inputs["input_ids"]
    autocast_dtype = torch.bfloat16 if input_ids.is_cuda else None
    return benchlib.labelled_training_step(model, inputs, input_ids, autocast_dtype)


def summarize(name: str, step, device) -> dict:
    """Profile five steps; return host ms, device ms and launches per step, and print the top kernels."""
    for _ in range(3):
        step()
    benchlib.synchronize(device)
    host = benchlib.time_call(step, device, repeats=10, warmup=0)["median_s"]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiler:
        for _ in range(5):
            step()
        benchlib.synchronize(device)
    kernel_type = torch.autograd.DeviceType.CUDA if device.type == "cuda" else torch.autograd.DeviceType.CPU
    events = [event for event in profiler.key_averages() if event.device_type == kernel_type]
    if device.type != "cuda":  # no kernels: the operators' own CPU time stands in, to check the script
        events = [event for event in events if event.key.startswith("aten::")]
    device_us = sum(event.self_device_time_total or event.self_cpu_time_total for event in events) / 5
    launches = sum(event.count for event in events) / 5
    print(
        f"\n== {name}: {host * 1e3:.2f} ms per synchronized step, {device_us / 1e3:.2f} ms of kernels, "
        f"{launches:.0f} kernels per step"
    )
    for event in sorted(events, key=lambda e: -(e.self_device_time_total or e.self_cpu_time_total))[:15]:
        own_us = event.self_device_time_total or event.self_cpu_time_total
        print(f"  {own_us / 5 / 1e3:7.3f} ms  x{event.count // 5:<4d} {event.key[:100]}")
    return {"host_ms": host * 1e3, "device_ms": device_us / 1e3, "kernels": launches}


def launch_costs(device: torch.device, calls: int = 3000) -> dict:
    """Host microseconds per call, launched back to back on tiny tensors (so the device never holds the host up): the
    fused RoPE kernel on queries and keys in place, one elementwise operator, and one 768 x 768 linear layer. What a
    forward's extra launches cost on this host."""
    queries = torch.randn(2, 12, 16, 64, device=device, dtype=torch.bfloat16)
    keys = torch.randn_like(queries)
    weight = torch.randn(768, 768, device=device, dtype=torch.bfloat16)
    states = queries.view(2, 16, 768)
    cos = torch.randn(1, 16, 32, device=device)
    sin = torch.randn_like(cos)
    calls_timed = {
        "rotary kernel (queries and keys, in place)": lambda: rotary_kernels_hf_roformer.rotate_with_kernel(
            [queries, keys], cos, sin, in_place=True
        ),
        "torch.add": lambda: torch.add(queries, keys),
        "linear 768 x 768": lambda: torch.nn.functional.linear(states, weight),
    }
    with torch.inference_mode():
        costs = {name: benchlib.host_seconds(call, device, calls) * 1e6 for name, call in calls_timed.items()}
    print("host time per call: " + "; ".join(f"{name} {us:.1f} us" for name, us in costs.items()))
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--training", action="store_true", help="profile a masked-LM training step")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="tiny model: checks the script runs")
    parser.add_argument("--compile", action="store_true", help="profile each model under torch.compile")
    parser.add_argument(
        "--attention-mask", action="store_true", help="pass an all-ones attention mask (as bench_peers_gpu.py does)"
    )
    parser.add_argument("--launch-costs", action="store_true", help="only the host time of single launches (CUDA)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.launch_costs:
        launch_costs(device)
        return
    size = SMOKE_SIZE if args.smoke else SIZE
    input_ids = torch.randint(1, size["vocab_size"], (args.batch, args.length), device=device)
    inputs = {"input_ids": input_ids}
    if args.attention_mask:
        inputs["attention_mask"] = torch.ones_like(input_ids)
    size = {**size, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}  # as bench_peers_gpu.py
    torch.manual_seed(0)
    ours_class = hf_roformer.HfRoFormerForMaskedLM if args.training else hf_roformer.HfRoFormerModel
    ours = ours_class(hf_roformer.HfRoFormerConfig(**size)).to(device)
    bert_config = transformers.BertConfig(**size, max_position_embeddings=args.length, attn_implementation="sdpa")
    bert = (transformers.BertForMaskedLM if args.training else transformers.BertModel)(bert_config).to(device)
    if args.training:
        ours.train(), bert.train()
    else:  # inference runs the half-precision model on CUDA
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        ours, bert = ours.to(dtype).eval(), bert.to(dtype).eval()
    what = ("compiled " if args.compile else "") + ("training step" if args.training else "forward")
    mask = ", all-ones attention mask" if args.attention_mask else ""
    print(f"{what}, {args.batch} x {args.length}{mask}, {device}")

    def profile_model(name, model):
        if args.compile:  # a fresh compilation each: the kernel switch below is read while tracing
            torch._dynamo.reset()
            torch._dynamo.utils.counters.clear()
            model = torch.compile(model)
        summarize(name, make_step(model, inputs, args.training), device)
        if args.compile:
            counters = torch._dynamo.utils.counters
            breaks = sum(counters["graph_break"].values())
            print(f"   graphs compiled: {counters['stats']['unique_graphs']}, graph breaks: {breaks}")
            for reason, count in list(counters["graph_break"].items())[:5]:
                print(f"   break x{count}: {reason[:200]}")

    profile_model("hf_roformer, fused RoPE kernel", ours)
    rotary_kernels_hf_roformer.KERNEL_ENABLED = False
    profile_model("hf_roformer, PyTorch RoPE", ours)
    rotary_kernels_hf_roformer.KERNEL_ENABLED = True
    profile_model("BERT, SDPA", bert)


if __name__ == "__main__":
    main()
