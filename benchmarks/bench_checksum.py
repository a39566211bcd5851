"""Cost of verifying a tensor's CRC-32C when reading an original checkpoint.

The tensor is a base model's embedding matrix (50,000 x 768 float32, 153.6 MB, the word-level RoFormer's), written
to a file and read back as the TF reader reads it (memory-mapped, copied into a tensor), then checksummed by each
available implementation: `google-crc32c` (`pip install "hf_roformer[conversion]"`), `crc32c`, and the NumPy
fallback. Times are medians of interleaved runs.

    python benchmarks/bench_checksum.py      # writes results/checksum_cpu.{json,md}
"""

import mmap
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

from hf_roformer.conversion import crc32c as crc  # noqa: E402


SHAPE = (50000, 768)
REPEATS = 5


def implementations() -> dict:
    found = {"numpy": crc.crc32c_numpy}
    if crc.google_crc32c is not None:
        found["google-crc32c"] = crc._google_crc32c
    if crc.crc32c_package is not None:
        found["crc32c"] = crc.crc32c_package.crc32c
    return found


def main() -> None:
    torch.set_num_threads(1)
    array = np.random.default_rng(0).standard_normal(SHAPE).astype("<f4")
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "tensor.bin")
        array.tofile(path)
        with open(path, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            view = memoryview(mapped)
            methods = implementations()
            values = {name: method(view) for name, method in methods.items()}
            assert len(set(values.values())) == 1, values  # every implementation agrees
            times = {"read into a tensor": [], **{name: [] for name in methods}}
            for _ in range(REPEATS):
                start = time.perf_counter()
                torch.from_numpy(np.frombuffer(view, dtype="<f4").astype(np.float32, copy=True).reshape(SHAPE))
                times["read into a tensor"].append(time.perf_counter() - start)
                for name, method in methods.items():
                    start = time.perf_counter()
                    method(view)
                    times[name].append(time.perf_counter() - start)
            del view
            mapped.close()
    medians = {name: statistics.median(values) for name, values in times.items()}
    read = medians["read into a tensor"]
    payload = {
        "machine": benchlib.machine_info(torch.device("cpu")),
        "load_average_1min": os.getloadavg()[0],
        "tensor": {"shape": SHAPE, "dtype": "float32", "bytes": array.nbytes},
        "repeats": REPEATS,
        "median_seconds": medians,
        "relative_to_read": {name: seconds / read for name, seconds in medians.items()},
    }
    print(payload)
    machine = payload["machine"]
    rows = [
        [name, f"{seconds * 1000:.0f} ms", f"{array.nbytes / seconds / 1e9:.2f} GB/s", f"{seconds / read:.2f}x"]
        for name, seconds in medians.items()
    ]
    markdown = (
        "# CRC-32C verification of a checkpoint tensor (CPU)\n\n"
        f"{machine['cpu']}, torch {machine['torch']}, {machine['date']}; 1-minute load average "
        f"{payload['load_average_1min']:.1f} (shared 2-core machine). One {SHAPE[0]:,} x {SHAPE[1]} float32 tensor "
        f"({array.nbytes / 1e6:.1f} MB, a base model's embedding matrix) read from a memory-mapped file, median of "
        f"{REPEATS} interleaved runs.\n\n"
        + benchlib.markdown_table(["step", "time", "throughput", "vs reading the tensor"], rows)
        + "\n`python benchmarks/bench_checksum.py`\n"
    )
    for written in benchlib.write_results("checksum_cpu", payload, markdown):
        print(written)


if __name__ == "__main__":
    main()
