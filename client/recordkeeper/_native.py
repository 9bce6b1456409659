"""The optional C fast paths (``recordkeeper._speedups``), or ``None``.

Built from ``client/recordkeeper/_speedups.c`` when a compiler is available at install time.
Set ``RECORDKEEPER_PURE_PYTHON`` on (``1``, ``true``, ``yes``, ``on``, in any case; see
:func:`recordkeeper.core.flags.parse_flag`) to use the pure-Python reference code instead.
Callers look up ``_native.speedups`` at call time, so tests can switch implementations.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

from recordkeeper.core.flags import parse_flag

PURE_PYTHON_ENV = "RECORDKEEPER_PURE_PYTHON"


def _load() -> ModuleType | None:
    if parse_flag(PURE_PYTHON_ENV, os.environ.get(PURE_PYTHON_ENV)):
        return None
    try:
        return importlib.import_module("recordkeeper._speedups")
    except ImportError:  # no compiler at install time: the Python code runs
        return None


speedups: ModuleType | None = _load()
