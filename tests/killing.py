"""The killing driver of the crash tests: `hf-roformer ARGS...` run by a script that SIGKILLs at a chosen event, as
when a job is killed, in one process (`tests/test_resume.py`) or in each process of a torchrun launch
(`tests/distributed_launch.py`)."""

import textwrap


# Runs `hf-roformer ARGS...` and, at the event KILL_AT, SIGKILLs itself; under torchrun (KILL_PIDS set) only the
# process of rank KILL_RANK acts, and it kills the whole run: the torchrun agent, every other process (their ids are
# in KILL_PIDS/<rank>) and itself. Events:
#   step:N                  before optimizer step N of the current Trainer
#   write:RELPATH:before    when the file RELPATH (under KILL_ROOT) is about to be written
#   write:RELPATH:truncate  after it is written, cut to half its size (a crash in the middle of writing it)
KILLING_DRIVER = textwrap.dedent(
    """
    import os, signal, sys
    import torch
    import transformers
    import transformers.modeling_utils

    RANK = int(os.environ.get("RANK", "0"))
    PIDS = os.environ.get("KILL_PIDS")  # under torchrun: a directory where each process writes its id
    if PIDS:
        os.makedirs(PIDS, exist_ok=True)
        with open(os.path.join(PIDS, str(RANK)), "w") as handle:
            handle.write(str(os.getpid()))
    ACTIVE = RANK == int(os.environ.get("KILL_RANK", "0"))
    ROOT = os.path.realpath(os.environ["KILL_ROOT"])
    KIND, _, REST = os.environ["KILL_AT"].partition(":")
    TARGET, _, MODE = REST.rpartition(":") if KIND == "write" else (REST, None, None)
    pending = []

    def die(path=None):
        if path is not None:
            os.truncate(path, os.path.getsize(path) // 2)
        if PIDS:  # the whole run: the torchrun agent and every other process
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
