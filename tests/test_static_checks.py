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


def test_the_client_uses_only_tensorflows_public_api() -> None:
    """No ``tensorflow.python`` (TensorFlow's private modules, which change between releases:
    issue 23 item 6) in the library — not imported, not named in a string."""
    import ast

    found = []
    for path in sorted((ROOT / "client").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value] if node.value.startswith("tensorflow.python") else []
            elif isinstance(node, ast.Attribute) and ast.unparse(node).startswith("tf.python"):
                names = [ast.unparse(node)]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno}: {name}"
                for name in names
                if name.startswith(("tensorflow.python", "tf.python"))
            ]
    assert found == []
