"""The ``recordkeeper`` command line (typer).

Every command takes ``--json`` for machine-readable output.  User errors print the detail and the
stable code (``error: coco has no version 7 [version_not_found]``) and exit with status 1;
``verify`` exits 1 when it finds problems.  A bug shows its traceback.

Commands live in one module each (:mod:`~recordkeeper.cli.versions`,
:mod:`~recordkeeper.cli.alias`, :mod:`~recordkeeper.cli.lineage`, :mod:`~recordkeeper.cli.gc`)
and are registered in one list, :data:`recordkeeper.cli.app.COMMANDS`.  When the ``server``
extra is installed, ``serve``, ``db`` and ``token`` are added by
:func:`recordkeeper_service.cli.register`.
"""

from __future__ import annotations

from recordkeeper.cli.app import app, main
from recordkeeper.cli.common import parse_storage_options

__all__ = ["app", "main", "parse_storage_options"]
