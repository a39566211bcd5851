"""Where OpenVINO spends a forward of hf_roformer and of BERT-SDPA: OpenVINO's own per-node counters (`PERF_COUNT`),
summed by node type, for both models converted and compiled as `bench_openvino.py` and `bench_cpu_limit.py` do.

    python benchmarks/profile_openvino.py                       # bf16 hint, 32 x 128, base size
    python benchmarks/profile_openvino.py --shape 8x512 --precision f32
    python benchmarks/profile_openvino.py --int8                # NNCF int8, attention's inputs unquantized
    python benchmarks/profile_openvino.py --quick               # a tiny model: checks that it runs

Each model runs `--calls` forwards after one warm-up; the table gives each node type's real time in ms per forward
(the mean of the calls), both models side by side, the node types where they differ most first. Random weights,
dropout 0, 2 threads. Needs openvino (`--int8`: and nncf).
-> results/openvino_profile_PRECISION_BATCHxLENGTH.{json,md} (`--int8`: openvino_profile_int8_...)
"""

import argparse
import collections
import sys
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from bench_cpu_limit import cpu_flags, inputs  # noqa: E402
from bench_openvino import BASE, QUICK, models, nncf_int8  # noqa: E402


def node_times(compiled, arrays: dict, calls: int) -> tuple[dict[str, float], float]:
    """ms by node type per forward, the mean of `calls` forwards after a warm-up (OpenVINO's counters are those of
    the request's last inference, so they are read after each), and the best wall time of the calls, in ms."""
    request = compiled.create_infer_request()
    request.infer(arrays)
    best = float("inf")
    by_type: dict[str, float] = collections.defaultdict(float)
    for _ in range(calls):
        start = time.perf_counter()
        request.infer(arrays)
        best = min(best, time.perf_counter() - start)
        for node in request.get_profiling_info():
            if node.status.name == "EXECUTED":
                by_type[node.node_type] += node.real_time.total_seconds() * 1e3 / calls
    return dict(by_type), best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a tiny model and short inputs")
    parser.add_argument("--shape", default="32x128", help="BATCHxLENGTH (default: 32x128)")
    parser.add_argument("--precision", default="bf16", choices=["bf16", "f32"], help="OpenVINO's inference hint")
    parser.add_argument("--int8", action="store_true", help="NNCF int8, attention's inputs left unquantized")
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import openvino

    torch.set_num_threads(args.threads)
    batch, length = (2, 16) if args.quick else map(int, args.shape.split("x"))
    example = inputs(batch, length)
    arrays = {name: tensor.numpy() for name, tensor in example.items()}
    config = {"INFERENCE_NUM_THREADS": args.threads, "PERF_COUNT": True, "INFERENCE_PRECISION_HINT": args.precision}
    machine = benchlib.machine_info(torch.device("cpu"))
    profiles, walls = {}, {}
    for name, model in models(QUICK if args.quick else BASE).items():
        converted = openvino.convert_model(model, example_input=example)
        if args.int8:
            converted = nncf_int8(converted, [arrays], attention_in_int8=False)
        compiled = openvino.compile_model(converted, "CPU", config)
        profiles[name], walls[name] = node_times(compiled, arrays, args.calls)
        print(f"{name}: best forward {walls[name]:.1f} ms", flush=True)

    ours, peer = profiles["hf_roformer"], profiles["BERT-SDPA"]
    kinds = sorted(set(ours) | set(peer), key=lambda kind: -abs(ours.get(kind, 0.0) - peer.get(kind, 0.0)))
    rows = [[kind, f"{ours.get(kind, 0.0):.2f}", f"{peer.get(kind, 0.0):.2f}"] for kind in kinds]
    rows.append(["total of the nodes", f"{sum(ours.values()):.1f}", f"{sum(peer.values()):.1f}"])
    rows.append(["best forward (wall)", f"{walls['hf_roformer']:.1f}", f"{walls['BERT-SDPA']:.1f}"])
    route = "int8 (NNCF, attention unquantized)" if args.int8 else args.precision
    shape = f"{batch}x{length}"
    lines = [
        f"# OpenVINO's per-node time, {route}, {shape}: hf_roformer against BERT-SDPA",
        "",
        f"Machine: {machine['cpu']} (flags {', '.join(cpu_flags())}), torch {machine['torch']}, "
        f"openvino {openvino.__version__}, {args.threads} threads, "
        f"{'tiny' if args.quick else 'base'} size, random weights; mean of {args.calls} forwards after "
        f"a warm-up. `python benchmarks/profile_openvino.py {' '.join(sys.argv[1:])}`".rstrip(),
        "",
        "| node type | hf_roformer ms | BERT-SDPA ms |",
        "|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
    stem = f"openvino_profile_{'int8' if args.int8 else args.precision}_{shape}" + ("_quick" if args.quick else "")
    benchlib.write_results(
        stem, {"machine": machine, "profiles": profiles, "walls_ms": walls, "args": vars(args)}, "\n".join(lines)
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
