"""The cost of `import hf_roformer` against its peer, `import torch, transformers`, each in a fresh interpreter.

    python benchmarks/bench_import.py [--rounds 15] [--source DIR] [--output import_cpu]

Every round runs each statement once in a new interpreter, in alternating order, and times the whole process
(interpreter start included, the same for every statement; `python -S`, the packages on PYTHONPATH); the table gives
the best and the median of the rounds and the ratios to the peer in the same run. `--source DIR` imports hf_roformer
from another checkout (its folder first on PYTHONPATH), to measure an earlier commit in the same environment. Besides
the package import itself (which imports neither torch nor transformers), the rows time it with the two libraries
every user imports next, and what a user or a command does then: the first Auto class lookup (which imports and
registers the models) and the fine-tuning command's imports.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import _cpu_name, markdown_table, write_results  # noqa: E402


PEER = "import torch, transformers"
STATEMENTS = {
    "import torch": "import torch",
    "import torch, transformers (peer)": PEER,
    "import hf_roformer": "import hf_roformer",
    "import hf_roformer, torch, transformers": "import hf_roformer, torch, transformers",
    "import hf_roformer; from transformers import AutoModel": "import hf_roformer; from transformers import AutoModel",
    "from transformers import AutoModel (transformers alone)": "import torch; from transformers import AutoModel",
    "import hf_roformer.training.run.finetune": "import hf_roformer.training.run.finetune",
}


def seconds_of(statement: str, environment: dict, checkout: Path) -> float:
    """Wall time of a fresh interpreter running `statement` (quiet: import-time messages are not timed output)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-S", "-c", statement], env=environment, cwd=checkout, check=True, capture_output=True
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--source", type=Path, help="a checkout whose hf_roformer is imported instead")
    parser.add_argument("--output", default=None, help="results/<OUTPUT>.{md,json} (default: print only)")
    args = parser.parse_args()

    # Every interpreter runs in the checkout measured (this one or --source) without `site` (-S), that checkout first
    # on PYTHONPATH, then the environment's packages: an editable install's import hook would find this one first.
    checkout = (args.source or Path(__file__).resolve().parents[1]).resolve()
    paths = [str(checkout), sysconfig.get_paths()["purelib"], os.environ.get("PYTHONPATH")]
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    located = subprocess.run(
        [sys.executable, "-S", "-c", "import hf_roformer, torch, transformers; print(hf_roformer.__file__); "
         "print(torch.__version__, transformers.__version__)"],
        env=environment, cwd=checkout, check=True, capture_output=True, text=True,
    ).stdout.split("\n")  # fmt: skip
    load_before = os.getloadavg()
    times = {name: [] for name in STATEMENTS}
    for round_index in range(args.rounds):
        order = list(STATEMENTS.items())
        if round_index % 2:
            order.reverse()
        for name, statement in order:
            times[name].append(seconds_of(statement, environment, checkout))
    load_after = os.getloadavg()

    peer = times["import torch, transformers (peer)"]
    rows = []
    for name, measured in times.items():
        rows.append([
            f"`{name}`", f"{min(measured):.2f}", f"{statistics.median(measured):.2f}",
            f"{min(measured) / min(peer):.2f}x", f"{statistics.median(measured) / statistics.median(peer):.2f}x",
        ])  # fmt: skip
    torch_version, transformers_version = located[1].split()
    assert Path(located[0]).resolve().is_relative_to(checkout), f"hf_roformer imported from {located[0]}"
    info = {
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch_version,
        "transformers": transformers_version,
        "hf_roformer": "the --source checkout" if args.source is not None else "this checkout",
        "rounds": args.rounds,
        "load_average_before": [round(value, 2) for value in load_before],
        "load_average_after": [round(value, 2) for value in load_after],
    }
    table = markdown_table(
        ["statement (fresh interpreter)", "best s", "median s", "best / peer", "median / peer"], rows
    )
    markdown = (
        "# Import cost\n\n"
        f"`python benchmarks/bench_import.py --rounds {args.rounds}`: each statement in a new interpreter, alternating "
        "order, the whole process timed; the peer is `import torch, transformers`.\n\n"
        f"{info['cpu']}, {info['cores']} cores, Python {info['python']}, torch {torch_version}, transformers "
        f"{transformers_version}; hf_roformer from {info['hf_roformer']}; load average {info['load_average_before']} "
        f"before, {info['load_average_after']} after.\n\n{table}\n"
    )
    print(markdown)
    if args.output:
        payload = {"machine": info, "seconds": times}
        for path in write_results(args.output, payload, markdown):
            print("wrote", path)


if __name__ == "__main__":
    main()
