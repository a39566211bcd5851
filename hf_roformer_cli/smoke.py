"""`HF_ROFORMER_SMOKE=1` (set by the documentation's tests): the long-running commands (the demo, pre-training, the
documented fine-tuning runs) shrink their data and steps to a few, along the same code path. The command line reads
the variable and passes the request on; the library takes it as an argument (`smoke=True`) and reads no environment
for it."""

import os


def smoke_run() -> bool:
    """Whether `HF_ROFORMER_SMOKE` asks for a smoke run (any value but empty, 0, false, no)."""
    from hf_roformer.training.run.smoke import SMOKE_VARIABLE

    return os.environ.get(SMOKE_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


__all__ = ["smoke_run"]
