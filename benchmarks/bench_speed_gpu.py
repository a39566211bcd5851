"""GPU speed measurements: fused RoPE kernel bandwidth, padded vs packed batches, and a 32k-token forward.

    python benchmarks/bench_speed_gpu.py                    # CUDA, bf16 -> results/speed_<gpu>.{json,md}
    python benchmarks/bench_speed_gpu.py --device cpu --smoke   # tiny sizes, checks the script runs

1. RoPE on q and k of 8 x 2048 x 12 heads x 64 (bf16): the fused kernel (as the layers call it, in place under
   inference, and out of place), the PyTorch path of this package (eager and compiled), the formula of transformers'
   RoFormer, and the rotate-half formula that permuting the q/k projection rows at load time would allow, against a
   device copy of the same bytes (read q, k; write q, k) and one plain elementwise operation. Forward and
   forward + backward; device time, and the host time each call costs (back to back, not waiting for the device).
2. A padded batch (16 sequences, ~70% real tokens) through the base model in each `padding_free` mode (`auto` unpads
   once and runs `varlen_attn`), the same tokens as one declared packed row, and flash-attention-2 when installed.
3. Padding-free by length: padded vs unpadded (`varlen_attn`) at row widths 256 to 4,096, with ~50%, ~70% and ~95%
   real tokens: where `padding_free="auto"` starts to unpad (`AUTO_UNPAD_MIN_LENGTH`, `AUTO_UNPAD_MAX_REAL_FRACTION`).
4. One 32,768-token sequence through the base model (768 hidden, 12 layers): time and peak memory.
Model throughput against BERT-SDPA, transformers' RoFormer and ModernBERT is `bench_peers_gpu.py`.
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch
import transformers
from transformers.models.roformer.modeling_roformer import RoFormerSelfAttention


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402
from hf_roformer.remote_code import modeling_hf_roformer, rotary_hf_roformer, rotary_kernels_hf_roformer  # noqa: E402
from hf_roformer.remote_code.rotary_hf_roformer import TokenRotation, rotate_interleaved, rotation_cos_sin  # noqa: E402


def transformers_roformer_rotation(query, key, cos, sin):
    """The rotation formula of transformers' RoFormer (`apply_rotary_position_embeddings`), for comparison; it takes
    one table holding sin then cos."""
    sinusoidal = torch.cat([sin, cos], dim=-1)[:, None]
    return RoFormerSelfAttention.apply_rotary_position_embeddings(sinusoidal, query, key)


def rotate_half_rotation(query, key, cos, sin):
    """The rotate-half formula (GPT-NeoX / Llama layout) in PyTorch: what RoPE would cost if the q/k projection rows
    were permuted at load time so that pairs sit in halves, which leaves q·k unchanged."""
    cos = torch.cat([cos, cos], dim=-1)[:, None].to(query.dtype)
    sin = torch.cat([sin, sin], dim=-1)[:, None].to(query.dtype)

    def rotate(x):
        first, second = x.chunk(2, dim=-1)
        return x * cos + torch.cat([-second, first], dim=-1) * sin

    return rotate(query), rotate(key)


def rope_bandwidth(device, dtype, shape, repeats) -> dict:
    batch, seq, heads, dim = shape
    query = torch.randn(batch, seq, heads, dim, device=device, dtype=dtype).transpose(1, 2)
    key = torch.randn(batch, seq, heads, dim, device=device, dtype=dtype).transpose(1, 2)
    inv_freq = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    cos, sin = rotation_cos_sin(torch.arange(seq, device=device)[None], inv_freq)
    moved = 4 * query.numel() * query.element_size()  # read q, k and write q, k
    rotation = TokenRotation(cos, sin)
    candidates = {
        "device copy": lambda: (query.clone(), key.clone()),
        "one elementwise op (q * 2)": lambda: query * 2,
        "torch path (hf_roformer)": lambda: (rotate_interleaved(query, cos, sin), rotate_interleaved(key, cos, sin)),
        "transformers RoFormer formula": lambda: transformers_roformer_rotation(query, key, cos, sin),
        "rotate-half layout (permuted projections), torch": lambda: rotate_half_rotation(query, key, cos, sin),
        "rotate-half layout, torch.compile": torch.compile(lambda: rotate_half_rotation(query, key, cos, sin)),
        "interleaved torch path, torch.compile": torch.compile(
            lambda: (rotate_interleaved(query, cos, sin), rotate_interleaved(key, cos, sin))
        ),
    }
    if rotary_hf_roformer.kernel_applies(query):
        candidates["fused Triton kernel"] = lambda: rotary_kernels_hf_roformer.rotate_with_kernel(
            [query, key], cos, sin
        )
        candidates["fused Triton kernel, as layers call it (in place)"] = lambda: rotation.rotate(
            query, key, in_place=True
        )
    results = {}
    for name, function in candidates.items():
        with torch.inference_mode():
            timing = benchlib.time_call(function, device, repeats=repeats, warmup=3)
            streamed = benchlib.back_to_back_seconds(function, device)
            host = benchlib.host_seconds(function, device)
            kernels = benchlib.kernel_seconds(function, device) if device.type == "cuda" else streamed
        results[name] = {
            "us": kernels * 1e6,
            "GB_per_s": moved / kernels / 1e9,
            "us_back_to_back": streamed * 1e6,
            "us_host_per_call": host * 1e6,
            "us_per_synchronized_call": timing["median_s"] * 1e6,
        }
    if "fused Triton kernel" in candidates:
        q = query.detach().requires_grad_()
        k = key.detach().requires_grad_()

        upstream = [torch.randn_like(query), torch.randn_like(key)]  # made once: not part of the timing

        def forward_backward():  # autograd.grad: no accumulation into .grad, which would add its own traffic
            outputs = rotary_kernels_hf_roformer.rotate_with_kernel([q, k], cos, sin)
            torch.autograd.grad(outputs, [q, k], upstream)

        timing = benchlib.time_call(forward_backward, device, repeats=repeats, warmup=3)
        streamed = benchlib.back_to_back_seconds(forward_backward, device)
        host = benchlib.host_seconds(forward_backward, device)
        kernels = benchlib.kernel_seconds(forward_backward, device) if device.type == "cuda" else streamed
        results["fused Triton kernel, forward + backward"] = {
            "us": kernels * 1e6,
            "GB_per_s": 2 * moved / kernels / 1e9,
            "us_back_to_back": streamed * 1e6,
            "us_host_per_call": host * 1e6,
            "us_per_synchronized_call": timing["median_s"] * 1e6,
        }
    return results


def base_model(device, dtype, size, attn_implementation="sdpa"):
    config = hf_roformer.HfRoFormerConfig(vocab_size=50000, attn_implementation=attn_implementation, **size)
    torch.manual_seed(0)
    return hf_roformer.HfRoFormerModel(config).to(device, dtype).eval()


def padded_vs_packed(device, dtype, size, lengths, repeats) -> dict:
    """The same padded batch through each `padding_free` mode (auto: a variable-length kernel where one runs), and
    the same tokens handed over as one packed row (the `DataCollatorWithFlattening` convention)."""
    model = base_model(device, dtype, size)
    width = max(lengths)
    input_ids = torch.randint(5, 50000, (len(lengths), width), device=device)
    attention_mask = (torch.arange(width, device=device)[None] < torch.tensor(lengths, device=device)[:, None]).long()
    packed_ids = torch.cat([input_ids[row, :length] for row, length in enumerate(lengths)])[None]
    packed_positions = torch.cat([torch.arange(length, device=device) for length in lengths])[None]
    cu_seq_lens = torch.tensor([0, *lengths], device=device).cumsum(0).to(torch.int32)
    boundaries = dict(cu_seq_lens_q=cu_seq_lens, cu_seq_lens_k=cu_seq_lens, max_length_q=width, max_length_k=width)
    padded = dict(input_ids=input_ids, attention_mask=attention_mask)
    packed = dict(input_ids=packed_ids, position_ids=packed_positions, **boundaries)
    runs = {
        "padded batch, sdpa, padding_free=never": (model, "never", padded),
        "padded batch, sdpa, padding_free=auto": (model, "auto", padded),
        "padded batch, sdpa, padding_free=always (varlen_attn on CUDA)": (model, "always", padded),
        "declared packed row (cu_seq_lens), sdpa": (model, "never", packed),
    }
    if device.type == "cuda" and transformers.utils.is_flash_attn_2_available():
        flash = base_model(device, dtype, size, "flash_attention_2")
        runs["padded batch, flash_attention_2, padding_free=never"] = (flash, "never", padded)
        runs["padded batch, flash_attention_2, padding_free=auto"] = (flash, "auto", padded)
    results = {"real_token_share": sum(lengths) / (len(lengths) * width)}
    varlen_calls = []
    if modeling_hf_roformer.varlen_attn is not None:  # count calls, to report which runs used the kernel
        kernel = modeling_hf_roformer.varlen_attn
        modeling_hf_roformer.varlen_attn = lambda *a, **k: varlen_calls.append(1) or kernel(*a, **k)
    real = attention_mask.bool()
    outputs = {}

    def call(name):
        runner, mode, inputs = runs[name]
        runner.config.padding_free = mode
        with torch.inference_mode():
            return runner(**inputs)

    used_varlen = {}
    for name, (_, _, inputs) in runs.items():
        varlen_calls.clear()
        output = call(name)
        used_varlen[name] = bool(varlen_calls)
        if "attention_mask" in inputs:
            outputs[name] = output.last_hidden_state[real].float()
    times = {name: [] for name in runs}
    for name in runs:  # warm-up
        benchlib.time_call(lambda n=name: call(n), device, repeats=1, warmup=2)
    for _ in range(repeats):  # round-robin, so drift of the machine hits every run alike
        for name in runs:
            times[name].append(benchlib.time_call(lambda n=name: call(n), device, repeats=1, warmup=0)["median_s"])
    for name in runs:
        median = statistics.median(times[name])
        results[name] = {
            "ms": median * 1e3,
            "real_tokens_per_s": sum(lengths) / median,
            "varlen_attn_used": used_varlen[name],
        }
    reference = outputs.pop("padded batch, sdpa, padding_free=never")
    for name, output in outputs.items():
        results[name]["max_abs_diff_vs_padded"] = (output - reference).abs().max().item()
    model.config.padding_free = "auto"
    if modeling_hf_roformer.varlen_attn is not None:
        modeling_hf_roformer.varlen_attn = kernel
    return results


def padding_free_by_length(device, dtype, size, repeats) -> list[dict]:
    """Padded (`never`) vs unpadded (`always`, the variable-length kernel) forwards of 16 rows at several widths and
    real-token shares, to place `padding_free="auto"`'s thresholds."""
    model = base_model(device, dtype, size)
    generator = torch.Generator().manual_seed(0)
    rows = []
    for width in (256, 512, 1024, 2048, 4096):
        for low in (0.0, 0.4, 0.9):  # lengths uniform in [low * width, width]: ~50%, ~70% and ~95% real tokens
            lengths = torch.randint(max(int(low * width), 1), width + 1, (16,), generator=generator)
            lengths[0] = width
            batch = 16 if width <= 2048 else 4
            lengths = lengths[:batch]
            inputs = {
                "input_ids": torch.randint(5, 50000, (batch, width), device=device),
                "attention_mask": (torch.arange(width)[None] < lengths[:, None]).long().to(device),
            }
            times = {"never": [], "always": []}

            def call(mode, inputs=inputs):
                model.config.padding_free = mode
                with torch.inference_mode():
                    return model(**inputs)

            for mode in times:
                benchlib.time_call(lambda m=mode: call(m), device, repeats=1, warmup=2)
            for _ in range(repeats):
                for mode in times:
                    times[mode].append(benchlib.time_call(lambda m=mode: call(m), device, 1, 0)["median_s"])
            never, always = statistics.median(times["never"]), statistics.median(times["always"])
            rows.append(
                {
                    "batch": batch,
                    "width": width,
                    "real_token_share": float(lengths.sum()) / (batch * width),
                    "padded_ms": never * 1e3,
                    "unpadded_ms": always * 1e3,
                    "speedup": never / always,
                }
            )
            print(rows[-1], flush=True)
    model.config.padding_free = "auto"
    return rows


def long_sequence(device, dtype, size, length) -> dict:
    model = base_model(device, dtype, size)
    input_ids = torch.randint(5, 50000, (1, length), device=device)
    baseline = benchlib.reset_peak_memory(device)
    with torch.inference_mode():
        timing = benchlib.time_call(lambda: model(input_ids), device, repeats=3, warmup=1)
    return {
        "tokens": length,
        "seconds": timing["median_s"],
        "peak_extra_mb": (benchlib.peak_memory(device) - baseline) / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check the script runs")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if args.smoke:
        size = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
        shape, lengths, long_length, repeats = (2, 64, 2, 32), [40, 28, 64, 17], 1024, 2
    else:
        size = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
        lengths = [512, 480, 300, 512, 128, 400, 512, 256, 350, 512, 200, 450, 512, 380, 300, 240]
        shape, long_length, repeats = (8, 2048, 12, 64), 32768, 20
    payload = {
        "machine": benchlib.machine_info(device),
        "rope": rope_bandwidth(device, dtype, shape, repeats),
        "padded_vs_packed": padded_vs_packed(device, dtype, size, lengths, repeats),
        # The same mix at 4x the lengths: attention's share of the work grows, and the host no longer bounds the step.
        "padded_vs_packed_long": None
        if args.smoke
        else padded_vs_packed(device, dtype, size, [4 * n for n in lengths], repeats),
        "padding_free_by_length": None if args.smoke else padding_free_by_length(device, dtype, size, repeats),
        "long_sequence": long_sequence(device, dtype, size, long_length),
    }
    machine = payload["machine"]
    copy_rate = payload["rope"]["device copy"]["GB_per_s"]
    rope_rows = [
        [
            name,
            f"{r['us']:.1f}",
            f"{r['GB_per_s']:.0f}",
            f"{r['GB_per_s'] / copy_rate:.0%}",
            f"{r['us_back_to_back']:.1f}",
            f"{r['us_host_per_call']:.1f}",
            f"{r['us_per_synchronized_call']:.1f}",
        ]
        for name, r in payload["rope"].items()
    ]

    def packed_table(packed: dict, lengths: list[int]) -> str:
        padded_ms = packed["padded batch, sdpa, padding_free=never"]["ms"]
        rows = [
            [
                name,
                f"{r['ms']:.2f}",
                f"{r['real_tokens_per_s']:,.0f}",
                f"{padded_ms / r['ms']:.2f}x",
                f"{r['max_abs_diff_vs_padded']:.1e}" if "max_abs_diff_vs_padded" in r else "",
                "yes" if r["varlen_attn_used"] else "no",
            ]
            for name, r in packed.items()
            if name != "real_token_share"
        ]
        return (
            f"\n## Padded batch of {len(lengths)} sequences of {min(lengths)}-{max(lengths)} tokens "
            f"({packed['real_token_share']:.0%} real tokens) vs packed row\n\n"
            + benchlib.markdown_table(
                ["run", "ms", "real tokens/s", "vs padded", "max abs diff on real tokens", "varlen_attn ran"], rows
            )
        )

    def by_length_table(sweep: list[dict]) -> str:
        rows = [
            [
                f"{r['batch']} x {r['width']}",
                f"{r['real_token_share']:.0%}",
                f"{r['padded_ms']:.2f}",
                f"{r['unpadded_ms']:.2f}",
                f"{r['speedup']:.2f}x",
            ]
            for r in sweep
        ]
        return "\n## Padding-free by length (sdpa; unpadded runs `varlen_attn`)\n\n" + benchlib.markdown_table(
            ["rows x width", "real tokens", "padded ms", "unpadded ms", "unpadded speedup"], rows
        )

    long = payload["long_sequence"]
    markdown = (
        f"# Speed on {machine.get('gpu', machine['cpu'])}\n\ntorch {machine['torch']}, transformers "
        f"{machine['transformers']}, {dtype}, {machine['date']}.\n\n## RoPE on q and k {shape}\n\n"
        + benchlib.markdown_table(
            [
                "implementation",
                "kernel us",
                "GB/s",
                "of copy bandwidth",
                "us back to back",
                "host us per call",
                "us synchronized",
            ],
            rope_rows,
        )
        + "\nKernel us: the GPU kernels' own durations per call (profiler), which GB/s is computed from. Back to back:"
        " 50 calls launched without waiting, timed together (the host's launch cost shows where it exceeds the"
        " kernels'). Host us per call: the same without waiting for the device at the end, i.e. the host's own work"
        " per call. Synchronized: one call and a device synchronization.\n"
        + packed_table(payload["padded_vs_packed"], lengths)
        + (packed_table(payload["padded_vs_packed_long"], [4 * n for n in lengths]) if not args.smoke else "")
        + (by_length_table(payload["padding_free_by_length"]) if not args.smoke else "")
        + f"\n## One {long['tokens']:,}-token sequence, base model\n\n{long['seconds']:.2f} s, peak "
        f"{long['peak_extra_mb']:,.0f} MB above the model.\n"
    )
    if args.smoke:  # a check that the script runs, not a measurement to keep
        print(markdown)
        return
    for path in benchlib.write_results(
        f"speed_{machine.get('gpu', 'cpu').replace(' ', '_').lower()}", payload, markdown
    ):
        print(path)


if __name__ == "__main__":
    main()
