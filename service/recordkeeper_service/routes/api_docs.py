"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from assets shipped in the package.

FastAPI's own pages load their JavaScript and CSS from a CDN (and ReDoc its fonts from Google):
blank on a machine without internet access.  These pages reference only the service's own
``/docs/assets/{name}`` (the files in ``static/api-docs/``, see its README for versions and
licences), so they work offline.  They need no token, like ``/openapi.json``: they hold no data.

:func:`install` adds the routes to an app created with ``docs_url=None, redoc_url=None``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from recordkeeper_service.handlers import error_json

__all__ = ["ASSETS", "ASSETS_PATH", "ASSET_DIR", "install"]

#: Where the vendored files are, inside the package.
ASSET_DIR = Path(__file__).resolve().parent.parent / "static" / "api-docs"
#: The URL prefix they are served under.
ASSETS_PATH = "/docs/assets"
#: The files served, with their media types (licence texts are served too: they go with them).
ASSETS: dict[str, str] = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
    "redoc.standalone.js": "text/javascript; charset=utf-8",
    "swagger-ui-LICENSE": "text/plain; charset=utf-8",
    "swagger-ui-NOTICE": "text/plain; charset=utf-8",
    "swagger-ui-bundle.js.LICENSE.txt": "text/plain; charset=utf-8",
    "redoc-LICENSE": "text/plain; charset=utf-8",
    "redoc.standalone.js.LICENSE.txt": "text/plain; charset=utf-8",
}
#: The assets change only with a release of the service.
CACHE_CONTROL = "public, max-age=86400"

DOCS_PATH = "/docs"
OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"
REDOC_PATH = "/redoc"


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")


def install(app: FastAPI) -> None:
    """Add ``/docs``, ``/docs/oauth2-redirect``, ``/redoc`` and ``/docs/assets/{name}``."""
    openapi_url = app.openapi_url or "/openapi.json"

    async def swagger_ui(request: Request) -> Response:
        root = _root(request)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_PATH,
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
            # No badge fetched from the public validator service.
            swagger_ui_parameters={"validatorUrl": None},
        )

    async def oauth2_redirect(_request: Request) -> Response:
        return get_swagger_ui_oauth2_redirect_html()

    async def redoc(request: Request) -> Response:
        root = _root(request)
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon-32x32.png",
            with_google_fonts=False,
        )

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        media_type = ASSETS.get(name)
        if media_type is None:  # only the listed files: no path ever reaches the file system
            return error_json(404, "not_found", f"no such asset: {name[:100]}")
        return FileResponse(
            ASSET_DIR / name, media_type=media_type, headers={"Cache-Control": CACHE_CONTROL}
        )

    app.add_route(DOCS_PATH, swagger_ui, include_in_schema=False)
    app.add_route(OAUTH2_REDIRECT_PATH, oauth2_redirect, include_in_schema=False)
    app.add_route(REDOC_PATH, redoc, include_in_schema=False)
    app.add_route(ASSETS_PATH + "/{name}", asset, include_in_schema=False)
