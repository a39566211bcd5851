"""Count the aten operators a call dispatches, and those among them that force a device-to-host synchronization on
CUDA (a value read on the host, or an output whose size depends on the data), on any device including the CPU."""

from collections import Counter
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode


# Operators that wait for the device: they return a host value, or allocate an output sized by the data.
SYNC_OPERATORS = {
    "aten._local_scalar_dense",  # .item(), int(t), float(t), bool(t)
    "aten.is_nonzero",
    "aten.equal",
    "aten.nonzero",
    "aten.masked_select",
    "aten._unique2",
    "aten.unique_dim",
    "aten.unique_consecutive",
    "aten.repeat_interleave",  # without `output_size`
    "aten.bincount",
}


def _is_sync(name: str, args) -> bool:
    if name in SYNC_OPERATORS:
        return name != "aten.repeat_interleave" or len(args) < 3  # output_size given: no sync
    if name in ("aten.index", "aten.index_put", "aten.index_put_", "aten._index_put_impl_"):
        indices = args[1] if len(args) > 1 else ()
        return any(isinstance(index, torch.Tensor) and index.dtype == torch.bool for index in indices or ())
    return False


class OperatorCounter(TorchDispatchMode):
    """Records every aten operator dispatched while active, and the sync-forcing ones separately."""

    def __init__(self):
        super().__init__()
        self.total = 0
        self.syncs: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket).replace("aten::", "aten.")
        self.total += 1
        if _is_sync(name, args):
            self.syncs[name] += 1
        return func(*args, **(kwargs or {}))


def count_operators(call: Callable[[], object]) -> dict:
    """Run `call()` once and return `{"total": operators dispatched, "syncs": {sync-forcing operator: count}}`."""
    with OperatorCounter() as counter:
        call()
    return {"total": counter.total, "syncs": dict(counter.syncs)}
