"""`HF_ROFORMER_SMOKE=1`: the long-running commands (the demo, pre-training) shrink their data and steps to a few, so
every documented command runs in seconds in the test suite, along the same code path. What such a run reports
(counts, scores, cards) is what it did; it says on its first line that it is a smoke run."""

import os


SMOKE_VARIABLE = "HF_ROFORMER_SMOKE"


def smoke_run() -> bool:
    """Whether `HF_ROFORMER_SMOKE` asks for a smoke run (any value but empty, 0, false, no)."""
    return os.environ.get(SMOKE_VARIABLE, "").strip().lower() not in ("", "0", "false", "no")


def announce_smoke_run(what: str) -> None:
    """Print that this run is a smoke run and what it shrank."""
    print(f"{SMOKE_VARIABLE} is set: a smoke run ({what}); its numbers say nothing about the full run.", flush=True)


__all__ = ["SMOKE_VARIABLE", "announce_smoke_run", "smoke_run"]
