"""Shared settings of the pre-training experiments: one corpus split, one model size, one schedule, one seed.

Every experiment trains through `hf-roformer pretrain mlm` (`hf_roformer_cli.run`, in this process) and copies the
Trainer's log history to `benchmarks/results/experiments/`, where `plot_experiments.py` reads it.
"""

import json
import os
import platform
import sys
from pathlib import Path

import torch
import transformers


ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "experiments"
FIGURES = ROOT / "docs" / "experiments"
sys.path.insert(0, str(ROOT))

import hf_roformer_cli  # noqa: E402
from hf_roformer.training.tasks.pretraining.task import parse_stages, stage_directory  # noqa: E402


SEED = 0
# A small model, so that each run takes minutes on two CPU cores (about 0.6 s per step of 32 x 128 tokens).
SIZE = ["--hidden_size", "128", "--num_hidden_layers", "4", "--num_attention_heads", "4", "--intermediate_size", "512"]
COMMON = [
    "--validation_size", "500", "--seed", str(SEED), "--eval_steps", "100", "--save_steps", "500",
    "--logging_steps", "25", "--use_cpu", "--disable_tqdm", "true", "--learning_rate", "1e-3",
]  # fmt: skip


def environment() -> dict:
    """The machine and library versions a result was measured with."""
    return {
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def run(name: str, output_dir: Path, stages: str, *extra: str) -> dict:
    """Pre-train (or finish pre-training) one arm and record its curves as `RESULTS/<name>.json`."""
    torch.set_num_threads(2)
    metrics = hf_roformer_cli.run(
        ["pretrain", "mlm", "--output_dir", str(output_dir), "--stages", stages, *SIZE, *COMMON, *extra]
    )
    history = []
    for index, stage in enumerate(parse_stages(stages)):
        state = stage_directory(output_dir, index, stage) / "final" / "trainer_state.json"
        history.append({"stage": stage.name, "log_history": json.loads(state.read_text())["log_history"]})
    record = {
        "name": name,
        "arguments": [stages, *SIZE, *COMMON, *extra],
        "final": metrics,
        "stages": history,
        "environment": environment(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=1))
    return record
