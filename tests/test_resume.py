"""Resume that survives a crash: incomplete checkpoints are skipped, runs killed at any point (inside a save, at an
epoch boundary with per-epoch evaluation) and started again with the same command end with the weights and metrics
of an uninterrupted run, a finished run is not redone, and pre-training evaluation uses every block."""

import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import torch
from conftest import one_thread
from killing import KILLING_DRIVER
from safetensors.torch import load_file
from test_finetune import ASCII, make_glue
from transformers import TrainingArguments
from transformers.testing_utils import CaptureLogger

import hf_roformer
import hf_roformer_cli
from hf_roformer.training.run import checkpoints
from hf_roformer.training.run.checkpoints import checkpoint_problem, last_complete_checkpoint
from hf_roformer.training.tasks.pretraining.corpus import peoples_daily_documents


pytestmark = pytest.mark.releases("training.run.checkpoints", "training.run.training_run")  # see setup.cfg


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dropout_checkpoint(tmp_path_factory):
    """A tiny random RoFormer with dropout, so the random generator's state shows in the weights."""
    path = tmp_path_factory.mktemp("dropout-checkpoint")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *ASCII, *("##" + c for c in ASCII if c.isalnum())]
    tokenizer = hf_roformer.HfRoFormerTokenizer({token: i for i, token in enumerate(vocab)}, word_level=False)
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    )
    hf_roformer.HfRoFormerModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def finetune_command(checkpoint: Path, data: Path, output: Path, *extra: str) -> list[str]:
    """SST-2, 32 examples in batches of 8 (4 steps an epoch), 3 epochs evaluated each; a checkpoint every 2 steps,
    so one falls on every epoch end."""
    return [
        "finetune", "glue", "--task_name", "sst2", "--model_name_or_path", str(checkpoint), "--data_dir", str(data),
        "--output_dir", str(output), "--max_seq_length", "32", "--num_train_epochs", "3",
        "--per_device_train_batch_size", "8", "--learning_rate", "1e-3", "--save_strategy", "steps", "--save_steps",
        "2", "--logging_steps", "1", "--seed", "3", "--use_cpu", "--disable_tqdm", "true", *extra,
    ]  # fmt: skip


def eval_history(output: Path) -> list[tuple]:
    state = json.loads((output / "trainer_state.json").read_text())
    return [
        (entry["epoch"], entry["step"], entry["eval_loss"]) for entry in state["log_history"] if "eval_loss" in entry
    ]


def assert_same_history(actual_dir: Path, expected_dir: Path):
    """The same evaluations at the same epochs and steps, with the same losses (within 1e-6)."""
    expected, actual = eval_history(expected_dir), eval_history(actual_dir)
    assert [entry[:2] for entry in actual] == [entry[:2] for entry in expected]
    assert [entry[2] for entry in actual] == pytest.approx([entry[2] for entry in expected], abs=1e-6)


def assert_same_weights(actual_dir: Path, expected_dir: Path, tolerance: float = 1e-6):
    expected, actual = load_file(expected_dir / "model.safetensors"), load_file(actual_dir / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=tolerance, rtol=0, msg=name)


@pytest.fixture(scope="module")
def uninterrupted(dropout_checkpoint, tmp_path_factory):
    """The reference: the fine-tuning run done in one go, in this process."""
    root = tmp_path_factory.mktemp("uninterrupted")
    data = make_glue(root / "glue", "sst2", examples=32)
    with one_thread():
        hf_roformer_cli.main(finetune_command(dropout_checkpoint, data, root / "out"))
    return data, root / "out"


def test_checkpoint_at_an_epoch_end_holds_that_epochs_evaluation(uninterrupted):
    """The checkpoint on the last step of epoch 1 is written after the epoch-end evaluation, so it records it (the
    Trainer alone writes it before, and a run resumed from it never evaluates epoch 1)."""
    _, output = uninterrupted
    history = eval_history(output / "checkpoint-4")
    assert [epoch for epoch, _, _ in history] == [1.0]


def test_resume_from_an_epoch_end_checkpoint_equals_the_uninterrupted_run(dropout_checkpoint, uninterrupted, tmp_path):
    data, whole = uninterrupted
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    shutil.copytree(whole / "checkpoint-4", resumed / "checkpoint-4")  # what a crash in epoch 2 leaves
    shutil.copy(whole / "hf_roformer_run.json", resumed)  # with the record a run writes first
    with one_thread():
        hf_roformer_cli.main(finetune_command(dropout_checkpoint, data, resumed))
    assert_same_weights(resumed, whole)
    assert_same_history(resumed, whole)
    expected, actual = (json.loads((d / "eval_results.json").read_text()) for d in (whole, resumed))
    assert actual["eval_loss"] == pytest.approx(expected["eval_loss"], abs=1e-6)
    assert actual["eval_accuracy"] == expected["eval_accuracy"]


def test_incomplete_checkpoints_are_named_and_skipped(uninterrupted, tmp_path):
    _, whole = uninterrupted
    output = tmp_path / "out"
    for step in (6, 8, 10, 12):
        shutil.copytree(whole / f"checkpoint-{step}", output / f"checkpoint-{step}")
    (output / "checkpoint-12" / "trainer_state.json").unlink()
    weights = output / "checkpoint-10" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (output / "checkpoint-8" / "optimizer.pt").unlink()
    assert checkpoint_problem(output / "checkpoint-12") == "no trainer_state.json"
    assert checkpoint_problem(output / "checkpoint-10") == "model.safetensors is truncated"
    assert checkpoint_problem(output / "checkpoint-8") == "no optimizer.pt (optimizer state)"
    assert checkpoint_problem(output / "checkpoint-6") is None
    with CaptureLogger(checkpoints.logger) as captured:
        assert last_complete_checkpoint(output) == output / "checkpoint-6"
    for step, reason in ((12, "no trainer_state.json"), (10, "model.safetensors is truncated"), (8, "no optimizer.pt")):
        assert f"Skipping the incomplete checkpoint {output / f'checkpoint-{step}'} ({reason}" in captured.out


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: (d / "trainer_state.json").write_text('{"global_step": 4, "log_hi'), "trainer_state.json is"),
        (lambda d: (d / "scheduler.pt").unlink(), "no scheduler.pt"),
        (lambda d: (d / "rng_state.pth").unlink(), "no rng_state.pth (random generator state)"),
        (lambda d: (d / "optimizer.pt").write_bytes((d / "optimizer.pt").read_bytes()[:100]), "optimizer.pt is"),
        (lambda d: (d / "model.safetensors").unlink(), "no weights"),
    ],
)
def test_what_an_interrupted_save_leaves_is_incomplete(damage, reason, uninterrupted, tmp_path):
    _, whole = uninterrupted
    shutil.copytree(whole / "checkpoint-4", tmp_path / "checkpoint-4")
    damage(tmp_path / "checkpoint-4")
    assert checkpoint_problem(tmp_path / "checkpoint-4").startswith(reason)


def test_a_finished_run_is_not_redone(dropout_checkpoint, uninterrupted, capsys):
    data, whole = uninterrupted
    marker = json.loads((whole / "finished.json").read_text())
    assert marker["global_step"] == 12 and "eval_accuracy" in marker["metrics"]
    stamp = (whole / "model.safetensors").stat().st_mtime_ns
    hf_roformer_cli.main(finetune_command(dropout_checkpoint, data, whole))
    assert f"{whole} holds this run, finished, with the same arguments: nothing to do" in capsys.readouterr().out
    assert (whole / "model.safetensors").stat().st_mtime_ns == stamp


# Kill tests: the command runs in a child process that SIGKILLs itself at a chosen event, then runs again.

def run_command(arguments: list[str], cwd: Path, kill_at: str | None = None, kill_root: Path | None = None):
    """Run `hf-roformer ARGUMENTS` in a fresh interpreter (this checkout's code), optionally killed at `kill_at`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["OMP_NUM_THREADS"] = "1"  # as the reference runs: the same sums, and no thread barriers on a busy machine
    if kill_at is None:
        command = [sys.executable, "-m", "hf_roformer_cli", *arguments]
    else:
        driver = cwd / "killing_driver.py"
        driver.write_text(KILLING_DRIVER)
        command = [sys.executable, str(driver), *arguments]
        env |= {"KILL_AT": kill_at, "KILL_ROOT": str(kill_root)}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def kill_points(seed: int) -> list[str]:
    """Where the fine-tuning run (12 steps, checkpoints every 2, epochs of 4) is killed, in order: at the first step
    after an epoch boundary (the last complete checkpoint is the epoch-end one), inside a random file of a random
    checkpoint, at a random point of the next checkpoint, and inside the final save of the model."""
    rng = random.Random(seed)
    files = ["model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "config.json"]
    boundary = rng.choice([5, 9])
    inside = rng.choice([step for step in (6, 8, 10) if step > boundary - 1])
    later = rng.choice([step for step in (8, 10, 12) if step > inside])
    return [
        f"step:{boundary}",
        f"write:checkpoint-{inside}/{rng.choice(files)}:truncate",
        rng.choice([f"write:checkpoint-{later}/{rng.choice(files)}:before", f"step:{later}"]),
        "write:model.safetensors:truncate",
    ]


KILL_SEED = int(os.environ.get("HF_ROFORMER_KILL_SEED", "0"))


@pytest.mark.launched
def test_killed_fine_tuning_resumes_to_the_uninterrupted_result(dropout_checkpoint, uninterrupted, tmp_path):
    data, whole = uninterrupted
    output = tmp_path / "out"
    command = finetune_command(dropout_checkpoint, data, output)
    for kill_at in kill_points(KILL_SEED):
        result = run_command(command, tmp_path, kill_at, kill_root=output)
        assert result.returncode == -9, f"not killed at {kill_at}: {result.stderr[-3000:]}"
        assert not (output / "finished.json").exists()
    result = run_command(command, tmp_path)  # the same command, run to the end
    assert result.returncode == 0, result.stderr[-3000:]
    # killed in the final save: the final checkpoint's model is used, with no step trained
    resumed = ("warning: Skipping the incomplete checkpoint" in result.stderr, "resuming from" in result.stdout)
    assert any(resumed) or "training finished in an earlier run (12 steps)" in result.stdout, result.stdout
    assert_same_weights(output, whole)
    assert_same_history(output, whole)
    expected, actual = (json.loads((d / "eval_results.json").read_text()) for d in (whole, output))
    assert actual["eval_accuracy"] == expected["eval_accuracy"]
    assert actual["eval_loss"] == pytest.approx(expected["eval_loss"], abs=1e-6)
    assert (output / "SST-2.tsv").read_text() == (whole / "SST-2.tsv").read_text()
    assert json.loads((output / "finished.json").read_text())["global_step"] == 12


PRETRAIN = [
    "pretrain", "mlm", "--stages", "32:8:6,64:4:4", "--train_files", "train.txt", "--validation_files", "valid.txt",
    "--hidden_size", "32", "--num_hidden_layers", "2", "--num_attention_heads", "4", "--intermediate_size", "64",
    "--eval_steps", "2", "--save_steps", "2", "--logging_steps", "1", "--use_cpu", "--seed", "3",
    "--disable_tqdm", "true",
]  # fmt: skip


@pytest.mark.launched
def test_killed_pre_training_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch):
    documents = peoples_daily_documents()
    (tmp_path / "train.txt").write_text("\n".join(documents[:300]) + "\n", encoding="utf-8")
    (tmp_path / "valid.txt").write_text("\n".join(documents[-40:]) + "\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    rng = random.Random(KILL_SEED)
    whole, output = tmp_path / "whole", tmp_path / "out"
    with one_thread():
        hf_roformer_cli.main([*PRETRAIN, "--output_dir", str(whole)])
    kills = [
        f"step:{rng.choice([3, 4, 5])}",
        f"write:stage-1-len32/final/{rng.choice(['model.safetensors', 'config.json'])}:truncate",
        f"write:stage-2-len64/checkpoint-4/{rng.choice(['optimizer.pt', 'trainer_state.json', 'rng_state.pth'])}"
        ":truncate",
        "write:model.safetensors:before",
    ]
    for kill_at in kills:
        result = run_command([*PRETRAIN, "--output_dir", str(output)], tmp_path, kill_at, kill_root=output)
        assert result.returncode == -9, f"not killed at {kill_at}: {result.stderr[-3000:]}"
    result = run_command([*PRETRAIN, "--output_dir", str(output)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_weights(output, whole)
    expected, actual = (json.loads((d / "finished.json").read_text())["metrics"] for d in (whole, output))
    assert actual["eval_loss"] == pytest.approx(expected["eval_loss"], abs=1e-6)
    assert actual["eval_accuracy"] == expected["eval_accuracy"]
    tokenizer = hf_roformer.HfRoFormerTokenizer.from_pretrained(output)
    assert tokenizer.model_max_length == 64  # the trained length, so truncation=True truncates


def test_pre_training_evaluation_keeps_every_block(tmp_path):
    """`dataloader_drop_last` (full training batches) does not cut evaluation: 18 blocks at batch 32 are all used."""
    from hf_roformer.training.tasks.pretraining.task import PretrainingTrainer

    model = hf_roformer.HfRoFormerForMaskedLM(
        hf_roformer.HfRoFormerConfig(
            vocab_size=20, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
        )
    )
    blocks = datasets.Dataset.from_dict({"input_ids": [[2, 5, 6, 3]] * 18, "labels": [[-100, 5, -100, -100]] * 18})
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_eval_batch_size=32, dataloader_drop_last=True, use_cpu=True,
        report_to="none",
    )  # fmt: skip
    trainer = PretrainingTrainer(model=model, args=args, eval_dataset=blocks)
    assert sum(len(batch["input_ids"]) for batch in trainer.get_eval_dataloader()) == 18
    assert trainer.args.dataloader_drop_last  # training batches still drop the remainder
    assert math.isfinite(trainer.evaluate()["eval_loss"])
