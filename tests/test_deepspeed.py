"""DeepSpeed ZeRO-2 and ZeRO-3 through the Trainer on 2 CPU processes (DeepSpeed's CPU accelerator, gloo), launched
with torchrun and `--deepspeed` (the shipped configs): fine-tuning ends with the weights of the 1-process run with the
same global batch and writes an ordinary safetensors model; ZeRO-3 masked-LM pre-training (tied embeddings) too.

DeepSpeed compiles its shared-memory communication op for CPU on first use (cached in ~/.cache/torch_extensions)."""

import sys

import pytest
import torch
from conftest import one_thread
from distributed_launch import CONFIGS, failure, run, torchrun_command
from safetensors.torch import load_file
from test_finetune import tiny_checkpoint  # noqa: F401 (a fixture)
from test_fsdp import (  # noqa: F401 (fixtures)
    TOLERANCE,
    assert_same_weights,
    corpus,
    finetune_arguments,
    glue,
    logged_losses,
    one_process,
    pretrain_arguments,
)

import hf_roformer
import hf_roformer_cli
from hf_roformer.training.run.engine_checkpoints import engine_checkpoint_problem


pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (pip install 'hf_roformer[distributed]')")
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="multi-process gloo runs are exercised on Linux"),
    pytest.mark.launched,
]


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_fine_tuning_equals_one_process(stage, tiny_checkpoint, glue, one_process, tmp_path):  # noqa: F811
    config = CONFIGS / "deepspeed" / f"zero{stage}.json"
    arguments = finetune_arguments(tiny_checkpoint, glue, tmp_path / "out", 4, "--deepspeed", str(config))
    result = run(torchrun_command(arguments), tmp_path)
    assert result.returncode == 0, failure(result)
    output = tmp_path / "out"
    checkpoint = output / "checkpoint-8"
    assert (checkpoint / "latest").read_text() == "global_step8"  # DeepSpeed's own (partitioned) state
    assert engine_checkpoint_problem(checkpoint) is None
    assert logged_losses(output) == pytest.approx(logged_losses(one_process), abs=TOLERANCE)
    assert_same_weights(output, one_process, TOLERANCE)  # also: the layer norms keep their names (not gamma/beta)
    model = hf_roformer.AutoModelForSequenceClassification.from_pretrained(output)
    assert type(model).__name__ == "HfRoFormerForSequenceClassification"


def test_zero3_pretraining_with_tied_embeddings_equals_one_process(corpus, tmp_path):  # noqa: F811
    with one_thread():
        hf_roformer_cli.main(pretrain_arguments(corpus, tmp_path / "one", "32:8:4,64:4:2"))
    config = CONFIGS / "deepspeed" / "zero3.json"
    arguments = [*pretrain_arguments(corpus, tmp_path / "zero3", "32:4:4,64:2:2"), "--deepspeed", str(config)]
    result = run(torchrun_command(arguments), tmp_path)
    assert result.returncode == 0, failure(result)
    assert_same_weights(tmp_path / "zero3", tmp_path / "one", TOLERANCE)
    assert "cls.predictions.decoder.weight" not in load_file(tmp_path / "zero3" / "model.safetensors")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="ZeRO-3 optimizer offload is measured on a CUDA GPU")
def test_single_gpu_zero3_with_optimizer_offload_equals_plain_training_within_bf16_noise(
    tiny_checkpoint,  # noqa: F811
    glue,  # noqa: F811
    tmp_path,
):
    """One GPU, bf16: ZeRO-3 with the optimizer state offloaded to the CPU trains as the plain Trainer does, within
    the rounding of bf16 (weights and losses within 1e-2 after 8 steps)."""
    runs = {}
    for name, extra in (("plain", []), ("offload", ["--deepspeed", str(CONFIGS / "deepspeed" / "zero3_offload.json")])):
        arguments = finetune_arguments(tiny_checkpoint, glue, tmp_path / name, 8, "--bf16", *extra)
        arguments.remove("--use_cpu")
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1"]
        result = run([*command, "-m", "hf_roformer_cli", *arguments], tmp_path)
        assert result.returncode == 0, failure(result)
        runs[name] = tmp_path / name
    assert logged_losses(runs["offload"]) == pytest.approx(logged_losses(runs["plain"]), abs=1e-2)
    plain, offload = (load_file(runs[name] / "model.safetensors") for name in ("plain", "offload"))
    assert plain.keys() == offload.keys()
    for name in plain:  # ZeRO-3 under bf16 saves bf16 weights; the plain run keeps float32 ones
        torch.testing.assert_close(offload[name].float(), plain[name].float(), atol=1e-2, rtol=0, msg=name)
