"""Launching `hf-roformer` on 2 CPU processes (gloo) as users launch it, with torchrun or `accelerate launch`, and
killing the whole run with SIGKILL at a chosen event, for the sharded-training tests."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path


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


# Runs `hf-roformer ARGS...` in each process of a torchrun launch. On the process of rank KILL_RANK, at the event
# KILL_AT, it SIGKILLs the whole run: the torchrun agent, every other process (their ids are in KILL_PIDS/<rank>), and
# itself, as when a job is killed. Events:
#   step:N                  before optimizer step N of the current Trainer
#   write:RELPATH:before    when the file RELPATH (under KILL_ROOT) is about to be written
#   write:RELPATH:truncate  after it is written, cut to half its size (a crash in the middle of writing it)
KILLING_DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    import torch
    import transformers
    import transformers.modeling_utils

    RANK = int(os.environ["RANK"])
    PIDS = os.environ["KILL_PIDS"]
    os.makedirs(PIDS, exist_ok=True)
    with open(os.path.join(PIDS, str(RANK)), "w") as handle:
        handle.write(str(os.getpid()))
    ACTIVE = RANK == int(os.environ["KILL_RANK"])
    ROOT = os.path.realpath(os.environ["KILL_ROOT"])
    KIND, _, REST = os.environ["KILL_AT"].partition(":")
    TARGET, _, MODE = REST.rpartition(":") if KIND == "write" else (REST, None, None)
    pending = []

    def die(path=None):
        if path is not None:
            os.truncate(path, os.path.getsize(path) // 2)
        os.kill(os.getppid(), signal.SIGKILL)
        for name in os.listdir(PIDS):
            pid = int(open(os.path.join(PIDS, name)).read())
            if pid != os.getpid():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os.kill(os.getpid(), signal.SIGKILL)

    def matches(path):
        return ACTIVE and KIND == "write" and os.path.relpath(os.path.realpath(path), ROOT) == TARGET

    def wrap_writer(original):
        def write(obj, path, *args, **kwargs):
            hit = isinstance(path, (str, os.PathLike)) and matches(path)
            if hit and MODE == "before":
                die()
            result = original(obj, path, *args, **kwargs)
            if hit:
                die(path)
            return result
        return write

    torch.save = wrap_writer(torch.save)
    transformers.modeling_utils.safe_save_file = wrap_writer(transformers.modeling_utils.safe_save_file)

    def audit(event, args):
        if pending:
            die(pending.pop())
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) and args[1] and "w" in str(args[1]):
            if matches(os.fsdecode(args[0])):
                if MODE == "before":
                    die()
                pending.append(os.fsdecode(args[0]))

    sys.addaudithook(audit)

    step = transformers.Trainer.training_step
    def training_step(self, *args, **kwargs):
        if ACTIVE and KIND == "step" and self.state.global_step + 1 == int(TARGET):
            die()
        return step(self, *args, **kwargs)
    transformers.Trainer.training_step = training_step

    import hf_roformer_cli
    hf_roformer_cli.main(sys.argv[1:])
    """
)


def run_killed(arguments: list[str], cwd: Path, kill_at: str, kill_root: Path, kill_rank: int):
    """Launch `hf-roformer ARGUMENTS` with torchrun on 2 processes and SIGKILL the whole run at `kill_at` on the
    process of rank `kill_rank` (see `KILLING_DRIVER`)."""
    driver = cwd / "killing_driver.py"
    driver.write_text(KILLING_DRIVER)
    pids = cwd / f"pids-{kill_at.replace('/', '_').replace(':', '_')}"
    env = {"KILL_AT": kill_at, "KILL_ROOT": str(kill_root), "KILL_RANK": str(kill_rank), "KILL_PIDS": str(pids)}
    return run(torchrun_command(arguments, script=driver), cwd, **env)
