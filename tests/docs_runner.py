"""Run the code blocks of one documentation page in order, as a reader would: Python blocks in one interpreter
session (later blocks see what earlier ones defined), shell blocks with bash, all in the current directory.

    python tests/docs_runner.py BLOCKS.json

BLOCKS.json holds `[{"language": "python" | "bash", "code": ..., "where": "README.md:12"}, ...]`; the first block that
fails stops the run with its location and a non-zero exit status.
"""

import json
import subprocess
import sys
import traceback


def main(path: str) -> int:
    blocks = json.loads(open(path, encoding="utf-8").read())
    namespace = {"__name__": "__main__"}
    for block in blocks:
        print(f"--- {block['where']} ({block['language']})", flush=True)
        if block["language"] == "python":
            try:
                exec(compile(block["code"], block["where"], "exec"), namespace)  # noqa: S102 - running the docs is the point
            except BaseException:
                traceback.print_exc()
                print(f"FAILED: {block['where']}", flush=True)
                return 1
        else:
            result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]])
            if result.returncode != 0:
                print(f"FAILED: {block['where']} (exit status {result.returncode})", flush=True)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
