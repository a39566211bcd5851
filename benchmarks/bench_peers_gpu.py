"""The peer table on a CUDA GPU, in ModernBERT's protocol: hf_roformer against transformers' BERT (SDPA), transformers'
RoFormer and ModernBERT at the same size, every model's rounds interleaved in one run.

    python benchmarks/bench_peers_gpu.py                          # CUDA, bf16 -> results/peers_<gpu>.{json,md}
    python benchmarks/bench_peers_gpu.py --compile default        # hf_roformer, BERT and ModernBERT compiled
    python benchmarks/bench_peers_gpu.py --device cpu --smoke     # tiny sizes, checks the script runs

Models (random weights, seeded): hf_roformer at base size (768 hidden, 12 layers, 12 heads, 3,072 feed-forward), BERT
with SDPA of the same size (its position table widened to 8,192), transformers' RoFormer of the same size, and
ModernBERT from its base config at 12 layers with global attention in every layer (768 hidden, 12 heads, its gated
1,152-wide feed-forward). One vocabulary (ModernBERT's 50,368) for all, so the masked-LM heads cost the same.

Batches: (a) fixed lengths 32 x 128, 8 x 512, 4 x 2,048, 1 x 8,192; (b) variable lengths as ModernBERT's benchmark
draws them: rows of lengths around 256 and around 512 (normal, with a spread, clipped), and long documents of 512 to
8,192 tokens, each batch padded to its longest row as a padding collator does. hf_roformer runs twice on them: with its
default (`padding_free="auto"`) and with its padding-free path forced (`"always"`: the real tokens of all rows packed
into one row, attended per sequence by `varlen_attn`). The peers have no padding-free path on this install: BERT and
RoFormer have none, and transformers' ModernBERT attends packed rows only through the flash-attention packages.

Measured: inference (the bf16 model, `inference_mode`) and training (float32 weights under bf16 autocast: the
masked-LM step, forward, backward and AdamW); real tokens per second, MFU (each model's own FLOPs: twice its dense
weights per token plus 4 x length x hidden per layer for attention, three times that for training, over the bf16
matrix-multiply rate measured in the same run), and peak memory of a step above what was allocated before it.
"""

import argparse
import gc
import statistics
import sys
import zlib
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402


VOCAB_SIZE = 50368  # ModernBERT's
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
MODERNBERT_INTERMEDIATE = 1152  # ModernBERT-base's gated feed-forward width
SMOKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
FIXED = [(32, 128), (8, 512), (4, 2048), (1, 8192)]
SMOKE_FIXED = [(4, 32), (2, 64)]
# name: (rows, mean length, spread, shortest, longest)
VARIABLE = {
    "around 256": (64, 256, 64, 32, 512),
    "around 512": (32, 512, 128, 64, 1024),
    "long documents": (4, 4096, 2048, 512, 8192),
}
SMOKE_VARIABLE = {"around 32": (6, 32, 8, 8, 64)}
PEERS = ("hf_roformer", "bert_sdpa", "transformers_roformer", "modernbert")
PADDING_FREE = "hf_roformer, padding-free"
COMPILABLE = ("hf_roformer", "bert_sdpa", "modernbert")


def build_model(kind: str, size: dict, training: bool, max_length: int) -> torch.nn.Module:
    """A model of `kind` at `size` with seeded random weights: the bare encoder for inference, the masked-LM model for
    training. No dropout, so every model does the same work each step."""
    torch.manual_seed(0)
    common = dict(vocab_size=VOCAB_SIZE, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **size)
    if kind == "bert_sdpa":
        config = transformers.BertConfig(**common, max_position_embeddings=max_length, attn_implementation="sdpa")
        return (
            transformers.BertForMaskedLM(config)
            if training
            else transformers.BertModel(config, add_pooling_layer=False)
        )
    if kind == "transformers_roformer":
        config = transformers.RoFormerConfig(**common, max_position_embeddings=max_length)
        return (transformers.RoFormerForMaskedLM if training else transformers.RoFormerModel)(config)
    if kind == "modernbert":
        layers = size["num_hidden_layers"]
        config = transformers.ModernBertConfig(
            vocab_size=VOCAB_SIZE,
            hidden_size=size["hidden_size"],
            num_hidden_layers=layers,
            num_attention_heads=size["num_attention_heads"],
            intermediate_size=MODERNBERT_INTERMEDIATE if size == BASE else size["intermediate_size"],
            max_position_embeddings=max_length,
            layer_types=["full_attention"] * layers,
            attn_implementation="sdpa",
        )
        model = (transformers.ModernBertForMaskedLM if training else transformers.ModernBertModel)(config)
        windows = {getattr(module, "sliding_window", None) for module in model.modules() if hasattr(module, "Wqkv")}
        if windows != {None}:
            raise RuntimeError(
                f"ModernBERT was built with local attention windows {windows}; every layer must be global"
            )
        return model
    config = hf_roformer.HfRoFormerConfig(**common, attn_implementation="sdpa")
    return (hf_roformer.HfRoFormerForMaskedLM if training else hf_roformer.HfRoFormerModel)(config)


def dense_flops_per_token(model: torch.nn.Module) -> int:
    """Twice the weights of the linear layers every token goes through (a pooler, which reads one token, excluded)."""
    return 2 * sum(
        module.in_features * module.out_features
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and "pooler" not in name
    )


def step_flops(dense_per_token: int, size: dict, lengths: list[int], training: bool) -> float:
    """Matrix-multiply FLOPs of one step over sequences of `lengths` real tokens: dense work per token plus, per
    layer, 4 x length x hidden for the scores and the weighted values; backward counts twice the forward."""
    attention = 4 * size["hidden_size"] * size["num_hidden_layers"]
    forward = sum(length * (dense_per_token + attention * length) for length in lengths)
    return 3 * forward if training else forward


def variable_lengths(spec: tuple, seed: int) -> list[int]:
    """Row lengths drawn from a normal distribution (mean, spread) and clipped to (shortest, longest)."""
    rows, mean, spread, shortest, longest = spec
    generator = torch.Generator().manual_seed(seed)
    drawn = torch.normal(float(mean), float(spread), (rows,), generator=generator).round().long()
    return drawn.clamp(shortest, longest).tolist()


def make_batch(lengths: list[int], device: torch.device, seed: int) -> dict:
    """Random token ids padded to the longest row, with the attention mask a padding collator makes."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    input_ids = torch.randint(5, VOCAB_SIZE, (len(lengths), width), generator=generator)
    mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
    input_ids = input_ids * mask  # pad id 0 at padding positions
    return {"input_ids": input_ids.to(device), "attention_mask": mask.to(device)}


def inference_step(model, batch: dict):
    """One forward of the batch without autograd."""

    def step():
        with torch.inference_mode():
            model(**batch)

    return step


def training_step(model, batch: dict, dtype: torch.dtype):
    """One masked-LM training step (loss on every real token; forward, backward, fused AdamW on CUDA) under autocast
    to `dtype`."""
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    autocast_dtype = dtype if dtype != torch.float32 else None
    fused = next(model.parameters()).is_cuda
    return benchlib.labelled_training_step(model, batch, labels, autocast_dtype, fused_adamw=fused)


def step_memory_mb(step, device: torch.device) -> float | None:
    """Peak memory of one more step above what was allocated before it (GPU allocator; None on CPU)."""
    if device.type != "cuda":
        step()
        return None
    baseline = benchlib.reset_peak_memory(device)
    step()
    benchlib.synchronize(device)
    return (benchlib.peak_memory(device) - baseline) / 2**20


def measure_interleaved(steps: dict, device: torch.device, repeats: int) -> dict:
    """Warm every step up, take its memory, then time the steps round-robin so that drift of the device (clocks,
    temperature) hits all alike. A step that runs out of memory, or fails, is recorded as such and left out of the
    rounds."""
    results, live = {}, {}
    for name, step in steps.items():
        try:
            benchlib.time_call(step, device, repeats=1, warmup=2)
            results[name] = {"peak_extra_mb": step_memory_mb(step, device)}
            live[name] = step
        except torch.OutOfMemoryError:
            results[name] = {"error": "out of memory"}
        except RuntimeError as error:  # recorded in the table, so one model's failure leaves the others' numbers
            results[name] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"}
        if "error" in results[name] and device.type == "cuda":
            gc.collect()
            torch.cuda.empty_cache()
    times = {name: [] for name in live}
    for _ in range(repeats):
        for name, step in live.items():
            times[name].append(benchlib.time_call(step, device, repeats=1, warmup=0)["median_s"])
    for name, values in times.items():
        results[name].update(median_s=statistics.median(values), min_s=min(values), max_s=max(values))
    return results


def run_mode(mode: str, args, device: torch.device, dtype: torch.dtype, size: dict, peak: float | None) -> dict:
    """Every batch of the run through every model in `mode` ("inference" or "training")."""
    training = mode == "training"
    fixed = (SMOKE_FIXED if args.smoke else FIXED) + (args.shapes or [])
    variable = SMOKE_VARIABLE if args.smoke else VARIABLE
    max_length = max([length for _, length in fixed] + [spec[4] for spec in variable.values()])
    kinds = [kind for kind in PEERS if not args.compile or kind in COMPILABLE]
    models, flops_per_token = {}, {}
    for kind in kinds:
        model = build_model(kind, size, training, max_length).to(device)
        model = model.train() if training else model.to(dtype).eval()
        flops_per_token[kind] = dense_flops_per_token(model)
        models[kind] = torch.compile(model, mode=args.compile) if args.compile else model
    batches = {f"{rows} x {length}": [length] * rows for rows, length in fixed}
    batches.update({name: variable_lengths(spec, seed) for seed, (name, spec) in enumerate(variable.items())})
    if args.batches:
        batches = {name: lengths for name, lengths in batches.items() if name in args.batches}
    table = {}
    for name, lengths in batches.items():
        batch = make_batch(lengths, device, seed=zlib.crc32(name.encode()))  # the same tokens when run alone
        runs = {kind: (kind, "auto") for kind in kinds}
        if len(set(lengths)) > 1 and not args.compile:
            runs[PADDING_FREE] = ("hf_roformer", "always")
        steps = {
            run_name: run_step(models[kind], kind, padding_free, batch, training, dtype)
            for run_name, (kind, padding_free) in runs.items()
        }
        by_run = measure_interleaved(steps, device, args.repeats)
        for run_name, result in by_run.items():
            kind = runs[run_name][0]
            if "median_s" in result:
                flops = step_flops(flops_per_token[kind], size, lengths, training)
                result["real_tokens_per_s"] = sum(lengths) / result["median_s"]
                result["tflops"] = flops / result["median_s"] / 1e12
                result["mfu"] = result["tflops"] / peak if peak else None
            print(f"{mode:9s} {name:16s} {run_name:22s} {_describe(result)}", flush=True)
        table[name] = {
            "lengths": lengths,
            "real_token_share": sum(lengths) / (len(lengths) * max(lengths)),
            "runs": by_run,
        }
        del steps
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if "hf_roformer" in models:
        models["hf_roformer"].config.padding_free = "auto"
    return table


def run_step(model, kind: str, padding_free: str, batch: dict, training: bool, dtype: torch.dtype):
    """The step of one run (its optimizer made once, for training), setting hf_roformer's padding-free mode first,
    since one hf_roformer model serves two runs."""
    step = training_step(model, batch, dtype) if training else inference_step(model, batch)

    def run():
        if kind == "hf_roformer":
            model.config.padding_free = padding_free
        step()

    return run


def _describe(result: dict) -> str:
    if "error" in result:
        return result["error"]
    mfu = f"  MFU {result['mfu']:.0%}" if result.get("mfu") is not None else ""
    memory = f"  {result['peak_extra_mb']:,.0f} MB" if result.get("peak_extra_mb") is not None else ""
    return f"{result['real_tokens_per_s']:>12,.0f} tok/s{mfu}{memory}"


def to_markdown(payload: dict) -> str:
    """One table per mode: tokens/s, MFU and memory of every run, and hf_roformer's ratio to each peer."""
    machine, peak = payload["machine"], payload["bf16_matmul_tflops"]
    compiled = f', `torch.compile(mode="{payload["compile"]}")`' if payload["compile"] else ""
    lines = [
        f"# Peer table{compiled}: {machine.get('gpu', machine['cpu'])}\n",
        f"torch {machine['torch']} (CUDA {machine.get('cuda')}), transformers {machine['transformers']}, "
        f"{payload['dtype']}, {machine['date']}. Size {payload['size']}, vocabulary {VOCAB_SIZE}; ModernBERT at "
        f"{payload['size']['num_hidden_layers']} layers, all global. "
        f"Median of {payload['repeats']} interleaved rounds. Tokens/s counts real tokens. "
        + (
            f"MFU over the bf16 matrix-multiply rate measured in the same run (8192³: {peak:.0f} TFLOP/s). "
            if peak
            else ""
        )
        + "Memory: the peak of one step above what was allocated before it.\n",
    ]
    for mode, table in payload["results"].items():
        runs = list(next(iter(table.values()))["runs"])
        for name in table.values():
            runs += [run for run in name["runs"] if run not in runs]
        peers = [run for run in runs if run != "hf_roformer" and run != PADDING_FREE]
        rows = []
        for name, entry in table.items():
            by_run = entry["runs"]
            best_ours = max(
                (by_run[run] for run in ("hf_roformer", PADDING_FREE) if "real_tokens_per_s" in by_run.get(run, {})),
                key=lambda result: result["real_tokens_per_s"],
                default=None,
            )
            cells = [name, f"{entry['real_token_share']:.0%}"]
            for run in runs:
                result = by_run.get(run)
                cells.append(_cell(result))
            for peer in peers:
                theirs = by_run.get(peer, {})
                ok = best_ours and "real_tokens_per_s" in theirs
                cells.append(f"{best_ours['real_tokens_per_s'] / theirs['real_tokens_per_s']:.2f}x" if ok else "")
            rows.append(cells)
        headers = ["batch", "real tokens"] + [f"{run}: tok/s, MFU, MB" for run in runs]
        headers += [f"hf_roformer vs {peer}" for peer in peers]
        lines.append(f"\n## {mode.capitalize()}\n\n" + benchlib.markdown_table(headers, rows))
    lines.append(
        "\nhf_roformer's ratios take its faster run on each batch (its default, or its padding-free path where that "
        "is measured). Variable-length batches: lengths drawn from a normal distribution and clipped (`VARIABLE` in "
        "the script), padded to the longest row.\n"
    )
    return "\n".join(lines)


def _cell(result: dict | None) -> str:
    if not result:
        return ""
    if "error" in result:
        return result["error"]
    parts = [f"{result['real_tokens_per_s']:,.0f}"]
    if result.get("mfu") is not None:
        parts.append(f"{result['mfu']:.0%}")
    if result.get("peak_extra_mb") is not None:
        parts.append(f"{result['peak_extra_mb']:,.0f}")
    return ", ".join(parts)


def batch_shape(text: str) -> tuple[int, int]:
    """An argument such as "32x1024": (rows, length)."""
    rows, _, length = text.partition("x")
    if not (rows.isdigit() and length.isdigit() and int(rows) > 0 and int(length) > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not ROWSxLENGTH with two positive integers, as 32x1024")
    return int(rows), int(length)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--smoke", action="store_true", help="tiny model and batches: checks the script runs")
    parser.add_argument("--repeats", type=int, default=10, help="timed rounds per batch")
    parser.add_argument("--modes", nargs="+", choices=["inference", "training"], default=["inference", "training"])
    parser.add_argument("--batches", nargs="+", help='only these batches, by name ("8 x 512", "around 256")')
    parser.add_argument(
        "--shapes", nargs="+", type=batch_shape, metavar="BxL", help="fixed shapes besides the usual ones, as 32x1024"
    )
    parser.add_argument("--compile", choices=["default", "reduce-overhead"], help="compile every model that compiles")
    parser.add_argument("--output", help="results file name without extension (default: peers_<gpu>[_compiled_<mode>])")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    size = SMOKE if args.smoke else BASE
    peak = benchlib.matmul_tflops(device)
    results = {mode: run_mode(mode, args, device, dtype, size, peak) for mode in args.modes}
    machine = benchlib.machine_info(device)
    payload = {
        "machine": machine,
        "size": size,
        "repeats": args.repeats,
        "compile": args.compile,
        "dtype": str(dtype).removeprefix("torch."),
        "bf16_matmul_tflops": peak,
        "results": results,
    }
    slug = "".join(c if c.isalnum() else "_" for c in machine.get("gpu", "cpu").lower()).strip("_")
    name = args.output or f"peers_{slug}" + (f"_compiled_{args.compile.replace('-', '_')}" if args.compile else "")
    if args.smoke:  # a check that the script runs, not a measurement to keep
        print(to_markdown(payload))
        return
    for path in benchlib.write_results(name, payload, to_markdown(payload)):
        print(path)


if __name__ == "__main__":
    main()
