"""The distribution's version, shared by the client (``rk.__version__``) and the service."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
