"""The linter, as CI runs it: `ruff check` over the repository with the project's settings
(pyproject.toml, [tool.ruff]) finds nothing."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    result = subprocess.run([ruff, "check", "--no-cache", "proxy", "tests", "benchmarks"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
