"""Where the time of one inference forward goes on the GPU: hf_roformer (with and without the fused RoPE kernel) vs
transformers' BERT with SDPA, same size and batch. Prints per model the host time per forward, the device time, the
number of kernel launches and the kernels that take the most device time.

    python benchmarks/profile_gpu.py [--batch 8 --length 512]
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


def summarize(name: str, model, input_ids, device) -> dict:
    """Profile five forwards; return host ms, device ms and launches per forward, and print the top kernels."""
    with torch.inference_mode():
        for _ in range(3):
            model(input_ids)
        torch.cuda.synchronize()
        host = benchlib.time_call(lambda: model(input_ids), device, repeats=10, warmup=0)["median_s"]
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
            for _ in range(5):
                model(input_ids)
            torch.cuda.synchronize()
    events = [event for event in profiler.key_averages() if event.device_type == torch.autograd.DeviceType.CUDA]
    device_us = sum(event.self_device_time_total for event in events) / 5
    launches = sum(event.count for event in events) / 5
    print(
        f"\n== {name}: {host * 1e3:.2f} ms per synchronized forward, {device_us / 1e3:.2f} ms of kernels, "
        f"{launches:.0f} kernels per forward"
    )
    for event in sorted(events, key=lambda e: -e.self_device_time_total)[:12]:
        print(f"  {event.self_device_time_total / 5 / 1e3:7.3f} ms  x{event.count // 5:<4d} {event.key[:100]}")
    return {"host_ms": host * 1e3, "device_ms": device_us / 1e3, "kernels": launches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    args = parser.parse_args()
    device, dtype = torch.device("cuda"), torch.bfloat16
    input_ids = torch.randint(1, 50000, (args.batch, args.length), device=device)
    torch.manual_seed(0)
    ours = hf_roformer.HfRoFormerModel(hf_roformer.HfRoFormerConfig(**SIZE)).to(device, dtype).eval()
    bert_config = transformers.BertConfig(**SIZE, max_position_embeddings=args.length, attn_implementation="sdpa")
    bert = transformers.BertModel(bert_config).to(device, dtype).eval()
    summarize("hf_roformer, fused RoPE kernel", ours, input_ids, device)
    rotary_kernels_hf_roformer.KERNEL_ENABLED = False
    summarize("hf_roformer, PyTorch RoPE", ours, input_ids, device)
    rotary_kernels_hf_roformer.KERNEL_ENABLED = True
    summarize("BERT, SDPA", bert, input_ids, device)


if __name__ == "__main__":
    main()
