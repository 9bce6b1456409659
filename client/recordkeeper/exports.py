"""Self-describing SavedModel exports: the lineage of a checkpoint, written into its exports.

A tracked manager writes ``assets.extra/recordkeeper.json`` into every SavedModel export it
registers (``assets.extra`` is TensorFlow Serving's folder for files that travel with a model
and are not loaded by it).  The file says what trained the model — data versions, content
digests, roles and splits, the checkpoint's identity (``model@run/ckpt-N``, step, URI) and the
registry it was recorded in — so an export copied to a serving bucket still answers "which data
trained you?" with no service to ask: :func:`model_lineage` reads it back from any path fsspec
reads (local, ``gs://``, ``s3://``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from recordkeeper.core.errors import InvalidInput, StorageError
from recordkeeper.storage import join_uri, open_read, open_write, to_uri

__all__ = ["LINEAGE_FILE", "ModelLineage", "model_lineage", "write_model_lineage"]

#: Where an export keeps its lineage, relative to the export directory.
LINEAGE_FILE = "assets.extra/recordkeeper.json"
FORMAT = "rk-model-lineage-1"


@dataclass(frozen=True)
class ModelLineage:
    """What trained a SavedModel export, as written at save time.

    ``checkpoint`` is ``model@run/ckpt-N``; ``data`` one entry per (version, role) with
    ``version``, ``content_digest``, ``role`` and ``splits`` — the checkpoint's own segment;
    ``versions`` every version along its chain of parents when the service answered (else the
    segment's); ``registry`` the service URL it was registered with.
    """

    model: str
    run: str | None
    checkpoint: str
    step: int | None
    checkpoint_uri: str | None
    export: str
    export_uri: str
    data: tuple[Mapping[str, Any], ...]
    versions: tuple[str, ...]
    registry: str | None
    written_at: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """``model@run/ckpt-N`` (``model/ckpt-N`` without a run)."""
        run = f"@{self.run}" if self.run else ""
        return f"{self.model}{run}/{self.checkpoint}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "model": self.model,
            "run": self.run,
            "checkpoint": self.checkpoint,
            "ref": self.ref,
            "step": self.step,
            "checkpoint_uri": self.checkpoint_uri,
            "export": self.export,
            "export_uri": self.export_uri,
            "data": [dict(d) for d in self.data],
            "versions": list(self.versions),
            "registry": self.registry,
            "written_at": self.written_at,
            **({"extra": dict(self.extra)} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any], where: str) -> ModelLineage:
        if body.get("format") != FORMAT:
            raise InvalidInput(f"{where} is not a recordkeeper model lineage ({FORMAT})")
        try:
            return cls(
                model=str(body["model"]),
                run=body.get("run"),
                checkpoint=str(body["checkpoint"]),
                step=body.get("step"),
                checkpoint_uri=body.get("checkpoint_uri"),
                export=str(body["export"]),
                export_uri=str(body["export_uri"]),
                data=tuple(dict(d) for d in body.get("data") or ()),
                versions=tuple(str(v) for v in body.get("versions") or ()),
                registry=body.get("registry"),
                written_at=str(body["written_at"]),
                extra=dict(body.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(f"{where} is not a valid model lineage: {exc}") from None


def write_model_lineage(
    export_uri: str,
    *,
    model: str,
    run: str | None,
    checkpoint: str,
    step: int | None,
    checkpoint_uri: str | None,
    export: str,
    data: Sequence[Mapping[str, Any]],
    versions: Sequence[str] = (),
    registry: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ModelLineage:
    """Write ``assets.extra/recordkeeper.json`` into the export at ``export_uri``."""
    lineage = ModelLineage(
        model=model,
        run=run,
        checkpoint=checkpoint,
        step=step,
        checkpoint_uri=checkpoint_uri,
        export=export,
        export_uri=export_uri,
        data=tuple(
            {k: d.get(k) for k in ("version", "content_digest", "role", "splits")} for d in data
        ),
        versions=tuple(versions) or tuple(dict.fromkeys(str(d["version"]) for d in data)),
        registry=registry,
        written_at=datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z"),
    )
    target = join_uri(export_uri.rstrip("/"), LINEAGE_FILE)
    with open_write(target, storage_options) as sink:
        sink.write(orjson.dumps(lineage.to_json(), option=orjson.OPT_INDENT_2))
    return lineage


def model_lineage(path: str, *, storage_options: Mapping[str, Any] | None = None) -> ModelLineage:
    """The lineage written into the SavedModel export at ``path`` (a local path or a URL),
    read offline: no service is asked.

    Raises :class:`~recordkeeper.errors.StorageError` (reason ``missing``) when the export has
    no ``assets.extra/recordkeeper.json`` — it was not saved by a tracked manager — and
    :class:`~recordkeeper.errors.InvalidInput` when the file is not one.
    """
    uri = join_uri(to_uri(path).rstrip("/"), LINEAGE_FILE)
    try:
        with open_read(uri, storage_options) as source:
            raw = source.read()
    except StorageError as exc:
        if exc.extra.get("reason") == "missing":
            raise StorageError(
                f"{path} has no {LINEAGE_FILE}: it was not exported by a tracked checkpoint "
                "manager (rk.tf.track) — or is not a SavedModel export directory",
                uri=uri,
                reason="missing",
            ) from None
        raise
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{uri} is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise InvalidInput(f"{uri} is not a JSON object")
    return ModelLineage.from_json(body, uri)
