"""Checkpoint lineage: models, runs, checkpoints and the data each checkpoint trained on.

* :mod:`.models` — the tables (on the service's one ``Base``, so Alembic sees them);
* :mod:`.repository` — every query and transaction (register, upstream, downstream, graph,
  the ``version_in_use`` guard the registry calls before deprecating or deleting a version);
* :mod:`.records` — immutable results with ``to_json()`` in the documented REST shape;
* :mod:`.schemas` — request bodies (pydantic);
* :mod:`.routes` — the FastAPI router under ``/api/v1``.
"""
