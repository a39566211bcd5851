"""Shared benchmark plumbing: timing, peak memory, machine description, and writing JSON + Markdown results."""

import atexit
import datetime
import gc
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import transformers


RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine_info(device: torch.device) -> dict:
    """What the numbers were measured on: hardware, threads and library versions."""
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cpu": _cpu_name(),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    return info


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so wall-clock times measure it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def resident_kib(field: str) -> int:
    """A memory field of /proc/self/status in KiB (VmRSS: resident now; VmHWM: the resident high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not found in /proc/self/status")


def reset_peak_memory(device: torch.device) -> int:
    """Start a peak-memory window; returns the bytes in use now (GPU allocator, or CPU resident set)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    Path("/proc/self/clear_refs").write_text("5")  # Linux: resets the resident-set high-water mark
    return resident_kib("VmRSS") * 1024


def peak_memory(device: torch.device) -> int:
    """Peak bytes in use since the last `reset_peak_memory`."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    return resident_kib("VmHWM") * 1024


def time_call(function: Callable[[], object], device: torch.device, repeats: int, warmup: int) -> dict:
    """Median and spread of the wall-clock time of `function()` over `repeats` runs after `warmup` runs."""
    for _ in range(warmup):
        function()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "repeats": repeats}


def back_to_back_seconds(function: Callable[[], object], device: torch.device, calls: int = 50) -> float:
    """Seconds per call of `function` launched `calls` times back to back and timed once: the device's throughput
    when the host keeps ahead of it (launch overhead hidden), the number that bandwidth is quoted against."""
    for _ in range(3):
        function()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        function()
    synchronize(device)
    return (time.perf_counter() - start) / calls


def host_seconds(function: Callable[[], object], device: torch.device, calls: int = 200) -> float:
    """Host time per call of `function`: `calls` calls issued back to back and timed without waiting for the device
    (which runs behind), i.e. the Python, dispatch and launch work the host does per call."""
    for _ in range(5):
        function()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        function()
    elapsed = time.perf_counter() - start
    synchronize(device)
    return elapsed / calls


def matmul_tflops(device: torch.device, dtype: torch.dtype = torch.bfloat16) -> float | None:
    """The device's matrix-multiply rate now (8192³ on random data, median of 10), the denominator of MFU; None off
    CUDA."""
    if device.type != "cuda":
        return None
    a, b = (torch.randn(8192, 8192, device=device, dtype=dtype) for _ in range(2))
    return 2 * 8192**3 / time_call(lambda: a @ b, device, repeats=10, warmup=3)["median_s"] / 1e12


def labelled_training_step(
    model: torch.nn.Module,
    inputs: dict,
    labels: torch.Tensor,
    autocast_dtype: torch.dtype | None = None,
    fused_adamw: bool = False,
) -> Callable[[], None]:
    """A closure running one training step of a model that computes its loss from `labels` (masked-LM, say): forward
    under autocast to `autocast_dtype` (None: no autocast), backward, AdamW at lr 1e-5 (made once, here)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=fused_adamw)
    device_type = next(model.parameters()).device.type
    autocast = torch.autocast(device_type, dtype=autocast_dtype, enabled=autocast_dtype is not None)

    def step():
        with autocast:
            loss = model(**inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def kernel_seconds(function: Callable[[], object], device: torch.device, calls: int = 20) -> float:
    """Device time per call of `function`: the summed durations of the GPU kernels it launches, read by the profiler,
    so neither host overhead nor idle gaps between launches count. CUDA only."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        function()
    synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(calls):
            function()
        synchronize(device)
    kernels = [event for event in profiler.events() if event.device_type == torch.autograd.DeviceType.CUDA]
    return sum(event.time_range.elapsed_us() for event in kernels) / 1e6 / calls


def scratch_directory(prefix: str) -> Path:
    """A new directory in the temporary folder for what a benchmark writes only for itself (exported or trained
    models), removed when the benchmark's process ends."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return directory


def write_results(name: str, payload: dict, markdown: str) -> tuple[Path, Path]:
    """Write `results/<name>.json` and `results/<name>.md`."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    json_path = RESULTS_DIR / f"{name}.json"
    markdown_path = RESULTS_DIR / f"{name}.md"
    json_path.write_text(json.dumps(payload, indent=2) + "\n")
    markdown_path.write_text(markdown)
    return json_path, markdown_path


def markdown_table(headers: list[str], rows: list[list]) -> str:
    """A GitHub Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def run_command(
    command: list[str], cwd: Path, log: Path, label: str, environment: dict[str, str] | None = None
) -> tuple[float, resource.struct_rusage]:
    """Run `command` (a documented `hf-roformer` command, say) in a fresh process, with this checkout first on
    `PYTHONPATH`, the Hub offline and `environment`'s variables set, its output in `log`: the wall seconds and the
    child's own resource usage (peak resident set, CPU time). A failed run raises `RuntimeError` with the end of its
    log."""
    inherited = filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))
    paths = [str(Path(__file__).resolve().parents[1]), *inherited]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HF_HUB_OFFLINE": "1", **(environment or {})}
    start = time.perf_counter()
    with open(log, "w") as handle:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)  # the child's own resource usage, not this process's
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{label} failed:\n{log.read_text()[-3000:]}")
    return seconds, usage


def run_fine_tuning(
    command: list[str], output: Path, label: str, metric: str, environment: dict[str, str] | None = None
) -> dict:
    """Run an `hf-roformer finetune` command whose `--output_dir` is `output` (see `run_command`; its log goes next to
    it): the `metric` it wrote to eval_results.json (4 decimals), the steps it trained (0 without training), its wall
    and CPU seconds, peak resident memory, and the load average before and after."""
    load_before = os.getloadavg()
    seconds, usage = run_command(command, output.parent, output.parent / f"{output.name}.log", label, environment)
    state = output / "trainer_state.json"
    return {
        metric: round(json.loads((output / "eval_results.json").read_text())[metric], 4),
        "steps": json.loads(state.read_text())["global_step"] if state.exists() else 0,
        "wall_s": round(seconds, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_gb": round(usage.ru_maxrss * 1024 / 1e9, 2),
        "load_before": round(load_before[0], 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
