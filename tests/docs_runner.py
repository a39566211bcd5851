"""Run the code blocks of one documentation page in order, as a reader would: Python blocks in one interpreter
session (later blocks see what earlier ones defined), shell blocks with bash, all in the current directory.

    python tests/docs_runner.py BLOCKS.json

BLOCKS.json holds `[{"language": "python" | "bash", "code": ..., "where": "README.md:12"}, ...]`; the first block that
fails stops the run with its location and a non-zero exit status. What each block writes to stderr is also kept,
block by block, in `.docs-stderr.json` beside BLOCKS.json (tests assert that commands print no warning there).
"""

import contextlib
import io
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path


class Tee(io.TextIOBase):
    """A text stream writing to `stream` and keeping a copy."""

    def __init__(self, stream):
        self.stream, self.copy = stream, io.StringIO()

    def write(self, text):
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()


def main(path: str) -> int:
    blocks = json.loads(open(path, encoding="utf-8").read())
    namespace = {"__name__": "__main__"}
    stderr_of = {}
    timings = {}
    record = Path(path).with_name(".docs-stderr.json")
    try:
        for block in blocks:
            print(f"--- {block['where']} ({block['language']})", flush=True)
            started = time.perf_counter()
            if block["language"] == "python":
                tee = Tee(sys.stderr)
                try:
                    with contextlib.redirect_stderr(tee):
                        exec(compile(block["code"], block["where"], "exec"), namespace)  # noqa: S102 - running the docs is the point
                except BaseException:
                    traceback.print_exc()
                    print(f"FAILED: {block['where']}", flush=True)
                    return 1
                finally:
                    stderr_of[block["where"]] = tee.copy.getvalue()
            else:
                result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]], stderr=subprocess.PIPE,
                                        text=True)  # fmt: skip
                stderr_of[block["where"]] = result.stderr
                sys.stdout.write(result.stderr)  # where the run's output shows it, as a terminal would
                sys.stdout.flush()
                if result.returncode != 0:
                    print(f"FAILED: {block['where']} (exit status {result.returncode})", flush=True)
                    return 1
            timings[block["where"]] = round(time.perf_counter() - started, 1)
        return 0
    finally:
        record.write_text(json.dumps(stderr_of, ensure_ascii=False, indent=1), encoding="utf-8")
        Path(path).with_name(".docs-timings.json").write_text(json.dumps(timings, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
