"""Experiment 1 (the paper's figure 2, left): does RoFormer converge faster than BERT's learned absolute positions?

Both arms: the same char-level tokenizer, People's Daily 1998 split, whole-word masking, model size (4 layers,
hidden 128), schedule (1,500 steps of 32 x 128 tokens), learning rate and seed; the only difference is RoPE vs a
learned position table (transformers' `BertForMaskedLM`).

    python benchmarks/experiments/convergence.py [--work-dir DIR]   # ~35 min on 2 CPU cores
"""

import argparse
from pathlib import Path

from common import run


STAGES = "128:32:1500"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, default=Path("experiments-work"))
    args = parser.parse_args()
    run("convergence_roformer", args.work_dir / "roformer", STAGES)
    run("convergence_bert", args.work_dir / "bert", STAGES, "--architecture", "bert")


if __name__ == "__main__":
    main()
