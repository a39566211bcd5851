"""Experiment 3 (the paper's figure 2, right): does RoPE help linear attention?

Linear attention with elu(x) + 1 features in both arms: RoFormer's eq. 19 (rotations in the numerator) against the
same linear attention on BERT with learned absolute positions and no rotation. Same tokenizer, data, sizes, learning
rate and seed as experiment 1; 600 steps instead of 1,500 (the CPU time available when it was run).

    python benchmarks/experiments/linear_attention.py [--work-dir DIR]   # ~15 min on 2 CPU cores
"""

import argparse
from pathlib import Path

from common import run


STAGES = "128:32:600"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, default=Path("experiments-work"))
    args = parser.parse_args()
    run("linear_roformer", args.work_dir / "linear-rope", STAGES, "--attention_type", "linear")
    run("linear_absolute", args.work_dir / "linear-absolute", STAGES, "--architecture", "bert-linear")


if __name__ == "__main__":
    main()
