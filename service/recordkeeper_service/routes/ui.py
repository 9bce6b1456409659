"""The web UI: ``GET /`` answers the single page, ``GET /ui/{asset}`` its scripts, styles and
the vendored graph library, all read from the installed package (``recordkeeper_service/ui/``).

Nothing is fetched from elsewhere at run time (the Content-Security-Policy only allows this
origin).  These routes are public, like ``/docs``: the files hold no data; every API call the
page makes carries the user's token and is checked as any other.  Assets are answered with a
strong ``ETag`` (their sha256) and revalidated on every load (``Cache-Control: no-cache``), so
an upgraded service never runs with a cached, older script.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fastapi import APIRouter, Request, Response

from recordkeeper.core.errors import RouteNotFound

__all__ = ["UI_PACKAGE_DIR", "router"]

#: The folder of ``recordkeeper_service`` holding the UI's files (package data).
UI_PACKAGE_DIR = "ui"

#: Cytoscape.js adds one ``<style>`` element with this fixed text to the page; the policy allows
#: exactly that text by its hash (``tests/service/test_ui_routes.py`` checks it against the
#: vendored file), and no other inline style or script.
CYTOSCAPE_STYLE = ".__________cytoscape_container { position: relative; }"
CYTOSCAPE_STYLE_HASH = base64.b64encode(hashlib.sha256(CYTOSCAPE_STYLE.encode()).digest()).decode()

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; "
    f"style-src 'self' 'sha256-{CYTOSCAPE_STYLE_HASH}'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".txt": "text/plain; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


@cache
def _assets() -> dict[str, Asset]:
    """Every file under the UI folder by its relative path, read once per process."""
    found: dict[str, Asset] = {}
    stack = [(resources.files("recordkeeper_service").joinpath(UI_PACKAGE_DIR), "")]
    while stack:
        folder, prefix = stack.pop()
        for entry in folder.iterdir():
            path = f"{prefix}{entry.name}"
            if entry.is_dir():
                stack.append((entry, f"{path}/"))
                continue
            suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
            media_type = _TYPES.get(suffix)
            if media_type is None:
                continue  # only what the browser needs (not fetch scripts or notes)
            body = entry.read_bytes()
            found[path] = Asset(body, media_type, f'"{hashlib.sha256(body).hexdigest()[:32]}"')
    return found


def _answer(request: Request, asset: Asset) -> Response:
    headers = {
        "ETag": asset.etag,
        "Cache-Control": "no-cache",
        # nosniff, X-Frame-Options and Referrer-Policy: the rule for every response
        # (recordkeeper_service/protections.py); the UI's own, stricter policy besides.
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    }
    if request.headers.get("if-none-match") == asset.etag:
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


router = APIRouter(include_in_schema=False)


@router.get("/")
def index(request: Request) -> Response:
    """The single page (``index.html``); the page routes itself with ``#/…`` fragments."""
    return _answer(request, _assets()["index.html"])


@router.get("/ui/{asset:path}")
def asset(asset: str, request: Request) -> Response:
    """A script, style sheet or vendored library of the page."""
    found = _assets().get(asset)
    if found is None:
        raise RouteNotFound(f"no UI asset {asset!r}")
    return _answer(request, found)
