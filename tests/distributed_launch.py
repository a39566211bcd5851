"""Launching `hf-roformer` on 2 CPU processes (gloo) as users launch it, with torchrun or `accelerate launch`, and
killing the whole run with SIGKILL at a chosen event, for the sharded-training tests."""

import os
import subprocess
import sys
from pathlib import Path

from killing import KILLING_DRIVER


ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
PROCESSES = 2


def child_environment(**extra: str) -> dict:
    """This checkout's code first on the path; one thread per process, as the 1-process references run."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return env | {"OMP_NUM_THREADS": "1", "HF_HUB_DISABLE_TELEMETRY": "1"} | extra


def torchrun_command(arguments: list[str], script: Path | None = None) -> list[str]:
    """`torchrun --standalone --nproc_per_node 2 -m hf_roformer_cli ARGUMENTS` (or `SCRIPT ARGUMENTS`)."""
    entry = [str(script)] if script is not None else ["-m", "hf_roformer_cli"]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(PROCESSES)]
    return [*launcher, *entry, *arguments]


def accelerate_command(config: Path, arguments: list[str]) -> list[str]:
    """`accelerate launch --config_file CONFIG -m hf_roformer_cli ARGUMENTS`, on a free port."""
    launcher = [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--config_file", str(config)]
    return [*launcher, "--main_process_port", "0", "-m", "hf_roformer_cli", *arguments]


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run a launcher command to its end (10 minutes at most) and return what it printed."""
    return subprocess.run(command, cwd=cwd, env=child_environment(**env), capture_output=True, text=True, timeout=600)


def failure(result: subprocess.CompletedProcess) -> str:
    """The end of what a failed launch printed."""
    return f"exit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-6000:]}"


def run_killed(arguments: list[str], cwd: Path, kill_at: str, kill_root: Path, kill_rank: int):
    """Launch `hf-roformer ARGUMENTS` with torchrun on 2 processes and SIGKILL the whole run at `kill_at` on the
    process of rank `kill_rank` (see `KILLING_DRIVER`)."""
    driver = cwd / "killing_driver.py"
    driver.write_text(KILLING_DRIVER)
    pids = cwd / f"pids-{kill_at.replace('/', '_').replace(':', '_')}"
    env = {"KILL_AT": kill_at, "KILL_ROOT": str(kill_root), "KILL_RANK": str(kill_rank), "KILL_PIDS": str(pids)}
    return run(torchrun_command(arguments, script=driver), cwd, **env)
