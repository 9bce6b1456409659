"""The optional C fast paths (``recordkeeper._speedups``), or ``None``.

Built from ``client/_speedups.c`` when a compiler is available at install time.  Set
``RECORDKEEPER_PURE_PYTHON=1`` to use the pure-Python reference code instead.  Callers look up
``_native.speedups`` at call time, so tests can switch implementations.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("RECORDKEEPER_PURE_PYTHON", "") in ("1", "true", "yes"):
        return None
    try:
        return importlib.import_module("recordkeeper._speedups")
    except ImportError:  # no compiler at install time: the Python code runs
        return None


speedups: ModuleType | None = _load()
