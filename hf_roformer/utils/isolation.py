"""Running Python code in a fresh interpreter that cannot import hf_roformer: the proof that a saved model works as
remote code alone (`trust_remote_code=True`), as it will where the package is not installed. Used by the tour and the
tests."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path


# A preamble that makes `hf_roformer` unimportable, and checks it is, so the code after it proves something.
WITHOUT_THE_PACKAGE = textwrap.dedent(
    """
    import importlib.abc, sys

    class RefuseHfRoFormer(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_roformer" or name.startswith("hf_roformer."):
                raise ModuleNotFoundError(f"No module named {name!r} (blocked on purpose)")
            return None

    sys.meta_path.insert(0, RefuseHfRoFormer())
    try:
        import hf_roformer  # noqa: F401
        raise SystemExit("hf_roformer is importable; the run would prove nothing")
    except ModuleNotFoundError:
        pass
    """
)


def run_without_the_package(
    directory: str | os.PathLike, body: str, *args, timeout: int = 300
) -> subprocess.CompletedProcess:
    """Run the Python source `body` with `args` in a fresh interpreter that cannot import hf_roformer, offline, with its
    own remote-code module cache, in `directory`; returns the finished process (output captured as text)."""
    directory = Path(directory)
    script = directory / "without_the_package.py"
    script.write_text(WITHOUT_THE_PACKAGE + textwrap.dedent(body))
    env = {**os.environ, "HF_MODULES_CACHE": str(directory / "modules"), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, script.name, *map(str, args)],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


__all__ = ["WITHOUT_THE_PACKAGE", "run_without_the_package"]
