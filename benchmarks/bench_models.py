"""Model throughput and peak memory: hf_roformer vs transformers' RoFormer vs transformers' BERT (SDPA), one run.

    python benchmarks/bench_models.py --preset cpu   # 2 threads, hidden 256, 4 layers (the CPU targets)
    python benchmarks/bench_models.py --preset gpu   # CUDA, bf16, base size (768 hidden, 12 layers, 12 heads)
    python benchmarks/bench_models.py --preset gpu --compile default          # both models under torch.compile
    python benchmarks/bench_models.py --preset gpu --compile reduce-overhead  # ... replayed as CUDA graphs

All three models have the same size and random weights; hf_roformer is loaded from the transformers RoFormer's
weights, so the benchmark also checks that both compute the same thing. Results: benchmarks/results/models_<preset>.*
"""

import argparse
import gc
import statistics
import subprocess
import sys
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402


PRESETS = {
    "cpu": {
        "device": "cpu",
        "dtype": "float32",
        "threads": 2,
        "size": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
        "inference": [(32, 128), (8, 512), (4, 2048)],
        "training": [(4, 512)],
        "repeats": 5,
    },
    "gpu": {
        "device": "cuda",
        "dtype": "bfloat16",
        "threads": None,
        "size": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
        "inference": [(32, 128), (8, 512), (2, 1536), (8, 2048), (1, 8192)],
        "training": [(8, 512), (8, 2048)],
        "compiled_inference": [(32, 128), (8, 512), (8, 2048)],
        "repeats": 20,
    },
}
MODELS = ("hf_roformer", "transformers_roformer", "bert_sdpa")
COMPILED_MODELS = ("hf_roformer", "bert_sdpa")


def build_models(kind: str, size: dict, max_length: int, training: bool):
    """A model of `kind` with seeded random weights; hf_roformer loads the transformers RoFormer's state dict."""
    common = dict(vocab_size=50000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **size)
    torch.manual_seed(0)
    if kind == "bert_sdpa":
        bert_config = transformers.BertConfig(**common, max_position_embeddings=max_length, attn_implementation="sdpa")
        return (transformers.BertForMaskedLM if training else transformers.BertModel)(bert_config)
    reference_config = transformers.RoFormerConfig(**common, max_position_embeddings=max_length)
    reference = (transformers.RoFormerForMaskedLM if training else transformers.RoFormerModel)(reference_config)
    if kind == "transformers_roformer":
        return reference
    ours_class = hf_roformer.HfRoFormerForMaskedLM if training else hf_roformer.HfRoFormerModel
    model = ours_class(hf_roformer.HfRoFormerConfig(**common, attn_implementation="sdpa"))
    missing, unexpected = model.load_state_dict(reference.state_dict(), strict=False)
    assert not missing and all("embed_positions" in key for key in unexpected), (missing, unexpected)
    return model


def model_flops(size: dict, batch: int, length: int, training: bool, vocab_size: int = 50000) -> float:
    """Matrix-multiply FLOPs of one step: per token and layer 8h² (q, k, v, output), 4h·i (feed-forward) and 4L·h
    (scores and weighted values over L keys); training adds the masked-LM head (2h² + 2h·V) and counts backward as
    twice the forward."""
    hidden, intermediate = size["hidden_size"], size["intermediate_size"]
    per_token = size["num_hidden_layers"] * (8 * hidden**2 + 4 * hidden * intermediate + 4 * length * hidden)
    if training:
        per_token = 3 * (per_token + 2 * hidden**2 + 2 * hidden * vocab_size)
    return batch * length * per_token


def inference_step(model, batch: int, length: int, device, dtype):
    """A closure running one forward pass on random tokens."""
    input_ids = torch.randint(1, 50000, (batch, length), device=device)

    def step():
        with torch.inference_mode():
            model(input_ids)

    return step


def training_step(model, batch: int, length: int, device, dtype):
    """A closure running one masked-LM training step (forward, backward, AdamW), bf16 autocast on GPU."""
    input_ids = torch.randint(1, 50000, (batch, length), device=device)
    autocast_dtype = dtype if dtype != torch.float32 else None
    return benchlib.labelled_training_step(model, {"input_ids": input_ids}, input_ids, autocast_dtype)


def measure(steps: dict, device, repeats: int) -> dict:
    """Time the models' steps round-robin, so drift of the machine (clock, other load) hits all of them alike."""
    times = {kind: [] for kind in steps}
    for step in steps.values():
        benchlib.time_call(step, device, repeats=1, warmup=2)
    for _ in range(repeats):
        for kind, step in steps.items():
            times[kind].append(benchlib.time_call(step, device, repeats=1, warmup=0)["median_s"])
    return {
        kind: {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values)}
        for kind, values in times.items()
    }


def peak_extra_memory_mb(preset_name: str, mode: str, kind: str, batch: int, length: int) -> float:
    """Memory one step needs beyond the model itself: GPU allocator peak, or on CPU the resident-set peak of a fresh
    process (the CPU allocator keeps freed pages, so only a new process measures one step honestly)."""
    if PRESETS[preset_name]["device"] == "cpu":
        command = [
            sys.executable,
            __file__,
            "--preset",
            preset_name,
            "--memory-probe",
            mode,
            kind,
            str(batch),
            str(length),
        ]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        return float(output.strip().splitlines()[-1])
    return memory_probe(preset_name, mode, kind, batch, length)


def memory_probe(preset_name: str, mode: str, kind: str, batch: int, length: int) -> float:
    """Build one model, run one step, return the peak memory above the built model in MB."""
    preset = PRESETS[preset_name]
    device, dtype = torch.device(preset["device"]), getattr(torch, preset["dtype"])
    if preset["threads"]:
        torch.set_num_threads(preset["threads"])
    model = build_models(kind, preset["size"], length, training=mode == "training").to(device)
    model = model.train() if mode == "training" else model.to(dtype).eval()
    step = (training_step if mode == "training" else inference_step)(model, batch, length, device, dtype)
    baseline = benchlib.reset_peak_memory(device)
    step()
    benchlib.synchronize(device)
    extra = (benchlib.peak_memory(device) - baseline) / 2**20
    del model, step
    return extra


def parity_check(size: dict, device, dtype) -> float:
    """Max |difference| between hf_roformer and transformers' RoFormer hidden states on one padded-free batch."""
    models = [build_models(kind, size, 512, training=False).to(device, dtype).eval() for kind in MODELS[:2]]
    input_ids = torch.randint(1, 50000, (2, 512), device=device)
    with torch.inference_mode():
        outputs = [model(input_ids).last_hidden_state.float() for model in models]
    return (outputs[0] - outputs[1]).abs().max().item()


def run_compiled(preset_name: str, mode: str) -> dict:
    """hf_roformer and BERT-SDPA inference under `torch.compile(mode=mode)` (static shapes; "reduce-overhead" replays
    CUDA graphs), on the preset's `compiled_inference` shapes."""
    preset = PRESETS[preset_name]
    device, dtype = torch.device(preset["device"]), getattr(torch, preset["dtype"])
    shapes = preset.get("compiled_inference", preset["inference"])
    max_length = max(length for _, length in shapes)
    results = {}
    models = {
        kind: torch.compile(
            build_models(kind, preset["size"], max_length, training=False).to(device, dtype).eval(),
            mode=mode,
            dynamic=False,
        )
        for kind in COMPILED_MODELS
    }
    for batch, length in shapes:
        steps = {kind: inference_step(model, batch, length, device, dtype) for kind, model in models.items()}
        by_model = measure(steps, device, preset["repeats"])
        for kind, result in by_model.items():
            result["tokens_per_s"] = batch * length / result["median_s"]
            result["tflops"] = model_flops(preset["size"], batch, length, False) / result["median_s"] / 1e12
            print(f"compiled {mode} {batch}x{length:<6d} {kind:12s} {result['tokens_per_s']:>12,.0f} tok/s", flush=True)
        results[f"{batch}x{length}"] = by_model
    return {
        "preset": preset_name,
        "compile_mode": mode,
        "config": dict(preset),
        "machine": benchlib.machine_info(device),
        "peak_matmul_tflops": benchlib.matmul_tflops(device, dtype),
        "results": {"inference": results},
    }


def compiled_markdown(payload: dict) -> str:
    """The compiled run's table: throughput of both models and their ratio."""
    machine, peak = payload["machine"], payload["peak_matmul_tflops"]
    rows = []
    for shape, by_model in payload["results"]["inference"].items():
        ours, bert = by_model["hf_roformer"], by_model["bert_sdpa"]
        rows.append(
            [shape, f"{ours['tokens_per_s']:,.0f}", f"{bert['tokens_per_s']:,.0f}"]
            + [f"{ours['tokens_per_s'] / bert['tokens_per_s']:.2f}x"]
            + ([f"{ours['tflops'] / peak:.0%}"] if peak else [])
        )
    headers = ["batch x length", "hf_roformer tok/s", "bert_sdpa tok/s", "vs BERT-SDPA"] + (["MFU"] if peak else [])
    return (
        f"# Model benchmark: preset `{payload['preset']}`, `torch.compile(mode=\"{payload['compile_mode']}\")`\n\n"
        f"Machine: {machine.get('gpu', machine['cpu'])}, torch {machine['torch']}, transformers "
        f"{machine['transformers']}, {payload['config']['dtype']}, {machine['date']}. Inference, static shapes, "
        f"median of {payload['config']['repeats']} runs after compilation.\n\n" + benchlib.markdown_table(headers, rows)
    )


def run(preset_name: str) -> dict:
    """Measure every model on every shape of the preset."""
    preset = PRESETS[preset_name]
    device = torch.device(preset["device"])
    dtype = getattr(torch, preset["dtype"])
    if preset["threads"]:
        torch.set_num_threads(preset["threads"])
    max_length = max(length for _, length in preset["inference"] + preset["training"])
    results = {}
    for mode, make_step in (("inference", inference_step), ("training", training_step)):
        training = mode == "training"
        models = {}
        for kind in MODELS:
            model = build_models(kind, preset["size"], max_length, training=training).to(device)
            models[kind] = model.train() if training else model.to(dtype).eval()
        for batch, length in preset[mode]:
            steps = {kind: make_step(model, batch, length, device, dtype) for kind, model in models.items()}
            by_model = measure(steps, device, preset["repeats"])
            for kind, result in by_model.items():
                result["tokens_per_s"] = batch * length / result["median_s"]
                result["tflops"] = model_flops(preset["size"], batch, length, training) / result["median_s"] / 1e12
                result["peak_extra_mb"] = peak_extra_memory_mb(preset_name, mode, kind, batch, length)
                print(
                    f"{mode:9s} {batch}x{length:<6d} {kind:22s} {result['tokens_per_s']:>12,.0f} tok/s  "
                    f"{result['peak_extra_mb']:>8.0f} MB",
                    flush=True,
                )
            results.setdefault(mode, {})[f"{batch}x{length}"] = by_model
            del steps
        del models
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return {
        "preset": preset_name,
        "config": dict(preset),
        "machine": benchlib.machine_info(device),
        "peak_matmul_tflops": benchlib.matmul_tflops(device, dtype),
        "parity_max_abs_diff": parity_check(preset["size"], device, dtype),
        "results": results,
    }


def to_markdown(payload: dict) -> str:
    """Tables of throughput, memory and the ratios the targets are stated in."""
    machine = payload["machine"]
    lines = [
        f"# Model benchmark: preset `{payload['preset']}`\n",
        f"Machine: {machine.get('gpu', machine['cpu'])}, torch {machine['torch']}, transformers "
        f"{machine['transformers']}, {machine['torch_threads']} CPU threads, {payload['config']['dtype']}, "
        f"{machine['date']}. Size: {payload['config']['size']}, vocab 50000. Median of "
        f"{payload['config']['repeats']} runs.\n",
        f"hf_roformer vs transformers' RoFormer, same weights: max |diff| of hidden states = "
        f"{payload['parity_max_abs_diff']:.2e}.\n",
    ]
    peak = payload.get("peak_matmul_tflops")
    if peak:
        lines.append(
            f"MFU: model matrix-multiply FLOPs per second over the bf16 matmul rate measured in the same run "
            f"(8192³: {peak:.0f} TFLOP/s).\n"
        )
    for mode, table in payload["results"].items():
        rows = []
        for shape, by_model in table.items():
            ours = by_model["hf_roformer"]
            rows.append(
                [shape]
                + [f"{by_model[kind]['tokens_per_s']:,.0f}" for kind in MODELS]
                + [
                    f"{ours['tokens_per_s'] / by_model['transformers_roformer']['tokens_per_s']:.2f}x",
                    f"{ours['tokens_per_s'] / by_model['bert_sdpa']['tokens_per_s']:.2f}x",
                ]
                + [f"{by_model[kind]['peak_extra_mb']:,.0f}" for kind in MODELS]
                + ([f"{ours['tflops'] / peak:.0%}"] if peak else [])
            )
        headers = (
            ["batch x length"]
            + [f"{kind} tok/s" for kind in MODELS]
            + ["vs transformers RoFormer", "vs BERT-SDPA"]
            + [f"{kind} peak MB" for kind in MODELS]
            + (["hf_roformer MFU"] if peak else [])
        )
        lines.append(f"\n## {mode.capitalize()}\n\n" + benchlib.markdown_table(headers, rows))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="cpu")
    parser.add_argument("--repeats", type=int, help="timed rounds per shape (default: the preset's)")
    parser.add_argument("--compile", choices=["default", "reduce-overhead", "max-autotune"], help="compile mode")
    parser.add_argument("--memory-probe", nargs=4, metavar=("MODE", "MODEL", "BATCH", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_probe:
        mode, kind, batch, length = args.memory_probe
        print(memory_probe(args.preset, mode, kind, int(batch), int(length)))
        return
    if args.repeats:
        PRESETS[args.preset]["repeats"] = args.repeats
    if args.compile:
        payload = run_compiled(args.preset, args.compile)
        name = f"models_{args.preset}_compiled_{args.compile.replace('-', '_')}"
        print("\n".join(str(path) for path in benchlib.write_results(name, payload, compiled_markdown(payload))))
        return
    payload = run(args.preset)
    paths = benchlib.write_results(f"models_{args.preset}", payload, to_markdown(payload))
    print("\n".join(str(path) for path in paths))


if __name__ == "__main__":
    main()
