"""CPU at its limit: the machine's matrix-multiply peak per precision, and hf_roformer, BERT-SDPA, ONNX Runtime and
OpenVINO at base size measured against it, in one run.

    python benchmarks/bench_cpu_limit.py            # base size (768 hidden, 12 layers, 12 heads, 3,072 feed-forward)
    python benchmarks/bench_cpu_limit.py --quick    # a tiny model and short inputs: checks that every row runs

Rows (random weights, dropout 0, no downloads):
- GEMM peak: `torch.mm` at 2048^3 and at the encoder's feed-forward shape (4,096 x 768 x 3,072) in fp32 and bf16;
  int8 (`torch._int_mm`, and PyTorch's dynamically quantized linear) where the CPU has VNNI or AMX-INT8.
- Inference at 32 x 128, 8 x 512 and 4 x 2,048: hf_roformer and transformers' `BertModel` (`attn_implementation=
  "sdpa"`) in fp32 and bf16 (`model.to(torch.bfloat16)`), hf_roformer in int8 (`torch.ao.quantization.
  quantize_dynamic`), and hf_roformer exported with `hf_roformer.export_onnx` and run by ONNX Runtime in fp32 and
  after its dynamic int8 quantization (up to 512 tokens: the exported graph computes attention as plain matrix
  products with the L x L scores in memory, over a minute per call and gigabytes at 4 x 2,048 on a 2-core machine);
  hf_roformer in bf16 with query, key and value joined into one product (`fuse_qkv_projections()`) too;
  both PyTorch models in bf16 under `torch.compile` too: at 8 x 512 as compiled by default, and at 8 x 512 and
  4 x 2,048 with frozen weights (Inductor's `freezing`, the CPU inference setting); where the CPU has AMX-INT8,
  hf_roformer quantized by torchao (int8 weights and activations) and compiled with frozen weights, at 8 x 512.
- OpenVINO (both models, converted by `openvino.convert_model` from each shape's batch, compiled for the CPU): fp32
  and, where the CPU has AMX-BF16 or AVX512-BF16, bf16 up to 512 tokens (with the other rows, converting at 4 x 2,048
  ran out of a 24 GB machine's memory); int8 through NNCF (OpenVINO's own quantizer, int8 weights and activations)
  at the focus shape: NNCF's transformer preset as it is, and with attention's inputs left unquantized (every linear
  layer int8, attention in the compiled model's bf16 or fp32). A table gives each model's fastest route per precision
  and shape.
- Training at 8 x 512: forward, backward and an AdamW step under bf16 autocast (fp32 weights).

Every row reports tokens/s, model FLOP/s (per token 2 x the encoder's weights plus 4 x length x hidden per layer;
training 3 x that) and its share of the same precision's 2048^3 GEMM peak, and the peak resident memory during the
call. The rounds are interleaved (each round runs every row once, the GEMM peak rows included) and each row keeps its
best round, so a neighbour's load hits all rows alike; the load average is recorded. A profile of one forward per
model says where a layer's time goes: in bf16 at 8 x 512 and 4 x 2,048 (the targets' shapes) and in fp32 at 32 x 128
(where hf_roformer trails BERT-SDPA most).
-> results/cpu_limit.{json,md} (`--quick`: results/cpu_limit_quick.*; `--output NAME`: results/NAME.*)
"""

import argparse
import gc
import os
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402


BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
QUICK = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)
VOCAB = 21128  # the Chinese RoFormer checkpoints' vocabulary
FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile")
# aten operators (profiler, self time) by the part of a layer they do: a name containing one of the words.
PROFILE_PARTS = {
    "attention kernel": ("scaled_dot_product", "flash_attention", "efficient_attention"),
    "matrix multiply": ("addmm", "mm", "bmm", "linear", "matmul", "quantized", "int_mm"),
    "norm": ("layer_norm",),
    "activation": ("gelu", "silu", "relu"),
    "rotation (complex product)": ("view_as_complex", "view_as_real", "complex", "mul"),
    "copies and casts": ("copy", "_to_copy", "contiguous", "clone", "cat"),
    "residual additions": ("add",),
}


def cpu_flags() -> list[str]:
    """The matrix-relevant instruction-set flags of this CPU (from /proc/cpuinfo)."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            present = set(line.split(":", 1)[1].split())
            return [flag for flag in FLAGS if flag in present]
    return []


def gemm_calls(quick: bool, flags: list[str]) -> dict[str, tuple[str, float, Callable[[], object]]]:
    """Name -> (precision, FLOPs, call) of the peak rows: `torch.mm` of square 2048 matrices and of the encoder's
    feed-forward shape, per precision; int8 (`torch._int_mm`, and a dynamically quantized `nn.Linear`) where the CPU
    has int8 dot-product instructions."""
    shapes = [(512, 512, 512), (512, 128, 512)] if quick else [(2048, 2048, 2048), (4096, 768, 3072)]
    calls = {}
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for m, k, n in shapes:
            a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
            calls[f"GEMM {precision} {m}x{k}x{n}"] = (precision, 2 * m * k * n, lambda a=a, b=b: torch.mm(a, b))
    if any(flag in flags for flag in ("avx512_vnni", "avx_vnni", "amx_int8")):
        for m, k, n in shapes:
            a = torch.randint(-128, 127, (m, k), dtype=torch.int8)
            b = torch.randint(-128, 127, (k, n), dtype=torch.int8)
            calls[f"GEMM int8 {m}x{k}x{n}"] = ("int8", 2 * m * k * n, lambda a=a, b=b: torch._int_mm(a, b))
        m, k, n = shapes[1]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            linear = torch.ao.quantization.quantize_dynamic(
                torch.nn.Sequential(torch.nn.Linear(k, n)), {torch.nn.Linear}, dtype=torch.qint8
            )
        x = torch.randn(m, k)
        calls[f"int8 dynamic linear {m}x{k}x{n}"] = ("int8", 2 * m * k * n, lambda: linear(x))
    return calls


def build(kind: str, size: dict, max_length: int) -> torch.nn.Module:
    """A seeded random model of `kind` ("hf_roformer" or "bert_sdpa"), fp32, evaluation mode, dropout 0."""
    common = dict(vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **size)
    torch.manual_seed(0)
    if kind == "bert_sdpa":
        config = transformers.BertConfig(**common, max_position_embeddings=max_length, attn_implementation="sdpa")
        return transformers.BertModel(config, add_pooling_layer=False).eval()
    config = hf_roformer.HfRoFormerConfig(**common, attn_implementation="sdpa")
    return hf_roformer.HfRoFormerModel(config).eval()


def encoder_weights(size: dict) -> int:
    """Weights of the encoder's matrices (query, key, value, output, the two feed-forward projections)."""
    hidden, intermediate = size["hidden_size"], size["intermediate_size"]
    return size["num_hidden_layers"] * (4 * hidden * hidden + 2 * hidden * intermediate)


def flops_per_token(size: dict, length: int) -> float:
    """Model FLOPs of one token's forward: 2 x the encoder's weights plus 4 x length x hidden per layer."""
    return 2 * encoder_weights(size) + 4 * length * size["hidden_size"] * size["num_hidden_layers"]


def inputs(batch: int, length: int) -> dict:
    generator = torch.Generator().manual_seed(batch * 100_000 + length)
    input_ids = torch.randint(1, VOCAB, (batch, length), generator=generator)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
    }


def frozen_call(model: torch.nn.Module, batch: dict) -> Callable[[], object]:
    """`model` compiled by Inductor with frozen weights (`torch._inductor.config.freezing`: the weights become
    constants, prepacked for oneDNN's matrix products), fixed to `batch`'s shape; called without gradients."""
    compiled = torch.compile(model, dynamic=False)

    def call():
        with torch.no_grad(), torch._inductor.config.patch(freezing=True):
            return compiled(**batch)

    return call


def torchao_int8(model: torch.nn.Module) -> torch.nn.Module:
    """`model` with every linear layer quantized by torchao (int8 weights, activations quantized per call): the int8
    route transformers' `TorchAoConfig` takes, here to be compiled with frozen weights."""
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    return model


def onnx_sessions(model: torch.nn.Module, directory: Path, threads: int) -> dict:
    """ONNX Runtime sessions of `model` exported by `hf_roformer.export_onnx` (fp32) and of its dynamic int8
    quantization (onnxruntime.quantization.quantize_dynamic, int8 weights)."""
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    fp32_path, int8_path = directory / "model.onnx", directory / "model_int8.onnx"
    example = inputs(1, 8)
    hf_roformer.export_onnx(model, example, fp32_path, check_shapes=((1, 5), (2, 16)))
    quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # ONNX Runtime's threads otherwise spin, busy, for a while after each run: the rows after it would share the cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return {
        name: onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        for name, path in (("fp32", fp32_path), ("int8", int8_path))
    }


def onnx_call(session, batch: dict) -> Callable[[], object]:
    names = {node.name for node in session.get_inputs()}
    feed = {name: tensor.numpy() for name, tensor in batch.items() if name in names}
    return lambda: session.run(None, feed)


def training_step(model: torch.nn.Module, batch: dict, precision: str = "bf16") -> Callable[[], object]:
    """One forward, backward and AdamW step: under bf16 autocast (fp32 master weights), or all in fp32 with
    `precision="fp32"`."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")

    def step():
        with autocast:
            hidden = model(**batch).last_hidden_state
        hidden.float().square().mean().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def profile_forward(model: torch.nn.Module, batch: dict, layers: int) -> list[list]:
    """Self CPU time of one forward by part of the layer (ms per layer) and the five costliest operators."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad():
        model(**batch)
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            model(**batch)
    events = [(event.key.removeprefix("aten::"), event.self_cpu_time_total / 1000) for event in profiler.key_averages()]
    total = sum(ms for _, ms in events)
    parts: dict[str, float] = {}
    for name, ms in events:
        part = next((part for part, words in PROFILE_PARTS.items() if any(word in name for word in words)), None)
        parts[part or "other"] = parts.get(part or "other", 0.0) + ms
    ranked = sorted(parts.items(), key=lambda part: -part[1])
    rows = [[part, f"{ms / layers:.1f}", f"{ms / total:.0%}"] for part, ms in ranked]
    top = sorted(events, key=lambda event: -event[1])[:6]
    return rows, [[name, f"{ms / layers:.2f}"] for name, ms in top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny model and inputs: a smoke run of every row")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each row keeps its best")
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile rows")
    parser.add_argument("--no-onnx", action="store_true", help="leave out the ONNX Runtime rows")
    parser.add_argument("--no-openvino", action="store_true", help="leave out the OpenVINO rows")
    parser.add_argument("--output", help="results file name (default: cpu_limit, or cpu_limit_quick with --quick)")
    parser.add_argument(
        "--shapes",
        help="BATCHxLENGTH,... of the inference rows (default 32x128,8x512,4x2048): fewer rows fit a smaller memory "
        "(with every OpenVINO row, the three shapes ran out of 24 GB on a machine without AMX); the compiled rows, "
        "training and the profile run at the second (or only) one",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    size = QUICK if args.quick else BASE
    shapes = [(4, 16), (2, 64), (1, 256)] if args.quick else [(32, 128), (8, 512), (4, 2048)]
    if args.shapes:
        shapes = [tuple(int(size) for size in shape.split("x")) for shape in args.shapes.split(",")]
    focus = shapes[min(1, len(shapes) - 1)]  # compiled rows, training and the profile
    load_before = os.getloadavg()
    flags = cpu_flags()
    print("flags:", flags, "load:", load_before, flush=True)

    max_length = max(length for _, length in shapes)
    models = {kind: build(kind, size, max_length) for kind in ("hf_roformer", "bert_sdpa")}
    bf16 = {kind: build(kind, size, max_length).to(torch.bfloat16) for kind in models}
    bf16_joined = build("hf_roformer", size, max_length).to(torch.bfloat16)
    bf16_joined.fuse_qkv_projections()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
        int8 = torch.ao.quantization.quantize_dynamic(
            build("hf_roformer", size, max_length), {torch.nn.Linear}, dtype=torch.qint8
        )
    batches = {shape: inputs(*shape) for shape in shapes}
    # NNCF's calibration holds every layer's activations: quantized first, while the other rows hold no memory yet
    # (quantized after them, it ran a 24 GB machine out of memory). It takes minutes at base size: the focus shape only.
    openvino_int8 = {}
    if not args.no_openvino:
        from bench_openvino import openvino_int8_call

        for kind in models:
            for label, attention_in_int8 in (("", True), (" attention unquantized", False)):
                openvino_int8[f"{kind} openvino int8 nncf{label}"] = openvino_int8_call(
                    models[kind], batches[focus], args.threads, attention_in_int8
                )

    rows: dict[str, dict] = {}  # name -> {"call", "tokens", "flops", "precision", ...}
    gemms = gemm_calls(args.quick, flags)
    for name, (precision, flops, call) in gemms.items():
        rows[name] = {"precision": precision, "shape": name.split()[-1], "call": call, "tokens": None,
                      "flops": flops, "training": False, "times": []}  # fmt: skip

    def add(name, precision, shape, call, training=False):
        tokens = shape[0] * shape[1]
        flops = tokens * flops_per_token(size, shape[1]) * (3 if training else 1)
        rows[name] = {"precision": precision, "shape": f"{shape[0]}x{shape[1]}", "call": call, "tokens": tokens,
                      "flops": flops, "training": training, "times": []}  # fmt: skip

    def no_grad(model, batch):
        def call():
            with torch.no_grad():
                return model(**batch)

        return call

    for shape in shapes:
        batch = batches[shape]
        for kind in models:
            add(f"{kind} fp32 {shape[0]}x{shape[1]}", "fp32", shape, no_grad(models[kind], batch))
            add(f"{kind} bf16 {shape[0]}x{shape[1]}", "bf16", shape, no_grad(bf16[kind], batch))
        add(f"hf_roformer bf16 fuse_qkv {shape[0]}x{shape[1]}", "bf16", shape, no_grad(bf16_joined, batch))
        add(f"hf_roformer int8 dynamic {shape[0]}x{shape[1]}", "int8", shape, no_grad(int8, batch))
    if not args.no_onnx:
        scratch = benchlib.scratch_directory("cpu_limit_onnx.")  # the exported models: about 0.5 GB
        sessions = onnx_sessions(models["hf_roformer"], scratch, args.threads)
        for shape in [shape for shape in shapes if shape[1] <= 512]:  # see the module's docstring
            add(f"onnxruntime fp32 {shape[0]}x{shape[1]}", "fp32", shape, onnx_call(sessions["fp32"], batches[shape]))
            add(f"onnxruntime int8 {shape[0]}x{shape[1]}", "int8", shape, onnx_call(sessions["int8"], batches[shape]))
    if not args.no_openvino:
        import openvino
        from bench_openvino import openvino_call

        ov_precisions = [("fp32", "f32")] + [("bf16", "bf16")] * ("amx_bf16" in flags or "avx512_bf16" in flags)
        for shape in [shape for shape in shapes if shape[1] <= 512]:  # converting at 4 x 2,048 ran out of 24 GB
            for kind in models:
                for label, hint in ov_precisions:
                    call = openvino_call(openvino, models[kind], batches[shape], hint, args.threads)
                    add(f"{kind} openvino {label} {shape[0]}x{shape[1]}", label, shape, call)
        for name, call in openvino_int8.items():
            add(f"{name} {focus[0]}x{focus[1]}", "int8", focus, call)
    if not args.no_compile:
        for kind in models:
            for precision, model in (("bf16", bf16[kind]),):  # the precision of the targets (a compile takes minutes)
                compiled = torch.compile(model)
                name = f"{kind} {precision} compiled {focus[0]}x{focus[1]}"
                add(name, precision, focus, no_grad(compiled, batches[focus]))
        for shape in shapes[1:]:  # the targets' shapes
            for kind in models:
                name = f"{kind} bf16 compiled frozen {shape[0]}x{shape[1]}"
                add(name, "bf16", shape, frozen_call(bf16[kind], batches[shape]))
        if "amx_int8" in flags or args.quick:
            name = f"hf_roformer int8 torchao compiled frozen {focus[0]}x{focus[1]}"
            add(name, "int8", focus, frozen_call(torchao_int8(build("hf_roformer", size, max_length)), batches[focus]))
    for kind in models:
        trained = build(kind, size, max_length).train()
        add(f"{kind} bf16-autocast training {focus[0]}x{focus[1]}", "bf16", focus,
            training_step(trained, batches[focus]), training=True)  # fmt: skip

    # Warm-up (compilation, ONNX Runtime's first run, allocator) with the peak memory of each row's call; the GEMM rows
    # run in every round too, so the peak and the models see the same neighbours.
    for name, row in rows.items():
        start = time.perf_counter()
        baseline = benchlib.reset_peak_memory(torch.device("cpu"))
        row["call"]()
        row["peak_memory_mb"] = (benchlib.peak_memory(torch.device("cpu")) - baseline) / 2**20
        print(f"warm-up {name}: {time.perf_counter() - start:.1f} s", flush=True)
        gc.collect()
    for round_index in range(args.rounds):
        for row in rows.values():
            start = time.perf_counter()
            row["call"]()
            row["times"].append(time.perf_counter() - start)
        print(f"round {round_index + 1} done, load {os.getloadavg()}", flush=True)

    profiles = {}  # (precision, shape) -> kind -> (parts, top)
    profiled = {("bf16", focus), ("bf16", shapes[-1]), ("fp32", shapes[0])}
    for precision, shape in sorted(profiled, key=lambda chosen: (chosen[0], shapes.index(chosen[1]))):
        chosen = bf16 if precision == "bf16" else models
        profiles[f"{precision} {shape[0]}x{shape[1]}"] = {
            kind: profile_forward(chosen[kind], batches[shape], size["num_hidden_layers"]) for kind in models
        }
    load_after = os.getloadavg()

    peaks = {}
    for name in gemms:
        row = rows.pop(name)
        peaks[name] = row["flops"] / min(row["times"]) / 1e9
    square = next(iter(gemms)).split()[-1]
    peak_by_precision = {precision: peaks[f"GEMM {precision} {square}"] for precision in ("fp32", "bf16", "int8")
                         if f"GEMM {precision} {square}" in peaks}  # fmt: skip
    results = {}
    for name, row in rows.items():
        seconds = min(row["times"])
        flops_per_s = row["flops"] / seconds
        peak = peak_by_precision.get(row["precision"])
        results[name] = {
            "precision": row["precision"], "shape": row["shape"], "training": row["training"],
            "best_s": seconds, "all_s": row["times"], "tokens_per_s": row["tokens"] / seconds,
            "model_gflop_per_s": flops_per_s / 1e9, "share_of_peak": None if peak is None else flops_per_s / 1e9 / peak,
            "peak_memory_mb": row["peak_memory_mb"],
        }  # fmt: skip
    machine = benchlib.machine_info(torch.device("cpu"))
    import onnxruntime

    if not args.no_openvino:
        import nncf
        import openvino

        machine.update(openvino=openvino.__version__, nncf=nncf.__version__)
    machine.update(cpu_flags=flags, onnxruntime=onnxruntime.__version__, load_average_before=load_before,
                   load_average_after=load_after, threads=args.threads, rounds=args.rounds)  # fmt: skip
    profile = {
        case: {kind: {"parts": parts, "top": top} for kind, (parts, top) in by_kind.items()}
        for case, by_kind in profiles.items()
    }
    payload = {"machine": machine, "size": size, "gemm_gflop_per_s": peaks, "square": square, "results": results,
               "profile": profile}  # fmt: skip
    markdown = render(payload, square)
    name = args.output or ("cpu_limit_quick" if args.quick else "cpu_limit")
    for path in benchlib.write_results(name, payload, markdown):
        print(path)
    print(markdown)


def render(payload: dict, square: str) -> str:
    machine, size, results = payload["machine"], payload["size"], payload["results"]
    lines = [
        "# CPU at its limit: hf_roformer, BERT-SDPA, ONNX Runtime and OpenVINO against the machine's GEMM peak\n",
        f"Machine: {machine['cpu']} ({machine['threads']} threads; flags {', '.join(machine['cpu_flags'])}), torch "
        f"{machine['torch']}, transformers {machine['transformers']}, onnxruntime {machine['onnxruntime']}, "
        f"openvino {machine.get('openvino', '-')}, nncf {machine.get('nncf', '-')}, "
        f"{machine['date']}. Load average before / after: {machine['load_average_before'][0]:.2f} / "
        f"{machine['load_average_after'][0]:.2f} (1 min). Size: hidden {size['hidden_size']}, "
        f"{size['num_hidden_layers']} layers, {size['num_attention_heads']} heads, feed-forward "
        f"{size['intermediate_size']}; random weights; best of {machine['rounds']} interleaved rounds.\n",
        "## GEMM peak (GFLOP/s)\n",
        benchlib.markdown_table(
            ["operation", "GFLOP/s"], [[name, f"{value:,.0f}"] for name, value in payload["gemm_gflop_per_s"].items()]
        ),
        f"Share of peak below: of the same precision's {square} `torch.mm` (int8: `torch._int_mm`).\n",
        "## Throughput\n",
    ]
    table = []
    for name, row in results.items():
        share = "" if row["share_of_peak"] is None else f"{row['share_of_peak']:.0%}"
        table.append([name, f"{row['tokens_per_s']:,.0f}", f"{row['model_gflop_per_s']:,.0f}", share,
                      f"{row['peak_memory_mb']:,.0f}"])  # fmt: skip
    lines.append(benchlib.markdown_table(["row", "tokens/s", "model GFLOP/s", "share of peak", "peak MB"], table))
    lines.append("\n## Ratios (same run)\n")
    ratio_rows = []
    for name, row in results.items():
        if not name.startswith("hf_roformer") or "int8" in name:
            continue
        same_route = results.get(name.replace("hf_roformer", "bert_sdpa", 1).replace(" fuse_qkv", ""))
        if not same_route:
            continue
        setting = (row["precision"], row["shape"], row["training"])
        fastest = max(
            peer["tokens_per_s"]
            for peer_name, peer in results.items()
            if peer_name.startswith("bert_sdpa") and (peer["precision"], peer["shape"], peer["training"]) == setting
        )
        same_ratio, fastest_ratio = row["tokens_per_s"] / same_route["tokens_per_s"], row["tokens_per_s"] / fastest
        ratio_rows.append([name.removeprefix("hf_roformer "), f"{same_ratio:.2f}x", f"{fastest_ratio:.2f}x"])
    lines.append(benchlib.markdown_table(
        ["row", "hf_roformer / BERT-SDPA, same route", "/ BERT-SDPA's fastest route, same precision and shape"],
        ratio_rows,
    ))  # fmt: skip
    lines.append("\n## Fastest route of each model (same run)\n")
    fastest_rows = []
    settings = sorted({(row["precision"], row["shape"]) for row in results.values() if not row["training"]})
    for precision, shape in settings:
        best = {}
        for kind in ("hf_roformer", "bert_sdpa"):
            candidates = [(peer["tokens_per_s"], peer_name) for peer_name, peer in results.items()
                          if peer_name.startswith(kind) and not peer["training"]
                          and (peer["precision"], peer["shape"]) == (precision, shape)]  # fmt: skip
            best[kind] = max(candidates) if candidates else None
        if best["hf_roformer"] and best["bert_sdpa"]:
            (ours, our_route), (theirs, their_route) = best["hf_roformer"], best["bert_sdpa"]
            fastest_rows.append([f"{precision} {shape}", our_route.removeprefix("hf_roformer "),
                                 their_route.removeprefix("bert_sdpa "), f"{ours / theirs:.2f}x"])  # fmt: skip
    lines.append(benchlib.markdown_table(
        ["precision, shape", "hf_roformer's fastest", "BERT-SDPA's fastest", "ratio"], fastest_rows
    ))  # fmt: skip
    for case, by_kind in payload["profile"].items():
        for kind, profile in by_kind.items():
            title = f"Where a layer's time goes: {kind}, {case}, one forward (profiler self time, ms per layer)"
            lines.append(f"\n## {title}\n")
            lines.append(benchlib.markdown_table(["part", "ms / layer", "share"], profile["parts"]))
            lines.append("\nCostliest operators (ms per layer):\n\n")
            lines.append(benchlib.markdown_table(["operator", "ms / layer"], profile["top"]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
