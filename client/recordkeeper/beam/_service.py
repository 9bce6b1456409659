"""How Beam workers reach the registry service and the object store.

A :class:`recordkeeper.Client` holds open connections and cannot be pickled into a pipeline.
Transforms carry a :class:`ServiceConfig` instead — the service URL, the token and the fsspec
``storage_options`` — and each worker builds its own client from it in ``DoFn.setup``.

``url``/``token`` set to ``None`` mean "the worker's own environment": the worker's client reads
``RECORDKEEPER_URL``/``RECORDKEEPER_TOKEN`` where it runs (see docs/beam.md for how each runner
sets worker environment variables).  A token that is carried is part of the pickled pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam

from recordkeeper.client import Client
from recordkeeper.values import DatasetVersion

__all__ = ["ServiceConfig", "ServiceDoFn", "version_output"]


@dataclass(frozen=True)
class ServiceConfig:
    """Picklable connection settings: ``url``, ``token``, ``storage_options``, ``timeout``."""

    url: str | None = None
    token: str | None = field(default=None, repr=False)
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    timeout: float = 60.0

    @classmethod
    def of(
        cls,
        client: Client | None,
        storage_options: Mapping[str, Any] | None = None,
        *,
        send_token: bool = True,
    ) -> ServiceConfig:
        """The settings of ``client`` (a new ``Client()`` from the environment when ``None``).

        ``storage_options`` default to the client's.  ``send_token=False`` leaves the token
        out: workers then read ``RECORDKEEPER_TOKEN`` from their own environment.
        """
        client = client if client is not None else Client()
        options = storage_options if storage_options is not None else client.storage_options
        return cls(
            url=client.url,
            token=client.token if send_token else None,
            storage_options=dict(options or {}),
            timeout=client.http.timeout,
        )

    def client(self) -> Client:
        """A new client for this configuration (call it in the worker, not at pickling time)."""
        return Client(
            self.url,
            self.token,
            timeout=self.timeout,
            storage_options=dict(self.storage_options),
        )


class ServiceDoFn(beam.DoFn):
    """A DoFn that talks to the service: its worker's client is built in ``setup`` from
    ``config`` and closed in ``teardown`` (:meth:`worker_client` while the DoFn runs).  A method,
    not a property: Beam reads every attribute of a DoFn when the transform is built."""

    def __init__(self, config: ServiceConfig) -> None:
        super().__init__()
        self._config = config
        self._client: Client | None = None

    def worker_client(self) -> Client:
        """This worker's client (built in ``setup``)."""
        assert self._client is not None, "used before DoFn.setup"
        return self._client

    def setup(self) -> None:
        self._client = self._config.client()

    def teardown(self) -> None:
        if self._client is not None:
            self._client.close()


def version_output(version: DatasetVersion) -> dict[str, Any]:
    """What the transforms emit for a version: its JSON summary (picklable, unlike the
    :class:`DatasetVersion`, which holds its client); ``client.resolve(v["name"])`` gets it back.
    """
    return version.to_dict()
