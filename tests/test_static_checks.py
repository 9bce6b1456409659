"""The static checks, run by the test command so that CI runs them too.

Each check is one test named after its tool; a failure prints the tool's own report, which names
the file and line.  Run one by hand with the command shown in the failure.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

CHECKS = {
    "ruff check": [BIN / "ruff", "check", "."],
    "ruff format": [BIN / "ruff", "format", "--check", "."],
    # the [tool.mypy] section names the packages, the source roots and the strict core
    "mypy": [BIN / "mypy"],
    # the [tool.importlinter] contracts: the layers, the pure core, no cycles
    "import-linter": [BIN / "lint-imports", "--no-logo", "--no-cache"],
}


@pytest.mark.parametrize("tool", sorted(CHECKS))
def test_static_check_is_clean(tool: str) -> None:
    command = [str(part) for part in CHECKS[tool]]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    report = (result.stdout + result.stderr).strip()
    assert result.returncode == 0, f"{tool} failed (`{' '.join(command)}`):\n{report}"
