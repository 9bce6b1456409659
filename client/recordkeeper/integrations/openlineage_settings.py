"""Whether OpenLineage events are emitted, read from the environment (no dependency).

Off by default.  On with any of:

* ``RECORDKEEPER_OPENLINEAGE_URL=http://host:5000`` — HTTP transport to that consumer
  (``POST <url>/api/v1/lineage``; ``RECORDKEEPER_OPENLINEAGE_ENDPOINT`` changes the path,
  ``RECORDKEEPER_OPENLINEAGE_API_KEY`` sends a bearer token);
* ``RECORDKEEPER_OPENLINEAGE_FILE=/path/events.jsonl`` — file transport, one event a line
  (appended);
* ``RECORDKEEPER_OPENLINEAGE=1`` — openlineage-python's own configuration (``OPENLINEAGE_URL``,
  ``OPENLINEAGE_CONFIG``, ``openlineage.yml``, ``OPENLINEAGE__TRANSPORT__*``).

``RECORDKEEPER_OPENLINEAGE_NAMESPACE`` names the jobs' namespace (default ``recordkeeper``).
"""

from __future__ import annotations

import os

__all__ = ["enabled"]

URL = "RECORDKEEPER_OPENLINEAGE_URL"
FILE = "RECORDKEEPER_OPENLINEAGE_FILE"
ON = "RECORDKEEPER_OPENLINEAGE"


def enabled() -> bool:
    """Whether events are to be emitted (one of the settings above is set)."""
    if os.environ.get(URL) or os.environ.get(FILE):
        return True
    return os.environ.get(ON, "").strip().lower() in {"1", "true", "yes", "on"}
