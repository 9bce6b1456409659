"""A JSON response rendered with orjson (fast, and no ``jsonable_encoder`` pass).

Error answers use it (:mod:`recordkeeper_service.handlers`).  Successful answers do not: FastAPI
validates them against their route's response model and pydantic-core writes the JSON bytes.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import JSONResponse

__all__ = ["JSON"]


class JSON(JSONResponse):
    """``application/json`` rendered by orjson; content must be plain JSON types."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content, option=orjson.OPT_NON_STR_KEYS)
