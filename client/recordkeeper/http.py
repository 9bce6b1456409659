"""The one HTTP helper every client call goes through.

It owns four concerns and nothing else:

* **Retries** with exponential backoff (and ``Retry-After`` when the service sends one) on
  408, 429, 5xx answers and on connection errors — but only for requests that are safe to
  replay: ``GET``/``HEAD``/``PUT``/``DELETE`` and ``POST`` calls the caller marks idempotent
  (registering the same shards again, commit, abandon).  Other 4xx answers are never retried.
* **Error mapping**: an error answer becomes the typed exception of its ``code`` (body field, or
  the ``X-Error-Code`` header) via :func:`recordkeeper.core.errors.error_for_code`.
* **Connection failures** become :class:`~recordkeeper.errors.ServiceUnavailable` naming the URL,
  so "is the service running?" is the first thing a user reads.
* **Request ids**: every call sends a fresh ``X-Request-ID`` (the same on each of its retries);
  an error raised for the call carries it (``error.request_id``, and in ``str(error)``), so a
  failure can be found in the service's request log.
* **Paging**: :meth:`HttpCore.pages` walks ``{"data": [...], "count": n}`` list answers with
  ``limit``/``offset`` and stops at ``count``; :meth:`HttpCore.paged` yields their items, at
  most the caller's ``limit``.
* **Distrust of answers** (docs/security.md, "What the client trusts"): a body is read as a
  stream and refused past :data:`MAX_RESPONSE_BYTES` (:class:`~recordkeeper.errors.
  ResponseTooLarge`); a redirect is refused, naming its ``Location``
  (:class:`~recordkeeper.errors.ServiceRedirected`); a body that is not JSON, or a list whose
  pages do not advance or outnumber its ``count``, is :class:`~recordkeeper.errors.
  InvalidResponse`; :func:`reading_answer` turns a missing key or a value of the wrong type
  met while a caller reads an answer into the same error.

Capability modules (writer, publish, lineage, gc, …) receive an :class:`HttpCore` (or the
:class:`~recordkeeper.registry.Registry` built on it); none of them reaches into the
:class:`~recordkeeper.client.Client` façade.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin, urlsplit

import orjson

from recordkeeper.core.errors import (
    InvalidInput,
    InvalidRequest,
    InvalidResponse,
    RecordkeeperError,
    ResponseTooLarge,
    ServiceRedirected,
    ServiceUnavailable,
    code_for_status,
    error_for_code,
)
from recordkeeper.core.request_ids import REQUEST_ID_HEADER, new_request_id
from recordkeeper.profiles import load_profile, profile_name, profiles_path

if TYPE_CHECKING:
    import httpx

from recordkeeper.core.endpoint import DEFAULT_URL

__all__ = [
    "API_PREFIX",
    "DEFAULT_URL",
    "MAX_LIST_ITEMS",
    "MAX_RESPONSE_BYTES",
    "PAGE_SIZE",
    "RETRY_STATUSES",
    "SAFE_METHODS",
    "Answer",
    "HttpCore",
    "quote_segment",
    "reading_answer",
]

API_PREFIX = "/api/v1"
PAGE_SIZE = 1000

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})

#: The longest answer body the client reads (bytes, after content decoding): the largest real
#: answers (a page of 10,000 shards, a lineage graph) are a few MB.
MAX_RESPONSE_BYTES = 64 * 2**20
#: The most items the client pages through in one list (a version's shards, a list answer).
MAX_LIST_ITEMS = 10_000_000
#: How many parsed request URLs a client keeps (:meth:`HttpCore._target`); then it starts over.
_URL_CACHE_SIZE = 512


@dataclass(frozen=True)
class Answer:
    """An answer of the service, read whole (at most ``max_response_bytes``)."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


@contextlib.contextmanager
def reading_answer(what: str) -> Iterator[None]:
    """Read a service answer inside this block: a missing key, a value of the wrong type (a
    string where a list belongs, ``None`` where an object does) or a malformed value raises
    :class:`~recordkeeper.errors.InvalidResponse` naming ``what`` instead of ``KeyError``,
    ``TypeError``, ``ValueError`` or ``AttributeError``.  Typed errors pass unchanged."""
    try:
        yield
    except RecordkeeperError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidResponse(
            f"the service answered {what} that the client cannot read "
            f"({type(exc).__name__}: {exc}); is RECORDKEEPER_URL pointing at a recordkeeper "
            "service of a compatible version?"
        ) from None


def quote_segment(value: str) -> str:
    """Percent-encode one path segment (``coco@latest`` → ``coco%40latest``).  Every name or
    reference a call puts in a path comes through here: anything but a string is refused with
    ``invalid_request`` (not a ``TypeError`` from the URL quoting)."""
    if not isinstance(value, str):
        raise InvalidRequest(
            f"expected a name or reference (a string), got {type(value).__name__}: "
            f"{str(value)[:100]!r}"
        )
    return quote(value, safe="")


def _service_url(url: str) -> str:
    """``url`` without a trailing slash, if it is an ``http(s)://host[:port][/path]`` URL;
    anything else is a configuration mistake, refused before any request (not retried)."""
    parts = urlsplit(url.strip())
    if parts.scheme in ("http", "https") and parts.hostname and not parts.query:
        try:
            parts.port  # noqa: B018 - a port out of range or not a number raises ValueError
        except ValueError:
            pass
        else:
            return url.strip().rstrip("/")
    raise InvalidRequest(
        f"the service URL {url!r} is not an http(s) URL such as {DEFAULT_URL} "
        "(set RECORDKEEPER_URL; CLI: --url; Python: Client(url))"
    )


class HttpCore:
    """Sends requests to one service with retries and typed errors.

    ``http_client`` may be any :class:`httpx.Client` — including FastAPI's ``TestClient`` —
    so tests can run the client against the app in-process or over a real socket.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        http_client: httpx.Client | None = None,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 0.25,
        max_backoff: float = 8.0,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.base_url = _service_url(base_url)
        self.token = token
        self.retries = retries
        #: answers longer than this raise ResponseTooLarge (see :data:`MAX_RESPONSE_BYTES`)
        self.max_response_bytes = max_response_bytes
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._owns_client = http_client is None
        #: Answer forms the service refused (``"lineage:packed"``, ``"shards:packed"``: a service
        #: from before the form answers 422): asked once per client (:meth:`get_in_form`).
        self.refused_forms: set[str] = set()
        if http_client is None:
            import httpx  # imported here: httpx pulls in rich/pygments at import time

            http_client = httpx.Client(timeout=timeout)
        self._client = http_client
        self.timeout = timeout
        # A client the caller configured keeps its own timeouts (TestClient refuses them).
        self._timeout_kwargs: dict[str, Any] = {"timeout": timeout} if self._owns_client else {}
        #: request URLs already parsed, by (URL, parameters): :meth:`_target`; the URL type is
        #: the client's own (a test client may be built on another httpx-like package)
        self._urls: dict[tuple[Any, ...], httpx.URL] = {}
        self._url_type: Any = type(http_client.base_url)

    @classmethod
    def from_env(
        cls,
        url: str | None = None,
        token: str | None = None,
        *,
        http_client: httpx.Client | None = None,
        timeout: float = 60.0,
        retries: int = 4,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        profile: str | None = None,
    ) -> HttpCore:
        """A helper for ``url``/``token`` (default ``RECORDKEEPER_URL``/``RECORDKEEPER_TOKEN``,
        then the saved profile: :mod:`recordkeeper.profiles`).

        The environment is read now (when a client is made), never at import time.  Without a
        URL, a configured ``http_client``'s ``base_url`` is used, then the profile's (``profile``,
        else ``RECORDKEEPER_PROFILE``, else ``default``), then :data:`DEFAULT_URL`.  A profile
        named explicitly (``profile=`` or ``RECORDKEEPER_PROFILE``) that was never saved raises
        :class:`~recordkeeper.errors.InvalidInput`; one given as ``profile=`` also takes
        precedence over ``RECORDKEEPER_URL``/``RECORDKEEPER_TOKEN``.  A profile's token is sent
        only to its own URL.
        """
        if url is None and profile is None:
            url = os.environ.get("RECORDKEEPER_URL")
        if url is None and http_client is not None and str(http_client.base_url):
            url = str(http_client.base_url)
        if token is None and profile is None:
            token = os.environ.get("RECORDKEEPER_TOKEN") or None
        saved = None
        if url is None:
            saved = load_profile(profile)
            named = profile is not None or bool(os.environ.get("RECORDKEEPER_PROFILE"))
            if saved is None and named:
                raise InvalidInput(
                    f"no profile {profile_name(profile)!r} in {profiles_path()}; save one with "
                    f"`recordkeeper --profile {profile_name(profile)} login --url URL`"
                )
            if saved is not None:
                url = saved.url
                if token is None:
                    token = saved.token
        return cls(
            url or DEFAULT_URL,
            token,
            http_client=http_client,
            timeout=timeout,
            retries=retries,
            max_response_bytes=max_response_bytes,
        )

    def close(self) -> None:
        """Close the underlying connection pool if this helper created it."""
        if self._owns_client:
            self._client.close()

    def url(self, path: str) -> str:
        return self.base_url + path

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Send ``method path`` and return the decoded JSON answer (``None`` for 204).

        ``idempotent`` overrides the method's default replay safety (set it for POSTs the
        service documents as idempotent).
        """
        response = self._send(method, path, params=params, json=json, idempotent=idempotent)
        return _decode(response, method.upper(), self.url(path))

    def conditional_get(
        self, path: str, *, params: Mapping[str, Any] | None = None, etags: Sequence[str] = ()
    ) -> tuple[Any, str | None]:
        """``GET`` an API path sending ``If-None-Match: etags``: ``(body, etag)``.

        ``body`` is ``None`` when the service answered ``304 Not Modified`` (one of ``etags``
        is current); ``etag`` is the answer's ``ETag`` header (None if it sent none).
        """
        headers = {"If-None-Match": ", ".join(etags)} if etags else None
        response = self._send("GET", API_PREFIX + path, params=params, headers=headers)
        etag = response.headers.get("ETag")
        if response.status_code == 304:
            return None, etag
        return _decode(response, "GET", self.url(API_PREFIX + path)), etag

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """The request with retries; an error answer raises its typed exception, a redirect
        :class:`ServiceRedirected`, a body over :attr:`max_response_bytes`
        :class:`ResponseTooLarge`."""
        method = method.upper()
        replayable = method in SAFE_METHODS if idempotent is None else idempotent
        url = self.url(path)
        request_id = new_request_id()
        sent = {"Accept": "application/json", REQUEST_ID_HEADER: request_id, **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        clean_params = {k: v for k, v in (params or {}).items() if v is not None}
        import httpx

        try:
            target = self._target(url, clean_params)
        except httpx.InvalidURL as exc:  # a query or path over httpx's limits, a bad character
            raise InvalidRequest(
                f"{method} {url[:200]}: the request's URL cannot be sent ({exc}); a query value "
                "is probably far too long",
                request_id=request_id,
            ) from None
        attempt = 0
        while True:
            try:
                request = self._client.build_request(
                    method,
                    target,
                    json=json,
                    headers=sent,
                    **self._timeout_kwargs,
                )
            except (TypeError, ValueError) as exc:  # a value JSON has no form for (bytes, ...)
                raise InvalidRequest(
                    f"{method} {url}: a value of the request cannot be sent as JSON ({exc})",
                    request_id=request_id,
                ) from None
            try:
                response = self._read(self._client.send(request, stream=True), method, url)
            except httpx.DecodingError as exc:  # a body its Content-Encoding does not decode
                raise InvalidResponse(
                    f"{method} {url} answered a body that does not decode ({exc})",
                    request_id=request_id,
                ) from None
            except httpx.TransportError as exc:
                if replayable and attempt < self.retries:
                    self._sleep(attempt, None)
                    attempt += 1
                    continue
                raise ServiceUnavailable(
                    f"cannot reach the recordkeeper service at {self.base_url} "
                    f"({type(exc).__name__}: {exc or 'no answer'}); is it running there? "
                    "The URL comes from RECORDKEEPER_URL (CLI: --url; Python: Client(url))",
                    url=self.base_url,
                    request_id=request_id,
                ) from None
            if response.status_code in RETRY_STATUSES and replayable and attempt < self.retries:
                self._sleep(attempt, response.headers.get("Retry-After"))
                attempt += 1
                continue
            if response.status_code >= 400:
                raise _error_from_response(response, method, url, request_id)
            if 300 <= response.status_code < 400 and response.status_code != 304:
                raise _redirected(response, method, url, self.base_url, request_id)
            return response

    def get_in_form(
        self, path: str, params: Mapping[str, Any], what: str, forms: tuple[str, str]
    ) -> Any:
        """``GET path`` asking for the first of ``forms``, or for the second from a service that
        refuses the first (``invalid_request`` naming ``form``: it predates that form).  The
        refusal is kept in :attr:`refused_forms` as ``"{what}:{form}"``, so each client asks a
        service once."""
        preferred, fallback = forms
        refused = f"{what}:{preferred}"
        if refused not in self.refused_forms:
            try:
                return self.api("GET", path, params={**params, "form": preferred})
            except InvalidRequest as exc:
                if "form" not in str(exc):
                    raise
                self.refused_forms.add(refused)
        return self.api("GET", path, params={**params, "form": fallback})

    def _target(self, url: str, params: Mapping[str, Any]) -> httpx.URL:
        """``url`` with ``params`` as an ``httpx.URL``, parsed once per distinct pair.

        httpx parses a URL given as text on every request (~80 µs, two thirds of the client's
        CPU for a resolve answered ``304``); the same URL object is reused instead.  Values
        that cannot be a dictionary key (a list for a repeated parameter) are parsed each time.
        """
        key: tuple[Any, ...] | None = (url, *params.items())
        try:
            found = self._urls.get(key)  # type: ignore[arg-type]
        except TypeError:
            key = found = None
        if found is None:
            found = self._url_type(url, params=params)
            if key is not None:
                if len(self._urls) >= _URL_CACHE_SIZE:
                    self._urls.clear()
                self._urls[key] = found
        return found

    def _read(self, response: httpx.Response, method: str, url: str) -> Answer:
        """The whole body of a streamed ``response`` (then closed), refused past
        :attr:`max_response_bytes` before more is read."""
        limit = self.max_response_bytes
        try:
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise _too_large(method, url, response.status_code, limit)
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise _too_large(method, url, response.status_code, limit)
                chunks.append(chunk)
        finally:
            response.close()
        return Answer(response.status_code, response.headers, b"".join(chunks))

    def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`request` for a path of the REST API (``/datasets`` → ``/api/v1/datasets``)."""
        return self.request(method, API_PREFIX + path, **kwargs)

    def pages(
        self, path: str, params: Mapping[str, Any] | None = None, *, page: int = PAGE_SIZE
    ) -> Iterator[Any]:
        """Yield each answer (``{"data": [...], "count": n, ...}``) of a paged REST list.

        Asks for ``page`` items at a time with ``limit``/``offset``; stops after an empty page
        or once ``count`` items were served.  Stop iterating to stop early.  A list that does
        not page as the API says raises :class:`InvalidResponse`: a page with more items than
        asked, or equal to the one before (the offset ignored), more pages than
        ``ceil(count / page) + 1`` (the smallest count answered), more than
        :data:`MAX_LIST_ITEMS` items.
        """
        offset = 0
        total: int | None = None
        pages = 0
        previous: list[Any] | None = None
        while True:
            body = self.api("GET", path, params={**(params or {}), "limit": page, "offset": offset})
            data, count = _list_page(body, path)
            # The list may shrink while it is paged, never grow past its first count: what
            # was added meanwhile is in the next listing.
            total = count if total is None else min(total, count)
            pages += 1
            if len(data) > page or (data and data == previous):
                raise _endless(
                    path,
                    f"answered {len(data)} items for limit {page}"
                    if len(data) > page
                    else f"answered the same {len(data)} items for offset {offset} as for the "
                    "page before (it ignores offset)",
                )
            if pages > math.ceil(total / page) + 1 or offset + len(data) > MAX_LIST_ITEMS:
                raise _endless(
                    path,
                    f"served {pages} pages of a list whose count is {total}"
                    if offset + len(data) <= MAX_LIST_ITEMS
                    else f"served more than {MAX_LIST_ITEMS} items",
                )
            yield body
            offset += len(data)
            if not data or offset >= total:
                return
            previous = data

    def paged(
        self, path: str, params: Mapping[str, Any] | None = None, limit: int | None = None
    ) -> Iterator[Any]:
        """Yield the items of a paged REST list (``GET path``), at most ``limit`` of them."""
        page = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit)
        seen = 0
        for body in self.pages(path, params, page=page):
            for item in body["data"]:
                yield item
                seen += 1
                if limit is not None and seen >= limit:
                    return

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        delay = min(self.max_backoff, self.backoff * 2**attempt)
        if retry_after:
            with contextlib.suppress(ValueError):
                delay = min(self.max_backoff, max(0.0, float(retry_after)))
        time.sleep(delay * (0.5 + random.random() / 2))


def _decode(response: Answer, method: str, url: str) -> Any:
    """The JSON body of a successful answer (``None`` for an empty one)."""
    if response.status_code == 204 or not response.content:
        return None
    try:
        return orjson.loads(response.content)
    except ValueError:
        raise InvalidResponse(
            f"{method} {url} answered {response.status_code} with a body that is not "
            "JSON; is RECORDKEEPER_URL pointing at a recordkeeper service?"
        ) from None


def _list_page(body: Any, path: str) -> tuple[list[Any], int]:
    """``(data, count)`` of one page of a list answer, or :class:`InvalidResponse`."""
    data = body.get("data") if isinstance(body, dict) else None
    count = body.get("count") if isinstance(body, dict) else None
    if not isinstance(data, list) or not isinstance(count, int) or isinstance(count, bool):
        raise InvalidResponse(
            f"GET {path} answered {_shape(body)}, not a list page "
            '({"data": [...], "count": n}); is RECORDKEEPER_URL pointing at a recordkeeper '
            "service?"
        )
    return data, max(0, count)


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        fields = ", ".join(f"{k!r}: {type(v).__name__}" for k, v in list(value.items())[:6])
        return f"an object {{{fields}}}"
    return f"a {type(value).__name__}"


def _endless(path: str, what: str) -> InvalidResponse:
    return InvalidResponse(
        f"GET {path} {what}: the client stops paging (a service or proxy that does not page "
        "as the API says)",
        path=path,
    )


def _too_large(method: str, url: str, status: int, limit: int) -> ResponseTooLarge:
    return ResponseTooLarge(
        f"{method} {url} answered {status} with a body longer than {limit} bytes, the most "
        "the client reads (HttpCore.max_response_bytes); is RECORDKEEPER_URL pointing at a "
        "recordkeeper service?",
        limit=limit,
    )


def _redirected(
    response: Answer, method: str, url: str, base_url: str, request_id: str
) -> ServiceRedirected:
    """The error for a 3xx answer: the client follows no redirect (the token would travel
    to wherever it points, and a service reached through a redirect is misconfigured)."""
    location = response.headers.get("Location") or ""
    shown = location[:300] or "(no Location)"
    hint = ""
    target = urlsplit(urljoin(url, location)) if location else None
    asked = urlsplit(url)
    if target is not None and target.path.endswith(asked.path[len(urlsplit(base_url).path) :]):
        suffix = asked.path[len(urlsplit(base_url).path) :]
        new_base = target._replace(path=target.path[: len(target.path) - len(suffix)], query="")
        moved = (
            "another scheme"
            if target.scheme != asked.scheme
            else "another host"
            if target.netloc != asked.netloc
            else "another path"
        )
        hint = (
            f"; the service seems to live at {new_base.geturl()} ({moved}): set "
            "RECORDKEEPER_URL to it (CLI: --url; Python: Client(url))"
        )
    return ServiceRedirected(
        f"{method} {url} answered {response.status_code} redirecting to {shown}; the client "
        f"follows no redirect (it would send the token there){hint}",
        location=location[:2048],
        request_id=response.headers.get(REQUEST_ID_HEADER) or request_id,
    )


def _error_from_response(
    response: Answer, method: str, url: str, request_id: str
) -> RecordkeeperError:
    body: Any = None
    try:
        body = orjson.loads(response.content) if response.content else None
    except ValueError:
        body = None
    code = None
    detail = None
    extra: dict[str, Any] = {}
    if isinstance(body, dict):
        code = body.get("code")
        detail = body.get("detail")
        extra = {k: v for k, v in body.items() if k not in ("code", "detail")}
    code = code or response.headers.get("X-Error-Code")
    if not isinstance(detail, str):
        text = response.text.strip()[:300] if detail is None else str(detail)
        detail = text or f"{method} {url} answered HTTP {response.status_code}"
    if not isinstance(code, str):
        code = code_for_status(response.status_code)
    # The id the service used (it answers the one sent, or its own if it refused ours); a
    # proxy's error page has none: the id sent still names the call.
    if not isinstance(extra.get("request_id"), str):
        extra["request_id"] = response.headers.get(REQUEST_ID_HEADER) or request_id
    return error_for_code(code, detail, **extra)
