"""Where the service listens unless told otherwise: the one default for ``recordkeeper serve``,
its settings and every client."""

from __future__ import annotations

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_URL"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
