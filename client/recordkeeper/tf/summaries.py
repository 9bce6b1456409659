"""TensorBoard summaries of the data each checkpoint trained on (a tracked manager's save hook).

At every save of a tracked manager, :class:`DataSummaries` writes into the run's log directory:

* ``recordkeeper/data`` (text, at the checkpoint's step): a Markdown table of the data versions
  the checkpoint trained on — role, version, content digest, splits — and the checkpoint's
  reference (``model@run/ckpt-N``);
* ``recordkeeper/<metric>`` (scalars, at the checkpoint's step) for the metrics passed to
  ``save(metrics=...)``;
* once per run, a TensorBoard **HParams** entry whose hyperparameters are the data versions by
  role (``data/train = coco_20231015_v3``), so the HParams dashboard groups and compares runs by
  the data they trained on.

``rk.tf.track(..., tensorboard=False)`` turns it off; ``tensorboard="logs/run1"`` chooses the
directory (default: ``<checkpoint directory>/recordkeeper``, so ``tensorboard --logdir`` over a
folder of runs shows one TensorBoard run per training run).  The HParams entry needs the
``tensorboard`` package (the ``tf`` extra installs it); without it only the text and scalars are
written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recordkeeper.tf.saves import SavedCheckpoint

__all__ = ["DEFAULT_SUBDIRECTORY", "DataSummaries", "data_hparams", "data_table"]

log = logging.getLogger(__name__)

#: Where the summaries go, under the checkpoint directory, unless a directory is given.
DEFAULT_SUBDIRECTORY = "recordkeeper"


def data_table(ref: str, data: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown table written as the ``recordkeeper/data`` text summary."""
    lines = [
        f"**{ref}** trained on:",
        "",
        "| role | version | content digest | splits |",
        "|---|---|---|---|",
    ]
    for entry in data:
        splits = ", ".join(entry.get("splits") or ()) or "all"
        digest = entry.get("content_digest") or "(not known yet)"
        lines.append(f"| {entry.get('role', '')} | {entry['version']} | `{digest}` | {splits} |")
    if not data:
        lines.append("| | (no data recorded) | | |")
    return "\n".join(lines)


def data_hparams(data: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Hyperparameters naming the data: ``{"data/train": "coco_20231015_v3", ...}`` (several
    versions of one role are joined with ``+``), plus their digests (``data/train/digest``)."""
    by_role: dict[str, list[Mapping[str, Any]]] = {}
    for entry in data:
        by_role.setdefault(str(entry.get("role") or "data"), []).append(entry)
    params: dict[str, str] = {}
    for role, entries in sorted(by_role.items()):
        params[f"data/{role}"] = "+".join(str(e["version"]) for e in entries)
        digests = [str(e.get("content_digest") or "") for e in entries]
        if all(digests):
            params[f"data/{role}/digest"] = "+".join(digests)
    return params


class DataSummaries:
    """A save callback writing the data summaries of each checkpoint to ``logdir``.

    ``digests`` maps version names to content digests already known (the tracked manager
    passes what it resolved); others come from the service's answer to the registration.
    """

    def __init__(self, logdir: str, *, digests: Mapping[str, str] | None = None) -> None:
        import tensorflow as tf

        self.logdir = logdir
        self._digests = dict(digests or {})
        self._writer = tf.summary.create_file_writer(logdir)
        self._hparams_written = False

    def __call__(self, saved: SavedCheckpoint) -> None:
        import tensorflow as tf

        data = self._data_of(saved)
        step = int(saved.body.get("step") or 0)
        with self._writer.as_default(step=step):
            if not self._hparams_written:
                self._write_hparams(data)
            tf.summary.text("recordkeeper/data", data_table(str(saved.ref), data))
            for name, value in (saved.body.get("metrics") or {}).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    tf.summary.scalar(f"recordkeeper/{name}", float(value))
        self._writer.flush()

    def _data_of(self, saved: SavedCheckpoint) -> list[dict[str, Any]]:
        """The checkpoint's data entries with digests: the service's answer when there is one,
        else the registration as sent (digests known from resolving)."""
        if saved.info is not None and saved.info.data:
            entries = [dict(d) for d in saved.info.data]
        else:
            entries = [dict(d) for d in saved.body.get("data") or ()]
        for entry in entries:
            digest = entry.get("content_digest") or self._digests.get(str(entry["version"]))
            if digest:
                entry["content_digest"] = digest
                self._digests[str(entry["version"])] = digest
        return entries

    def _write_hparams(self, data: Sequence[Mapping[str, Any]]) -> None:
        try:
            from tensorboard.plugins.hparams import api as hp
        except ImportError:
            log.info("tensorboard is not installed: no HParams entry in %s", self.logdir)
            self._hparams_written = True
            return
        hp.hparams(data_hparams(data), trial_id=os.path.basename(os.path.dirname(self.logdir)))
        self._hparams_written = True

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


def default_logdir(checkpoint_directory: str) -> str:
    """``<checkpoint directory>/recordkeeper``."""
    return checkpoint_directory.rstrip("/") + "/" + DEFAULT_SUBDIRECTORY
