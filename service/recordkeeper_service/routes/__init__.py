"""HTTP routes, one module per resource, gathered into :data:`api_router` (under ``/api/v1``)
and :data:`probe_router` (``/healthz``, ``/readyz``).

Each module ``routes/<resource>.py`` holds the resource's ``APIRouter`` and its pydantic request
(``*In``) and response (``*Out``) models; :mod:`.common` holds what they share (lists, errors).
Routes get the repository (:class:`recordkeeper_service.repository.Repository`) and the caller's
principal from :mod:`recordkeeper_service.deps` and never touch a database session.

=================  ========================================================================
module             resource
=================  ========================================================================
``versions``       stage, resolve (the hot path), list, commit, abandon, deprecate
``shards``         bulk registration of a staged version's shards
``datasets``       create, get, list
``aliases``        set/move, delete, list, history
``schemas``        TFRecord feature schemas by digest or of a version
``diff``           what changed between two versions
``events``         the audit log
``tokens``         API tokens (admin)
``provenance``     a staged version's provenance, a dataset's log, children, from a source
``lineage``        models, runs, checkpoints, upstream/downstream, graph
``gc``             garbage-collection candidates, ``gc-done``
``retention``      retention policies, pins, plan, claims, ``deletable``, ``retention-done``
``verifications``  failed verifications reported by clients
``record_sets``    record identity of versions: split set digests, look-up by records digest
``record_diffs``   stored record diffs of version pairs (computed by clients)
``samples``        a version's sample records (decoded by the publishing client)
``info``           ``/info``
``whoami``         ``/whoami``: the caller's name and scope
``ui``             ``/`` and ``/ui/{asset}``: the web UI (public, from package data)
``health``         ``/healthz``, ``/readyz`` (no authentication)
``metrics``        ``/metrics`` (Prometheus; scope by ``RECORDKEEPER_METRICS``)
``api_docs``       ``/docs``, ``/redoc`` and their assets, from the package
=================  ========================================================================
"""

from __future__ import annotations

from fastapi import APIRouter

from recordkeeper_service.routes import (
    aliases,
    datasets,
    diff,
    events,
    gc,
    health,
    info,
    leakage,
    lineage,
    provenance,
    record_diffs,
    record_sets,
    retention,
    samples,
    schemas,
    shards,
    tokens,
    ui,
    verifications,
    versions,
    whoami,
)

__all__ = ["API_PREFIX", "api_router", "probe_router", "ui_router"]

API_PREFIX = "/api/v1"

api_router = APIRouter(prefix=API_PREFIX)
# versions first: its GET /versions/{ref} is the hot path and routes are matched in order
for module in (
    versions,
    shards,
    info,
    whoami,
    datasets,
    aliases,
    schemas,
    diff,
    events,
    tokens,
    lineage,
    provenance,
    gc,
    retention,
    record_sets,
    record_diffs,
    samples,
    leakage,
    verifications,
):
    api_router.include_router(module.router)

probe_router = health.router

ui_router = ui.router
