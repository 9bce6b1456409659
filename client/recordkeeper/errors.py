"""``recordkeeper.errors``: the documented home of the error classes.

They are defined in :mod:`recordkeeper.core.errors` (the pure core the service shares); this
module re-exports them unchanged.
"""

from __future__ import annotations

from recordkeeper.core.errors import *  # noqa: F403
from recordkeeper.core.errors import __all__ as __all__
