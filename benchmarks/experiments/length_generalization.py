"""Experiment 2 (the paper's multi-stage pre-training, table 4): how far does a model pre-trained at 128 tokens read?

The RoFormer of experiment 1 (pre-trained at 128 tokens) is evaluated, without any training, at 128 to 2,048 tokens
with each rope setting, scaled for the evaluated length L (factor s = L / 128 for linear, ntk and yarn; dynamic NTK
adapts by itself), then after a short continued pre-training at 512 tokens (the multi-stage idea; 150 steps of
8 x 512). BERT's learned table ends at 128 positions, so it has no entry past 128. Scores: masked-token accuracy and
loss on the held-out documents packed at length L, masked with a fixed seed.

    python benchmarks/experiments/length_generalization.py [--work-dir DIR]   # after convergence.py; ~10 min
"""

import argparse
import json
from pathlib import Path

import torch
from common import RESULTS, SEED, run
from transformers import AutoModelForMaskedLM, AutoTokenizer

from hf_roformer.training.tasks.pretraining.corpus import peoples_daily_documents, split_documents
from hf_roformer.training.tasks.pretraining.task import evaluate_mlm


LENGTHS = [128, 256, 512, 1024, 2048]
TRAINED = 128


def rope_settings(length: int) -> dict[str, dict]:
    """Each rope setting compared, for evaluation at `length`."""
    factor = max(1.0, length / TRAINED)
    return {
        "default": {"rope_type": "default"},
        "linear": {"rope_type": "linear", "factor": factor},
        "ntk": {"rope_type": "ntk", "factor": factor},
        "dynamic": {"rope_type": "dynamic", "factor": 1.0},
        "yarn": {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": TRAINED},
    }


def evaluate_at_lengths(model_dir: Path, documents: list[str], settings) -> dict:
    """{setting: {length: {accuracy, loss, blocks}}} for the model in `model_dir`."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    results: dict[str, dict] = {}
    for length in LENGTHS:
        for name, rope in settings(length).items():
            model = AutoModelForMaskedLM.from_pretrained(model_dir, rope_parameters={**rope, "rope_theta": 10000.0})
            score = evaluate_mlm(model, tokenizer, documents, length, batch_size=8, seed=SEED)
            results.setdefault(name, {})[length] = score
            print(
                f"{model_dir.name} {name:>8s} @ {length:>5d}: accuracy {score['accuracy']:.4f} loss {score['loss']:.3f}"
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work-dir", type=Path, default=Path("experiments-work"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    pretrained = args.work_dir / "roformer"
    if not (pretrained / "config.json").exists():
        raise SystemExit(f"{pretrained} is missing: run benchmarks/experiments/convergence.py first")
    _, validation = split_documents(peoples_daily_documents(), 500, SEED)
    zero_shot = evaluate_at_lengths(pretrained, validation, rope_settings)
    run("length_continued_512", args.work_dir / "continued-512", "512:8:150", "--model", str(pretrained))
    continued = evaluate_at_lengths(
        args.work_dir / "continued-512", validation, lambda length: {"default": {"rope_type": "default"}}
    )
    bert = args.work_dir / "bert"
    bert_score = evaluate_mlm(
        AutoModelForMaskedLM.from_pretrained(bert), AutoTokenizer.from_pretrained(bert), validation, TRAINED, 8, SEED
    )
    record = {
        "trained_length": TRAINED,
        "lengths": LENGTHS,
        "zero_shot": zero_shot,
        "continued_512_default": continued["default"],
        "bert_at_128": bert_score,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "length_generalization.json").write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
