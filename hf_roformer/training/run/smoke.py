"""Smoke runs: the long-running commands (the demo, pre-training) shrink their data and steps to a few when asked
(`smoke=True`; the command line asks under `HF_ROFORMER_SMOKE=1`, `hf_roformer_cli/smoke.py`), so every documented
command runs in seconds in the test suite, along the same code path. What such a run reports (counts, scores, cards) is
what it did; it says on its first line that it is a smoke run."""


SMOKE_VARIABLE = "HF_ROFORMER_SMOKE"


def announce_smoke_run(what: str) -> None:
    """Print that this run is a smoke run and what it shrank."""
    print(f"{SMOKE_VARIABLE} is set: a smoke run ({what}); its numbers say nothing about the full run.", flush=True)


__all__ = ["SMOKE_VARIABLE", "announce_smoke_run"]
