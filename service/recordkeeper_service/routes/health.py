"""Probes: ``/healthz`` (the process runs) and ``/readyz`` (database reachable and at head)."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from recordkeeper_service import migrate
from recordkeeper_service.api_models import ErrorOut, ReadyOut, StatusOut
from recordkeeper_service.deps import RepositoryDep
from recordkeeper_service.handlers import error_json
from recordkeeper_service.responses import JSON

router = APIRouter(tags=["probes"])


@router.get("/healthz", response_model=StatusOut)
async def healthz() -> JSON:
    """Always ``200`` while the process serves requests."""
    return JSON({"status": "ok"})


@router.get("/readyz", response_model=ReadyOut, responses={503: {"model": ErrorOut}})
async def readyz(repository: RepositoryDep) -> JSON:
    """``200`` when the database answers and is at the migration head, else ``503 not_ready``."""
    try:
        status = await run_in_threadpool(migrate.status, repository.db)
    except Exception as exc:  # any failure to reach the database means "not ready"
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        return error_json(503, "not_ready", f"database unreachable: {reason}")
    if not status.at_head:
        return error_json(
            503,
            "not_ready",
            f"database at revision {status.current}, this release needs {status.head}; "
            f"run `{migrate.UPGRADE_COMMAND}`",
            revision=status.current,
            head=status.head,
        )
    return JSON({"status": "ready", "database": "ok", "revision": status.current})
