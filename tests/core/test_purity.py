"""The core imports only the standard library and itself (import-linter checks it too)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import recordkeeper.core

CORE = Path(recordkeeper.core.__file__).parent


def test_core_imports_only_the_standard_library() -> None:
    for path in sorted(CORE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                ok = name.startswith("recordkeeper.core") or top in sys.stdlib_module_names
                assert ok or top == "__future__", f"{path.name} imports {name}"
