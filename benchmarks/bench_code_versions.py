"""The model code of an earlier checkout against this one, in one process, on the CPU: the same base-size weights
run through both, interleaved rounds, best round each; the outputs compared.

    git worktree add /tmp/before REV                       # the earlier checkout
    PYTHONPATH=/tmp/before python -c "import hf_roformer as h; h.HfRoFormerModel(h.HfRoFormerConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64)
        ).save_pretrained('/tmp/before-code')"             # a folder holding that checkout's model code
    python benchmarks/bench_code_versions.py --before /tmp/before-code --label REV
    python benchmarks/bench_code_versions.py --before /tmp/before-code --label REV --route openvino

The earlier code is loaded from the folder's remote-code copy (transformers' dynamic modules), so both versions run in
this one process on the same weights and inputs: eager PyTorch in bfloat16 and float32 (`--route torch`), or each
version converted by `openvino.convert_model` from the timed batch and compiled for the CPU with OpenVINO's bfloat16
and float32 precision hints (`--route openvino`). Results: benchmarks/results/code_versions_cpu.{json,md}
(`--route openvino`: code_versions_openvino_cpu.*).
"""

import argparse
import sys
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402
from hf_roformer.remote_code.modeling_hf_roformer import HfRoFormerModel  # noqa: E402  (loaded before the copy)


SIZE = dict(
    vocab_size=21128,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
SHAPES = ((32, 128), (8, 512))


def earlier_model(folder: str) -> torch.nn.Module:
    """The base-size model built from the earlier checkout's code in `folder` (its remote-code copy)."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config_class = get_class_from_dynamic_module("configuration_hf_roformer.HfRoFormerConfig", folder)
    model_class = get_class_from_dynamic_module("modeling_hf_roformer.HfRoFormerModel", folder)
    if model_class.__module__.startswith("hf_roformer."):
        raise RuntimeError(f"{folder}: the installed package's code was loaded instead of the folder's")
    return model_class(config_class(**SIZE)).eval()


def version_call(model: torch.nn.Module, ids: torch.Tensor, precision: str, args):
    """`model` run on `ids` in `precision` by the chosen route, as a function returning the float32 last hidden
    state: PyTorch eager (the model cast), or OpenVINO (converted from `ids` in float32, compiled with the precision
    hint)."""
    if args.route == "torch":
        cast = model.to(getattr(torch, precision))

        def call():
            with torch.inference_mode():
                return cast(ids).last_hidden_state.float()

        return call
    import openvino
    from bench_openvino import openvino_call

    hint = {"bfloat16": "bf16", "float32": "f32"}[precision]
    return openvino_call(openvino, model.float(), {"input_ids": ids}, hint, args.threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a folder saved by the earlier checkout (see above)")
    parser.add_argument("--label", default="before", help="the earlier checkout's name in the results")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--route", choices=("torch", "openvino"), default="torch", help="what runs the models")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    current = HfRoFormerModel(hf_roformer.HfRoFormerConfig(**SIZE)).eval()
    earlier = earlier_model(args.before)
    earlier.load_state_dict(current.state_dict())
    rows, results = [], []
    for precision in ("bfloat16", "float32"):
        for batch, length in SHAPES:
            ids = torch.randint(1, SIZE["vocab_size"], (batch, length), generator=torch.Generator().manual_seed(0))
            models = {args.label: earlier, "this checkout": current}
            calls = {name: version_call(model, ids, precision, args) for name, model in models.items()}
            outputs = [call() for call in calls.values()]
            difference = (outputs[0] - outputs[1]).abs().max().item()
            best = dict.fromkeys(calls, float("inf"))
            for _ in range(args.rounds):
                for name, call in calls.items():
                    start = time.perf_counter()
                    call()
                    best[name] = min(best[name], time.perf_counter() - start)
            tokens = batch * length
            speeds = {name: tokens / seconds for name, seconds in best.items()}
            ratio = speeds["this checkout"] / speeds[args.label]
            results.append({"dtype": precision, "shape": f"{batch}x{length}", "tokens_per_s": speeds,
                            "ratio": ratio, "max_difference": difference})  # fmt: skip
            rows.append([precision, f"{batch}x{length}", f"{speeds[args.label]:,.0f}",
                         f"{speeds['this checkout']:,.0f}", f"{ratio:.3f}x", f"{difference:.1e}"])  # fmt: skip
            print(rows[-1], flush=True)
    info = benchlib.machine_info(torch.device("cpu"))
    if args.route == "openvino":
        import openvino

        info["openvino"] = openvino.__version__
    payload = {"machine": info, "before": args.label, "route": args.route, "rounds": args.rounds, "size": SIZE,
               "results": results}  # fmt: skip
    route = "PyTorch, eager" if args.route == "torch" else "OpenVINO (`openvino.convert_model`, precision hints)"
    markdown = (
        f"# Model code: {args.label} against this checkout (CPU, {route})\n\n{info}\n\nBase size, random weights (the "
        f"same in both), {args.threads} threads, best of {args.rounds} interleaved rounds; tokens/s.\n\n"
        + benchlib.markdown_table(
            ["dtype", "shape", args.label, "this checkout", "this / before", "largest output difference"], rows
        )
    )
    name = "code_versions_cpu" if args.route == "torch" else "code_versions_openvino_cpu"
    for path in benchlib.write_results(name, payload, markdown):
        print(path)


if __name__ == "__main__":
    main()
