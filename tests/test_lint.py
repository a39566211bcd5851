"""The code base is lint-clean (ruff, configured in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path


def test_ruff_check_is_clean():
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-m", "ruff", "check", str(root)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
