"""Hot routes: a ``GET`` in its common forms answered without FastAPI's routing scan,
dependency solving and parameter parsing (the most frequent reads: a resolve, a lineage
answer, a version's consumers).

A hot route is installed before the API router.  It takes only a ``GET`` without a body whose
query holds each of its parameters at most once, each in a form its parser accepts, and
nothing else; anything else falls through to the declared route, which stays the one in the
OpenAPI document and the one source of validation errors.  The endpoint finds the parsed
query in the request's scope (:data:`HOT_PARAMS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.routing import Match, Route
from starlette.types import Scope

__all__ = ["HOT_PARAMS", "HotRoute", "Parse", "boolean", "choice", "integer", "text"]

#: Where a matched request's parsed query waits for the endpoint (in the ASGI scope).
HOT_PARAMS = "recordkeeper.hot_query"

#: ``parse(text)``: the value a query parameter stands for, or ValueError (the request then
#: falls through to the declared route).
Parse = Callable[[str], Any]


def choice(*values: str) -> Parse:
    """One of ``values``, as written."""

    def parse(value: str) -> str:
        if value not in values:
            raise ValueError(value)
        return value

    return parse


def boolean(value: str) -> bool:
    """``true`` or ``false`` (the canonical spellings only)."""
    if value not in ("true", "false"):
        raise ValueError(value)
    return value == "true"


def integer(low: int, high: int) -> Parse:
    """Decimal digits without leading zeros, in ``[low, high]``."""

    def parse(value: str) -> int:
        if not value.isascii() or not value.isdigit() or (value[0] == "0" and value != "0"):
            raise ValueError(value)
        number = int(value)
        if not low <= number <= high:
            raise ValueError(value)
        return number

    return parse


def text(value: str) -> str:
    """Any text (the endpoint checks it as the declared route does)."""
    return value


class HotRoute(Route):
    """A ``GET`` route taking only queries of ``parsers`` (see the module docstring)."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        parsers: Mapping[str, Parse],
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(path, endpoint, methods=["GET"], include_in_schema=False)
        self._parsers = dict(parsers)
        self._defaults = dict(defaults or {})

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get("type") != "http" or scope.get("method") != "GET":
            return Match.NONE, {}
        params = self.parse_query(scope.get("query_string", b""))
        if params is None:
            return Match.NONE, {}
        for name, value in scope.get("headers", ()):
            if name in (b"content-length", b"transfer-encoding") and value != b"0":
                return Match.NONE, {}
        match, child = super().matches(scope)
        if match is Match.FULL:
            child[HOT_PARAMS] = params  # the endpoint's query, parsed once
            child["route"] = self  # the request observer names the route without matching again
        return match, child

    def parse_query(self, query: bytes) -> dict[str, Any] | None:
        """The parameters of a query string (defaults filled in), or None when this route must
        not take it."""
        found = dict(self._defaults)
        if not query:
            return found
        try:
            pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, strict_parsing=True)
        except ValueError:
            return None
        seen: set[str] = set()
        for name, value in pairs:
            parse = self._parsers.get(name)
            if parse is None or name in seen:
                return None
            seen.add(name)
            try:
                found[name] = parse(value)
            except ValueError:
                return None
        return found
