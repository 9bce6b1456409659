"""The request gate: authentication first, then a bounded, streamed body (a pure ASGI middleware).

One request-size policy for every route, applied before anything reads or parses a body:

0. A query string holding NUL (``%00``) is refused with ``422 invalid_request``
   (``invalid_text``), as NUL in a body's text is (routes/common.py): SQLite would match it as
   a character, PostgreSQL refuses it in text.
1. A request without a body (no ``Content-Length`` above 0, no ``Transfer-Encoding``) passes
   straight through: its route's dependency authenticates it, as before (the hot read path pays
   nothing here).
2. A request with a body is matched to its route, and if the route needs a principal (a
   dependency marked with :func:`recordkeeper_service.auth.requires_scope`: ``Reader``,
   ``Writer``, ``Admin``), it is authenticated for the highest scope declared **before a byte of
   the body is received**: no token, a bad token or too small a scope answers ``401``/``403`` at
   once.  The principal is left in the ASGI scope for the route's dependency (no second lookup).
3. The body is then bounded by the route's limit: :func:`large_body` routes (shard registration)
   take ``RECORDKEEPER_MAX_BODY_BYTES``, every other route ``RECORDKEEPER_MAX_SMALL_BODY_BYTES``
   (never more than the first).  A declared ``Content-Length`` above it is refused before reading;
   a body sent without one (chunked) is counted as it streams, and the first byte over the limit
   turns whatever the application would have answered into ``413 payload_too_large``.

A refusal sent before the body was read carries ``Connection: close`` unless the unread rest is
small (at most the small-body limit): uvicorn then discards that rest and keeps the connection,
otherwise it closes the connection instead of receiving a body nobody will read.

Which scope a route needs is derived once, from the routes' own declared dependencies: the gate
holds no copy of the scope rules.

4. A route whose body carries a capped list (shard registration: at most 10,000 shards) declares
   it with :func:`counted_list` and uses :class:`GatedRoute`: its body is parsed one list item at
   a time and refused at the first item over the cap, so an oversized batch costs the items up to
   the cap, not the whole body turned into Python objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson
from fastapi import Request, Response
from fastapi.routing import APIRoute, RouteContext, iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recordkeeper.core.errors import InvalidRequest, PayloadTooLarge, RecordkeeperError
from recordkeeper_service.auth import PRINCIPAL_KEY, SCOPE_RANK, Authenticator
from recordkeeper_service.handlers import error_response

__all__ = ["GatedRoute", "RequestGate", "RoutePolicy", "counted_list", "large_body", "load_counted"]

F = TypeVar("F", bound=Callable[..., Any])


def large_body(endpoint: F) -> F:
    """Mark a route's endpoint as taking large bodies (up to ``RECORDKEEPER_MAX_BODY_BYTES``)."""
    endpoint.large_body = True  # type: ignore[attr-defined]
    return endpoint


def counted_list(
    field: str, max_items: int, too_many: Callable[[], RecordkeeperError]
) -> Callable[[F], F]:
    """Mark a route's endpoint: its JSON body's ``field`` list holds at most ``max_items`` items;
    one more raises ``too_many()`` while parsing (the route must use :class:`GatedRoute`)."""

    def mark(endpoint: F) -> F:
        endpoint.counted_list = (field, max_items, too_many)  # type: ignore[attr-defined]
        return endpoint

    return mark


_WS = re.compile(r"[ \t\n\r]*")
#: 19 digits in a row: a number that may lie beyond what orjson decodes as an integer
_LONG_DIGITS = re.compile(r"[0-9]{19}")
_DECODER = json.JSONDecoder()


def load_counted(text: str, field: str, max_items: int, too_many: Callable[[], Exception]) -> Any:
    """``json.loads(text)``, but the top-level object's ``field`` list is decoded one item at a
    time and ``too_many()`` is raised at item ``max_items + 1``.  Malformed JSON raises
    :class:`json.JSONDecodeError` as ``json.loads`` does.

    A body orjson decodes (valid JSON without what it refuses: ``NaN``, ``1e400``, lone
    surrogates, deep nesting) and without 19 digits in a row (orjson turns integers beyond
    64 bits into floats), whose ``field`` appears once, is decoded by
    orjson in one C call (the values are those ``json.loads`` gives) and its list counted
    after; anything else takes the item-by-item decoder below, which answers as it always did
    (a registration of 2,000 shards: ~4 ms instead of ~50 ms).
    """
    fast = _decoded_whole(text, field)
    if fast is not None:
        listed = fast.get(field)
        if isinstance(listed, list) and len(listed) > max_items:
            raise too_many()
        return fast

    def skip(i: int) -> int:
        match = _WS.match(text, i)
        return match.end() if match else i

    def expect(i: int, char: str, what: str) -> int:
        if text[i : i + 1] != char:
            raise json.JSONDecodeError(f"Expecting {what}", text, i)
        return skip(i + 1)

    i = skip(0)
    if text[i : i + 1] != "{":
        return json.loads(text)  # not an object: the model refuses it
    i = skip(i + 1)
    out: dict[str, Any] = {}
    if text[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if text[i : i + 1] != '"':
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", text, i
                )
            key, i = _DECODER.raw_decode(text, i)
            i = expect(skip(i), ":", "':' delimiter")
            if key == field and text[i : i + 1] == "[":
                items: list[Any] = []
                i = skip(i + 1)
                if text[i : i + 1] == "]":
                    i += 1
                else:
                    while True:
                        item, i = _DECODER.raw_decode(text, i)
                        items.append(item)
                        if len(items) > max_items:
                            raise too_many()
                        i = skip(i)
                        if text[i : i + 1] == "]":
                            i += 1
                            break
                        i = expect(i, ",", "',' delimiter")
                value: Any = items
            else:
                value, i = _DECODER.raw_decode(text, i)
            out[key] = value
            i = skip(i)
            if text[i : i + 1] == "}":
                i += 1
                break
            i = expect(i, ",", "',' delimiter")
    if skip(i) != len(text):
        raise json.JSONDecodeError("Extra data", text, skip(i))
    return out


def _decoded_whole(text: str, field: str) -> dict[str, Any] | None:
    """The object ``text`` holds, decoded by orjson, when orjson decodes it and ``field``
    can occur only once as its key; else None (:func:`load_counted` decodes it item by item)."""
    if text.count(f'"{field}"') > 1:  # a repeated key: each occurrence is counted
        return None
    if _LONG_DIGITS.search(text):
        # orjson decodes an integer beyond 64 bits (above 2**64-1, below -2**63) as a float,
        # where json.loads keeps the integer the number policy then refuses: such a body (or
        # one with any run of 19 digits, in a string too) is decoded item by item
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class _CountedRequest(Request):
    """A request whose JSON body is parsed by :func:`load_counted`."""

    def __init__(self, request: Request, spec: tuple[str, int, Callable[[], Exception]]) -> None:
        super().__init__(request.scope, request.receive)
        self._spec = spec

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            self._json = load_counted(body.decode("utf-8"), *self._spec)
        return self._json


class GatedRoute(APIRoute):
    """An :class:`APIRoute` that honours :func:`counted_list` on its endpoint."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        spec = getattr(self.endpoint, "counted_list", None)
        if spec is None:
            return handler

        async def counted(request: Request) -> Response:
            try:
                return await handler(_CountedRequest(request, spec))
            except HTTPException as exc:  # FastAPI wraps what the parser raised; unwrap ours
                if isinstance(exc.__cause__, RecordkeeperError):
                    raise exc.__cause__ from None
                raise

        return counted


@dataclass(frozen=True, slots=True)
class RoutePolicy:
    """What the gate enforces on a route: the scope to authenticate for, and the body limit."""

    scope: str | None
    max_bytes: int
    #: the large limit (shard registration, whose shards can be sent in several requests)
    large: bool = False


def _declared_scope(route: RouteContext) -> str | None:
    """The highest scope among the route's (nested) dependencies, or None if it needs none."""
    dependant = getattr(route, "dependant", None)
    stack = [dependant] if dependant is not None else []
    found: list[str] = []
    while stack:
        current = stack.pop()
        scope = getattr(current.call, "required_scope", None)
        if isinstance(scope, str):
            found.append(scope)
        stack.extend(current.dependencies)
    return max(found, key=SCOPE_RANK.__getitem__) if found else None


class RequestGate:
    """Authenticate requests with a body before reading it; bound every body by its route."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Callable[[], Sequence[BaseRoute]],
        authenticator: Authenticator,
        max_body_bytes: int,
        max_small_body_bytes: int,
    ) -> None:
        self.app = app
        self._routes = routes
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes
        self.max_small_body_bytes = min(max_small_body_bytes, max_body_bytes)
        self._table: list[tuple[RouteContext, RoutePolicy]] | None = None

    # ------------------------------------------------------------------ policy

    def policies(self) -> list[tuple[RouteContext, RoutePolicy]]:
        """Every route with its policy, derived once from the routes' declarations (FastAPI's
        effective routes: included routers' prefixes and dependencies applied)."""
        if self._table is None:
            table = []
            for route in iter_route_contexts(self._routes()):
                endpoint = getattr(route, "endpoint", None)
                large = bool(getattr(endpoint, "large_body", False))
                limit = self.max_body_bytes if large else self.max_small_body_bytes
                table.append((route, RoutePolicy(_declared_scope(route), limit, large)))
            self._table = table
        return self._table

    def policy_for(self, scope: Scope) -> RoutePolicy:
        for route, policy in self.policies():
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return policy
        # No route (404), wrong method (405), redirect: the app answers without reading the body.
        return RoutePolicy(None, self.max_small_body_bytes)

    def _too_large(self, policy: RoutePolicy) -> PayloadTooLarge:
        # only shard registration takes the large limit, and only its body can be split up
        # (the advice to send shards in several requests misled every other route's callers)
        if policy.large:
            how = "RECORDKEEPER_MAX_BODY_BYTES); send shards in several requests"
        else:
            how = "RECORDKEEPER_MAX_SMALL_BODY_BYTES, the limit of every route but shards)"
        return PayloadTooLarge(
            f"the request body is larger than {policy.max_bytes} bytes ({how}",
            max_bytes=policy.max_bytes,
        )

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = scope.get("query_string", b"")
        if b"%00" in query or b"\x00" in query:
            await _refuse(_NUL_IN_QUERY, scope, receive, send, close=False)
            return
        declared, streamed = _body_headers(scope)
        if isinstance(declared, InvalidRequest):
            await _refuse(declared, scope, receive, send, close=True)
            return
        if not streamed and not declared:  # no body: nothing to gate
            await self.app(scope, receive, send)
            return

        policy = self.policy_for(scope)
        # Unread bytes left on the connection by an early refusal: small ones are discarded by
        # the server and the connection kept, anything else closes it.
        close = streamed or declared is None or declared > self.max_small_body_bytes
        if policy.scope is not None:
            try:
                principal = (await self.authenticator.principal_for(scope)).require(policy.scope)
            except RecordkeeperError as exc:
                await _refuse(exc, scope, receive, send, close=close)
                return
            scope[PRINCIPAL_KEY] = principal
        if declared is not None and declared > policy.max_bytes:
            await _refuse(self._too_large(policy), scope, receive, send, close=True)
            return
        await self._bounded(scope, receive, send, policy)

    async def _bounded(
        self, scope: Scope, receive: Receive, send: Send, policy: RoutePolicy
    ) -> None:
        limit = policy.max_bytes
        received = 0
        exceeded = False
        replaced = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = True
                    raise self._too_large(policy)
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal replaced
            if not exceeded:
                await send(message)
                return
            if not replaced:  # swap the app's answer (whatever it made of the error) for ours
                replaced = True
                await _refuse(self._too_large(policy), scope, receive, send, close=True)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except PayloadTooLarge:
            if not replaced:
                replaced = True
                await _refuse(self._too_large(policy), scope, receive, send, close=True)


#: Query parameters follow the body's text policy (routes/common.py): no NUL, which SQLite would
#: match as a character and PostgreSQL refuses in text.
_NUL_IN_QUERY = InvalidRequest(
    "query parameters must be text without NUL (%00)",
    errors=[{"loc": ["query"], "msg": "text must not hold NUL", "type": "invalid_text"}],
)


async def _refuse(
    exc: RecordkeeperError, scope: Scope, receive: Receive, send: Send, *, close: bool
) -> None:
    response = error_response(exc)
    if close:
        response.headers["Connection"] = "close"
    await response(scope, receive, send)


def _body_headers(scope: Scope) -> tuple[int | InvalidRequest | None, bool]:
    """``(Content-Length, whether a Transfer-Encoding streams the body)`` of the request."""
    length: int | InvalidRequest | None = None
    streamed = False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return InvalidRequest("the Content-Length header is not an integer"), False
            if length < 0:
                return InvalidRequest("the Content-Length header is negative"), False
        elif name == b"transfer-encoding":
            streamed = True
    return length, streamed
