"""Probes: ``/healthz`` (the process runs) and ``/readyz`` (database reachable and at head)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from recordkeeper_service import migrate
from recordkeeper_service.deps import RepositoryDep
from recordkeeper_service.handlers import error_json
from recordkeeper_service.routes.common import OutModel, errors

__all__ = ["ReadyOut", "StatusOut", "router"]

log = logging.getLogger("recordkeeper_service")


class StatusOut(OutModel):
    status: str


class ReadyOut(OutModel):
    status: str
    database: str
    revision: str


router = APIRouter(tags=["probes"])


@router.get("/healthz", response_model=StatusOut)
async def healthz() -> dict[str, Any]:
    """Always ``200`` while the process serves requests."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=ReadyOut,
    responses={503: {**errors(503)[503], "description": "`not_ready`: see the detail"}},
)
async def readyz(repository: RepositoryDep) -> dict[str, Any] | Response:
    """``200`` when the database answers and is at the migration head, else ``503 not_ready``."""
    try:
        status = await run_in_threadpool(repository.migration_status)
    except Exception as exc:  # any failure to reach the database means "not ready"
        # The database's error text may name hosts, users, paths: the log gets it, not the
        # (unauthenticated) caller.
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        log.warning("not ready: database unreachable: %s", reason)
        return error_json(
            503, "not_ready", "database unreachable; retry later (the service log has the cause)"
        )
    if not status.at_head:
        return error_json(
            503,
            "not_ready",
            f"database at revision {status.current}, this release needs {status.head}; "
            f"run `{migrate.UPGRADE_COMMAND}`",
            revision=status.current,
            head=status.head,
        )
    return {"status": "ready", "database": "ok", "revision": status.current}
