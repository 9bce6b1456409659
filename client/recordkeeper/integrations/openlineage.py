"""OpenLineage run events for publishing versions and training checkpoints (extra
``openlineage``).

Opt-in: see :mod:`recordkeeper.integrations.openlineage_settings`.  When enabled,

* **publishing** a version (``Client.publish``, ``Client.writer``) emits a ``START`` event
  before the commit and a ``COMPLETE`` (or ``FAIL``) after it.  Job: the producer
  (``<namespace>`` / ``publish.<dataset>``); inputs: the parents and raw sources of the version's
  provenance (else what its metadata names: ``metadata["parents"]``, version references, and
  ``metadata["sources"]``, URIs); output: the version as a dataset with a ``schema`` facet (one
  field per feature, its kind as type) and a ``version`` facet (``datasetVersion``: the content
  digest);
* **training**: each tracked save (``recordkeeper.tf.track``) emits ``START`` and ``COMPLETE``
  of the job ``train.<model>`` whose run is the checkpoint's run (a stable UUID derived from
  ``model@run``); inputs: the versions the checkpoint consumed (with their facets); output: the
  checkpoint (namespace ``recordkeeper://<service>/models``, name ``model@run/ckpt-N``).

Datasets are named ``recordkeeper://<service host>`` / ``<version name>``.  A failure to emit
is logged, never raised: publishing and training do not fail because a lineage backend is down.
"""

from __future__ import annotations

import datetime
import logging
import os
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
from openlineage.client.generated.job_type_job import JobTypeJobFacet
from openlineage.client.generated.schema_dataset import (
    SchemaDatasetFacet,
    SchemaDatasetFacetFields,
)
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

from recordkeeper.integrations import openlineage_settings as settings

if TYPE_CHECKING:
    from recordkeeper.client import Client
    from recordkeeper.values import DatasetVersion

__all__ = [
    "PRODUCER",
    "PublishRun",
    "dataset_of",
    "emit_training",
    "lineage_client",
    "namespace",
    "publish_events",
    "training_events",
]

log = logging.getLogger(__name__)

#: The ``producer`` of every event (OpenLineage wants a URI naming the emitting code).
PRODUCER = "https://github.com/recordkeeper/recordkeeper/tree/main/client/recordkeeper"
_RUN_NAMESPACE = uuid.UUID("6f1c1b52-6d43-4c1e-9a36-6b1b3c2f9e10")


def namespace() -> str:
    return os.environ.get("RECORDKEEPER_OPENLINEAGE_NAMESPACE") or "recordkeeper"


def lineage_client() -> OpenLineageClient:
    """An OpenLineage client with the transport the settings name."""
    url = os.environ.get(settings.URL)
    if url:
        config: dict[str, Any] = {"url": url}
        endpoint = os.environ.get("RECORDKEEPER_OPENLINEAGE_ENDPOINT")
        if endpoint:
            config["endpoint"] = endpoint
        key = os.environ.get("RECORDKEEPER_OPENLINEAGE_API_KEY")
        if key:
            config["auth"] = {"type": "api_key", "apiKey": key}
        return OpenLineageClient(transport=HttpTransport(HttpConfig.from_dict(config)))
    path = os.environ.get(settings.FILE)
    if path:
        return OpenLineageClient(
            transport=FileTransport(FileConfig(log_file_path=path, append=True))
        )
    return OpenLineageClient()


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat()


def _service_namespace(url: str | None) -> str:
    host = urlsplit(url or "").netloc or "local"
    return f"recordkeeper://{host}"


def _facets(version: DatasetVersion) -> dict[str, Any]:
    facets: dict[str, Any] = {}
    try:
        features = version.schema.features
    except Exception:
        log.debug("no schema for %s", version.name, exc_info=True)
        features = ()
    if features:
        facets["schema"] = SchemaDatasetFacet(
            fields=[
                SchemaDatasetFacetFields(
                    name=f.name,
                    type=str(f.kind),
                    description=f"{f.scope}, {f.min_count}..{f.max_count} values",
                    ordinal_position=i,
                )
                for i, f in enumerate(features, 1)
            ]
        )
    if version.content_digest:
        facets["version"] = DatasetVersionDatasetFacet(datasetVersion=version.content_digest)
    return facets


def dataset_of(version: DatasetVersion, url: str | None, *, output: bool = False) -> Any:
    """``version`` as an OpenLineage input (or output) dataset with schema and version facets."""
    kind = OutputDataset if output else InputDataset
    return kind(namespace=_service_namespace(url), name=version.name, facets=_facets(version))


def _job(name: str, job_type: str) -> Job:
    facet = JobTypeJobFacet(processingType="BATCH", integration="RECORDKEEPER", jobType=job_type)
    return Job(namespace=namespace(), name=name, facets={"jobType": facet})


def _event(state: RunState, run_id: str, job: Job, inputs: list[Any], outputs: list[Any]) -> Any:
    return RunEvent(
        eventType=state,
        eventTime=_now(),
        run=Run(runId=run_id),
        job=job,
        inputs=inputs,
        outputs=outputs,
        producer=PRODUCER,
    )


def _emit(client: OpenLineageClient, events: Iterable[Any]) -> None:
    for event in events:
        try:
            client.emit(event)
        except Exception:
            log.warning("could not emit an OpenLineage %s event", event.eventType, exc_info=True)


# -- publishing ------------------------------------------------------------------------------


def _parents(
    resolve: Callable[[str], DatasetVersion] | None, url: str | None, staged: DatasetVersion
) -> list[Any]:
    """The publish run's inputs: the version's provenance (its parents, resolved for their
    facets, and its raw sources), else what its metadata names (``parents``, ``sources``)."""
    provenance = staged.provenance
    metadata = staged.metadata
    parents: Any = [p.name for p in provenance.parents] or metadata.get("parents") or ()
    sources: Any = [s.uri for s in provenance.sources] or metadata.get("sources") or ()
    inputs: list[Any] = []
    for ref in [parents] if isinstance(parents, str) else parents:
        try:
            parent = resolve(str(ref)) if resolve is not None else None
        except Exception:
            parent = None
        if parent is not None:
            inputs.append(dataset_of(parent, url))
        else:
            inputs.append(InputDataset(namespace=_service_namespace(url), name=str(ref)))
    for uri in [sources] if isinstance(sources, str) else sources:
        parts = urlsplit(str(uri))
        space = f"{parts.scheme}://{parts.netloc}" if parts.scheme else "file"
        inputs.append(InputDataset(namespace=space, name=parts.path or str(uri)))
    return inputs


class PublishRun:
    """The OpenLineage run of one publish: :meth:`start` before the commit, then
    :meth:`complete` with the committed version or :meth:`fail`.

    ``resolve`` resolves the parents the version's metadata names; ``url`` is the service's.
    """

    def __init__(
        self,
        staged: DatasetVersion,
        *,
        url: str | None = None,
        resolve: Callable[[str], DatasetVersion] | None = None,
    ) -> None:
        self.url = url
        self.run_id = str(uuid.uuid4())
        self.job = _job(f"publish.{staged.dataset}", "PUBLISH")
        self.staged = staged
        self.lineage = lineage_client()
        self.inputs = _parents(resolve, url, staged)

    def start(self) -> None:
        _emit(self.lineage, [_event(RunState.START, self.run_id, self.job, self.inputs, [])])

    def complete(self, version: DatasetVersion) -> None:
        output = dataset_of(version, self.url, output=True)
        event = _event(RunState.COMPLETE, self.run_id, self.job, self.inputs, [output])
        _emit(self.lineage, [event])

    def fail(self) -> None:
        _emit(self.lineage, [_event(RunState.FAIL, self.run_id, self.job, self.inputs, [])])


def publish_events(
    staged: DatasetVersion,
    *,
    url: str | None = None,
    resolve: Callable[[str], DatasetVersion] | None = None,
) -> PublishRun:
    """Start the OpenLineage run of publishing ``staged`` (START is emitted now)."""
    run = PublishRun(staged, url=url, resolve=resolve)
    run.start()
    return run


# -- training ----------------------------------------------------------------------------------


def training_events(client: Client, saved: Any) -> list[Any]:
    """The START and COMPLETE events of one tracked save (inputs: the versions the checkpoint
    consumed; output: the checkpoint)."""
    ref = saved.ref
    run_id = str(uuid.uuid5(_RUN_NAMESPACE, str(ref)))
    job = _job(f"train.{ref.model}", "TRAIN")
    inputs = []
    for name in dict.fromkeys(str(d["version"]) for d in saved.body.get("data") or ()):
        try:
            inputs.append(dataset_of(client.resolve(name), client.url))
        except Exception:
            inputs.append(InputDataset(namespace=_service_namespace(client.url), name=name))
    output = OutputDataset(
        namespace=_service_namespace(client.url) + "/models", name=str(ref), facets={}
    )
    return [
        _event(RunState.START, run_id, job, inputs, []),
        _event(RunState.COMPLETE, run_id, job, inputs, [output]),
    ]


def emit_training(client: Client, saved: Any) -> None:
    """Emit :func:`training_events` for one tracked save."""
    _emit(lineage_client(), training_events(client, saved))
