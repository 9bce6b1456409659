"""SavedModel exports of tracked checkpoints: their lineage written in, read back, loaded.

* :class:`ExportLineageWriter` — the tracked manager's save hook that writes
  ``assets.extra/recordkeeper.json`` into every export it registered (:mod:`recordkeeper.exports`).
* :func:`model_lineage` — that file read back, offline.
* :func:`load_saved_model` — a registered export, by checkpoint reference and export name,
  checked and loaded with ``tf.saved_model.load``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from recordkeeper.core.errors import NotFound, RecordkeeperError, StorageError
from recordkeeper.exports import ModelLineage, model_lineage, write_model_lineage

if TYPE_CHECKING:
    from recordkeeper.client import Client
    from recordkeeper.tf.saves import SavedCheckpoint

__all__ = ["ExportLineageWriter", "ModelLineage", "load_saved_model", "model_lineage"]

log = logging.getLogger(__name__)


class ExportLineageWriter:
    """A save callback: after each save, every export the checkpoint registered gets its
    lineage (data versions with digests, roles, splits, the checkpoint's identity, the
    registry's URL) in ``assets.extra/recordkeeper.json``."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._digests: dict[str, str] = {}

    def __call__(self, saved: SavedCheckpoint) -> None:
        exports = saved.body.get("saved_models") or ()
        if not exports:
            return
        data = self._data_with_digests(saved)
        versions = self._chain_versions(saved)
        for export in exports:
            write_model_lineage(
                str(export["uri"]),
                model=saved.ref.model,
                run=saved.ref.run,
                checkpoint=saved.ref.checkpoint,
                step=saved.body.get("step"),
                checkpoint_uri=saved.body.get("uri"),
                export=str(export["name"]),
                data=data,
                versions=versions,
                registry=self._client.url,
            )

    def _data_with_digests(self, saved: SavedCheckpoint) -> list[dict[str, Any]]:
        if saved.info is not None:
            return [dict(d) for d in saved.info.data]
        entries = [dict(d) for d in saved.body.get("data") or ()]
        for entry in entries:  # queued: the service did not answer; ask for the digests
            name = str(entry["version"])
            if name not in self._digests:
                try:
                    version = self._client.resolve(name, shards=False)
                    self._digests[name] = str(version.content_digest)
                except RecordkeeperError:
                    continue
            entry["content_digest"] = self._digests[name]
        return entries

    def _chain_versions(self, saved: SavedCheckpoint) -> list[str]:
        """Every version along the checkpoint's chain (resumes, fine-tuning) when the service
        answers, else none (the segment's own versions are used)."""
        if saved.info is None:
            return []
        try:
            return list(self._client.lineage(saved.ref).versions)
        except RecordkeeperError:
            return []


def load_saved_model(
    checkpoint: str, *, name: str | None = None, client: Client | None = None, **load_kwargs: Any
) -> Any:
    """Load the SavedModel export ``name`` of a registered checkpoint (``model/ckpt-N`` or
    ``model@run/ckpt-N``) with ``tf.saved_model.load``.

    ``name`` may be omitted when the checkpoint has one export.  Raises
    :class:`~recordkeeper.errors.NotFound` when the checkpoint has no such export (listing
    those it has), and :class:`~recordkeeper.errors.StorageError` (reason ``missing``) when the
    checkpoint was deleted or the export's files are gone.
    """
    import tensorflow as tf

    from recordkeeper.client import Client

    client = client or Client()
    info = client.checkpoint(checkpoint)
    names = [e.name for e in info.saved_models]
    if name is None:
        if len(names) != 1:
            raise NotFound(
                f"{info.ref} has {len(names)} exports ({', '.join(names) or 'none'}); "
                "pass name= to choose one",
                exports=names,
            )
        name = names[0]
    export = next((e for e in info.saved_models if e.name == name), None)
    if export is None:
        raise NotFound(
            f"{info.ref} has no export named {name!r} (it has: {', '.join(names) or 'none'})",
            exports=names,
        )
    if info.deleted:
        raise StorageError(
            f"{info.ref} was deleted ({info.deleted_reason or 'deleted'} at {info.deleted_at}); "
            f"its export {name!r} is gone with it",
            uri=export.uri,
            reason="missing",
        )
    path = _local_path(export.uri)
    if not tf.io.gfile.exists(f"{path}/saved_model.pb"):
        raise StorageError(
            f"the export {name!r} of {info.ref} is not at {export.uri} any more",
            uri=export.uri,
            reason="missing",
        )
    return tf.saved_model.load(path, **load_kwargs)


def _local_path(uri: str) -> str:
    """``file://`` URIs as paths (what TensorFlow's file systems take); other URLs as they are.

    A ``file://`` URI's path is taken literally, as the storage layer takes it; an export
    registered before the tracked manager stopped percent-encoding paths
    (``data_version%3Dcoco_v3``) is found under its decoded path when only that exists.
    """
    import os
    from urllib.parse import unquote

    if not uri.startswith("file://"):
        return uri
    path = uri[len("file://") :]
    if "%" in path and not os.path.exists(path) and os.path.exists(unquote(path)):
        return unquote(path)
    return path
