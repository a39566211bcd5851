"""The route many users of Intel CPUs deploy encoders with, OpenVINO, against hf_roformer's own fastest CPU route, in
one run: base size (768 hidden, 12 layers, 12 heads), random weights, 2 threads.

    python benchmarks/bench_openvino.py             # 8 x 512 tokens, best of 5 interleaved rounds
    python benchmarks/bench_openvino.py --shape 32x128
    python benchmarks/bench_openvino.py --quick     # a tiny model and short inputs: checks that every row runs
    python benchmarks/bench_openvino.py --int8 --shape 32x128 --rounds 10   # the int8 rows only (needs nncf)

Rows: transformers' `BertModel` and hf_roformer, each converted by OpenVINO as its users convert a PyTorch model
(`openvino.convert_model(model, example_input=...)`, which traces with TorchScript) and compiled for the CPU in its
default precision (bfloat16 where the CPU has bfloat16 units, float32 elsewhere) and in float32; both in PyTorch,
bfloat16 (`model.to(torch.bfloat16)`, eager: on a CPU with AMX, BERT's PyTorch route has been its fastest in some
runs); and hf_roformer in PyTorch float32. Every row first checks its outputs against the PyTorch model in float32
(the largest difference is in the table). The rounds are interleaved (each round runs every
row once) and each row keeps its best round; the load average is recorded before and after.
With `--int8`, the rows are both models quantized by NNCF (`nncf.quantize`, transformer preset, calibrated on the
timed batch) as the preset quantizes them and with attention's inputs left unquantized (every linear layer int8,
attention in the compiled model's default precision), against BERT's preset route.
Needs `pip install openvino` (`--int8`: and `nncf`; no dependency of the package). -> results/openvino_cpu.{json,md}
(`--shape 32x128`: results/openvino_cpu_32x128.*; `--int8`: results/openvino_int8_cpu_BATCHxLENGTH.*)
"""

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402


BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
QUICK = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=256)
VOCAB = 21128  # the Chinese RoFormer checkpoints' vocabulary


def models(sizes: dict) -> dict[str, torch.nn.Module]:
    """hf_roformer and BERT-SDPA of the same sizes, random weights, dropout 0, in evaluation mode."""
    common = dict(vocab_size=VOCAB, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **sizes)
    torch.manual_seed(0)
    roformer = hf_roformer.HfRoFormerModel(hf_roformer.HfRoFormerConfig(max_position_embeddings=512, **common))
    bert_config = transformers.BertConfig(max_position_embeddings=512, attn_implementation="sdpa", **common)
    bert = transformers.BertModel(bert_config, add_pooling_layer=False)
    return {"hf_roformer": roformer.eval(), "BERT-SDPA": bert.eval()}


def openvino_call(openvino, model: torch.nn.Module, example: dict, precision: str | None, threads: int):
    """The model converted by OpenVINO from `example` and compiled for the CPU on `threads` threads (`precision`: an
    inference precision hint, None: OpenVINO's default), as a function of the inputs."""
    converted = openvino.convert_model(model, example_input=example)
    config = {"INFERENCE_NUM_THREADS": threads, **({"INFERENCE_PRECISION_HINT": precision} if precision else {})}
    compiled = openvino.compile_model(converted, "CPU", config)
    arrays = {name: tensor.numpy() for name, tensor in example.items()}
    return lambda: torch.as_tensor(compiled(arrays)[0])


def nncf_int8(converted, calibration: list[dict], attention_in_int8: bool = True):
    """An OpenVINO model quantized by NNCF (OpenVINO's own quantizer: int8 weights and activations, transformer
    preset), calibrated on `calibration` (input arrays by name, one dict a batch).

    With `attention_in_int8=False` NNCF leaves the attention operation's inputs unquantized (`ignored_scope`), so
    attention runs in the compiled model's floating-point precision while every linear layer stays int8: with RoPE,
    quantizing attention's query and key puts a FakeQuantize (and a layout change to float32) after each rotation."""
    import nncf

    ignored = None if attention_in_int8 else nncf.IgnoredScope(types=["ScaledDotProductAttention"])
    return nncf.quantize(
        converted,
        nncf.Dataset(calibration),
        model_type=nncf.ModelType.TRANSFORMER,
        subset_size=len(calibration),
        ignored_scope=ignored,
    )


def openvino_int8_call(
    model: torch.nn.Module, batch: dict, threads: int, attention_in_int8: bool = True
) -> Callable[[], object]:
    """The model converted by OpenVINO from `batch`, quantized by `nncf_int8` calibrated on the batch itself, and
    compiled for the CPU on `threads` threads, as a function of the inputs (as `openvino_call`)."""
    import openvino

    converted = openvino.convert_model(model, example_input=batch)
    arrays = {name: tensor.numpy() for name, tensor in batch.items()}
    quantized = nncf_int8(converted, [arrays], attention_in_int8)
    compiled = openvino.compile_model(quantized, "CPU", {"INFERENCE_NUM_THREADS": threads})
    return lambda: torch.as_tensor(compiled(arrays)[0])


def torch_call(model: torch.nn.Module, example: dict, dtype: torch.dtype):
    """The PyTorch model in `dtype`, as a function of the inputs."""
    cast = model.to(dtype)

    def call():
        with torch.inference_mode():
            return cast(**example).last_hidden_state.float()

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny model and short inputs")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shape", default="8x512", help="BATCHxLENGTH of the inputs (default: 8x512)")
    parser.add_argument("--output", help="results/NAME.* (default: openvino_cpu, or openvino_cpu_BATCHxLENGTH)")
    parser.add_argument("--int8", action="store_true", help="the NNCF int8 rows of both models only")
    args = parser.parse_args()
    import openvino

    torch.set_num_threads(args.threads)
    batch, length = (2, 32) if args.quick else tuple(int(size) for size in args.shape.lower().split("x"))
    example = {
        "input_ids": torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(0)),
        "attention_mask": torch.ones(batch, length, dtype=torch.long),
    }
    built = models(QUICK if args.quick else BASE)
    with torch.inference_mode():
        references = {name: model(**example).last_hidden_state for name, model in built.items()}
    rows = {}
    if args.int8:
        for name in ("BERT-SDPA", "hf_roformer"):
            for label, attention_in_int8 in (("NNCF int8", True), ("NNCF int8, attention unquantized", False)):
                quantized = openvino_int8_call(built[name], example, args.threads, attention_in_int8)
                rows[f"{name}, OpenVINO, {label}"] = (name, quantized)
        reference_row = "BERT-SDPA, OpenVINO, NNCF int8"
    else:
        for name in ("BERT-SDPA", "hf_roformer"):
            for label, precision in (("default precision", None), ("f32", "f32")):
                converted = openvino_call(openvino, built[name], example, precision, args.threads)
                rows[f"{name}, OpenVINO, {label}"] = (name, converted)
        copies = models(QUICK if args.quick else BASE)  # the same weights, cast to bfloat16
        for name in ("BERT-SDPA", "hf_roformer"):
            rows[f"{name}, PyTorch bf16 (eager)"] = (name, torch_call(copies[name], example, torch.bfloat16))
        f32_call = torch_call(built["hf_roformer"], example, torch.float32)
        rows["hf_roformer, PyTorch f32 (eager)"] = ("hf_roformer", f32_call)
        reference_row = "BERT-SDPA, OpenVINO, default precision"
    differences = {label: float((call() - references[name]).abs().max()) for label, (name, call) in rows.items()}
    load_before = os.getloadavg()
    best = {label: float("inf") for label in rows}
    for _ in range(args.rounds):
        for label, (_, call) in rows.items():
            call()  # warm-up of this round
            start = time.perf_counter()
            call()
            best[label] = min(best[label], time.perf_counter() - start)
    load_after = os.getloadavg()
    tokens = batch * length
    info = benchlib.machine_info(torch.device("cpu"))
    default_precision = str(openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT"))
    info.update(openvino=openvino.__version__, threads=args.threads, load_before=load_before, load_after=load_after,
                inference_precision_default=default_precision)  # fmt: skip
    bert_ov = tokens / best[reference_row]
    table = [
        [label, f"{tokens / seconds:,.0f}", f"{tokens / seconds / bert_ov:.2f}x", f"{differences[label]:.1e}"]
        for label, seconds in best.items()
    ]
    shape = f"{batch} x {length}"
    if args.int8:
        import nncf

        info.update(nncf=nncf.__version__)
    command = " ".join(["python benchmarks/bench_openvino.py", *sys.argv[1:]])
    title = "OpenVINO int8 through NNCF" if args.int8 else "OpenVINO against hf_roformer's PyTorch route"
    markdown = (
        f"# {title} ({shape} tokens, {args.threads} threads)\n\n"
        f"`{command}`: {info['cpu']}, torch {info['torch']}, transformers {info['transformers']}, OpenVINO "
        f"{info['openvino']} (default CPU precision: {info['inference_precision_default']})"
        f"{', NNCF ' + info['nncf'] if args.int8 else ''}, best of {args.rounds} interleaved rounds, load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after; {info['date']}.\n\n"
        + benchlib.markdown_table(
            ["route", "tokens/s", f"vs {reference_row}", "max |difference| vs PyTorch f32"],
            table,
        )
    )
    payload = {"machine": info, "shape": [batch, length], "tokens_per_second": {k: tokens / v for k, v in best.items()},
               "max_difference": differences}  # fmt: skip
    default_name = "openvino_cpu" if (batch, length) == (8, 512) else f"openvino_cpu_{batch}x{length}"
    if args.int8:
        default_name = f"openvino_int8_cpu_{batch}x{length}"
    quick_name = "openvino_int8_cpu_quick" if args.int8 else "openvino_cpu_quick"
    name = quick_name if args.quick else args.output or default_name
    for path in benchlib.write_results(name, payload, markdown):
        print(f"wrote {path}")
    print(markdown)


if __name__ == "__main__":
    main()
