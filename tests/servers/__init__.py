"""Real test servers (PostgreSQL, S3, GCS) for the test suite; the fixtures are in
:mod:`tests.servers.plugin`.

Importing this package sets ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false``. gcsfs reads it when it is
imported; with the default it asks a gRPC control plane for each bucket's type, which the GCS
emulator does not serve, and every first access to a bucket stalls ~60 s.
"""

from __future__ import annotations

import os
import sys

#: True when gcsfs was imported (with the experimental mode on) before this package: too late.
GCSFS_IMPORTED_TOO_EARLY = "gcsfs" in sys.modules and (
    os.environ.get("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "true").strip().lower() in ("true", "1")
)
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
