"""Completeness of the FSDP and DeepSpeed state inside Trainer checkpoints: what a process killed while saving leaves
(no distributed-checkpoint metadata, a cut shard, a cut archive, no DeepSpeed `latest` tag) is named."""

import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp

from hf_roformer.training.run.engine_checkpoints import engine_checkpoint_problem, holds_engine_state


pytestmark = pytest.mark.releases("training.run.distributed")  # see setup.cfg


def sharded_fsdp_checkpoint(directory):
    """The layout of a sharded FSDP checkpoint (one process here): model and optimizer as distributed checkpoints."""
    state = {"weight": torch.arange(1000, dtype=torch.float32), "bias": torch.ones(10)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "torch.distributed is disabled")  # one process, on purpose
        for name, key in (("pytorch_model_fsdp_0", "model"), ("optimizer_0", "optimizer")):
            dcp.save({key: state}, storage_writer=dcp.FileSystemWriter(directory / name), no_dist=True)
    return directory


def full_fsdp_checkpoint(directory):
    torch.save({"weight": torch.ones(100)}, directory / "pytorch_model_fsdp.bin")
    torch.save({"state": {}}, directory / "optimizer.bin")
    return directory


def deepspeed_checkpoint(directory):
    (directory / "global_step4").mkdir()
    for rank in (0, 1):
        torch.save({"rank": rank, "state": torch.ones(100)}, directory / f"global_step4/zero_pp_rank_{rank}_optim.pt")
    (directory / "latest").write_text("global_step4")
    return directory


def cut(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("layout", [sharded_fsdp_checkpoint, full_fsdp_checkpoint, deepspeed_checkpoint])
def test_whole_engine_checkpoints_are_complete(layout, tmp_path):
    directory = layout(tmp_path)
    assert holds_engine_state(directory)
    assert engine_checkpoint_problem(directory) is None


@pytest.mark.parametrize(
    ("layout", "damage", "problem"),
    [
        (
            sharded_fsdp_checkpoint,
            lambda d: (d / "optimizer_0/.metadata").unlink(),
            "no optimizer_0/.metadata (the sharded save did not finish)",
        ),
        (
            sharded_fsdp_checkpoint,
            lambda d: cut(d / "pytorch_model_fsdp_0/__0_0.distcp"),
            "pytorch_model_fsdp_0/__0_0.distcp is truncated",
        ),
        (
            sharded_fsdp_checkpoint,
            lambda d: cut(d / "pytorch_model_fsdp_0/.metadata"),
            "pytorch_model_fsdp_0/.metadata is unreadable (UnpicklingError)",
        ),
        (sharded_fsdp_checkpoint, lambda d: (d / "optimizer_0/__0_0.distcp").unlink(), "no optimizer_0/__0_0.distcp"),
        (full_fsdp_checkpoint, lambda d: cut(d / "optimizer.bin"), "optimizer.bin is unreadable"),
        (full_fsdp_checkpoint, lambda d: cut(d / "pytorch_model_fsdp.bin"), "pytorch_model_fsdp.bin is unreadable"),
        (deepspeed_checkpoint, lambda d: (d / "latest").unlink(), "no latest (DeepSpeed's save did not finish)"),
        (
            deepspeed_checkpoint,
            lambda d: cut(d / "global_step4/zero_pp_rank_1_optim.pt"),
            "global_step4/zero_pp_rank_1_optim.pt is unreadable",
        ),
    ],
)
def test_what_a_killed_engine_save_leaves_is_named(layout, damage, problem, tmp_path):
    directory = layout(tmp_path)
    damage(directory)
    assert engine_checkpoint_problem(directory).startswith(problem)


def test_a_trainer_checkpoint_without_engine_state_is_left_alone(tmp_path):
    torch.save({}, tmp_path / "optimizer.pt")
    assert not holds_engine_state(tmp_path)
    assert engine_checkpoint_problem(tmp_path) is None
