"""Whether the FSDP or DeepSpeed state inside a Trainer checkpoint is whole, for resuming after a crash.

Under FSDP the Trainer saves the model and optimizer through accelerate: with sharded state dicts as distributed
checkpoints (`pytorch_model_fsdp_0/`, `optimizer_0/`: one `__<rank>_0.distcp` file per process and a `.metadata`
file that torch writes last, by renaming, once every process has written its shard), with full state dicts as
`pytorch_model_fsdp.bin` and `optimizer.bin` (`torch.save` archives). Under DeepSpeed, `global_step<N>/` holds
`torch.save` files per process and `latest` names it once they are written. A checkpoint whose process was killed
while saving lacks the metadata or the `latest` tag, or has a cut file.
"""

import os
from pathlib import Path

from .file_integrity import torch_file_problem


FSDP_MODEL_NAME = "pytorch_model_fsdp"  # accelerate's name for the FSDP model state
FSDP_OPTIMIZER_NAME = "optimizer"  # and for the optimizer state: `optimizer_0/` (sharded), `optimizer.bin` (full)
DCP_METADATA = ".metadata"


def distributed_checkpoint_problem(directory: Path) -> str | None:
    """Why a torch distributed checkpoint directory is not whole, or None: its `.metadata` must exist and every
    shard it lists must hold the bytes it records."""
    from torch.distributed.checkpoint import FileSystemReader

    if not (directory / DCP_METADATA).exists():
        return f"no {directory.name}/{DCP_METADATA} (the sharded save did not finish)"
    try:
        metadata = FileSystemReader(str(directory)).read_metadata()
    except Exception as error:  # a cut pickle raises whatever unpickling meets  # noqa: BLE001
        return f"{directory.name}/{DCP_METADATA} is unreadable ({type(error).__name__})"
    needed: dict[str, int] = {}
    for item in metadata.storage_data.values():
        needed[item.relative_path] = max(needed.get(item.relative_path, 0), item.offset + item.length)
    for name, size in sorted(needed.items()):
        path = directory / name
        if not path.exists():
            return f"no {directory.name}/{name}"
        if os.path.getsize(path) < size:
            return f"{directory.name}/{name} is truncated"
    return None


def deepspeed_checkpoint_problem(directory: Path) -> str | None:
    """Why DeepSpeed's state in a Trainer checkpoint is not whole, or None: `latest` must name a `global_step`
    directory whose `.pt` files are whole archives."""
    latest = directory / "latest"
    if not latest.exists():
        return "no latest (DeepSpeed's save did not finish)"
    tag = latest.read_text(encoding="utf-8").strip()
    state = directory / tag
    files = sorted(state.glob("*.pt")) if state.is_dir() else []
    if not files:
        return f"no DeepSpeed state in {tag}/"
    for path in files:
        problem = torch_file_problem(path)
        if problem:
            return f"{tag}/{problem}"
    return None


def engine_checkpoint_problem(directory: str | Path) -> str | None:
    """What the FSDP or DeepSpeed state of a Trainer checkpoint lacks (None when it is whole, or when the checkpoint
    has none)."""
    directory = Path(directory)
    for name in (FSDP_MODEL_NAME, FSDP_OPTIMIZER_NAME):
        for path in sorted(directory.glob(f"{name}_*")):
            problem = distributed_checkpoint_problem(path) if path.is_dir() else None
            if problem:
                return problem
        for path in sorted(directory.glob(f"{name}*.bin")):
            problem = torch_file_problem(path)
            if problem:
                return problem
    if any(directory.glob("global_step*")):
        return deepspeed_checkpoint_problem(directory)
    return None


def holds_engine_state(directory: str | Path) -> bool:
    """Whether a Trainer checkpoint holds FSDP or DeepSpeed state (model and optimizer), which stands in for the
    Trainer's own `optimizer.pt` (and, sharded, for the model's weights)."""
    directory = Path(directory)
    patterns = (f"{FSDP_MODEL_NAME}*", f"{FSDP_OPTIMIZER_NAME}_*", f"{FSDP_OPTIMIZER_NAME}.bin", "global_step*")
    return any(any(directory.glob(pattern)) for pattern in patterns)
