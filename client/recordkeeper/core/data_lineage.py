"""Lineage through the data: a version's history (its parents, sources and producers, back to
the raw files) and the rules for finding what a source URI affects.

Shared by the service (which walks ``version_parents`` and answers each version's
:class:`HistoryEntry`) and the client and CLI (which read and print them).  Pure: no I/O.

A lineage answer of a checkpoint carries ``history``: one entry per version it trained on that
recorded provenance, and per ancestor of one (through parents, any depth).  Each entry says what
the version was made of; :func:`describe` prints it on one line, the way the issue asks::

    coco@v3 ← coco@v2 + add_person @ 3f2a9c1 ← gs://raw/coco/annotations.json

(the version, its parents — base first — its desc and producer commit, then its raw sources).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

__all__ = [
    "MAX_HISTORY_VERSIONS",
    "HistoryEntry",
    "describe",
    "history_lines",
    "order_history",
    "source_candidates",
    "source_matches",
]

#: Versions one walk of a data history visits at most: a guard (parents are committed before
#: their children, so there are no cycles), far beyond any real chain.  A walk that reaches it
#: answers what it found and says so (``history_truncated``).
MAX_HISTORY_VERSIONS = 100_000

_SHORT_COMMIT = 7


class HistoryEntry(NamedTuple):
    """What one version was made of: ``parents`` (``(name, ref, role)``, as recorded;
    :attr:`parents_base_first` to show them), ``sources`` (``{uri, identity}``), ``producer``
    (``{vcs, commit, ...}`` or None), ``params_digest``; ``depth`` is its distance (in parent
    links) from the versions asked about (0: one of them)."""

    version: str
    dataset: str
    number: int | None
    desc: str | None
    content_digest: str | None
    state: str
    depth: int
    parents: tuple[Mapping[str, Any], ...]
    sources: tuple[Mapping[str, Any], ...]
    producer: Mapping[str, Any] | None
    params_digest: str | None

    @property
    def ref(self) -> str:
        """``dataset@vN`` (the exact name when it has no number)."""
        return _short_ref(self.dataset, self.number, self.version)

    @property
    def parents_base_first(self) -> list[Mapping[str, Any]]:
        """``parents`` with the ``base`` parent first, the others in their recorded order (a
        writer given ``{"labels@v1": "labels", "coco@v4": "base"}`` recorded them so)."""
        return sorted(self.parents, key=lambda p: p.get("role") != "base")

    @property
    def commit(self) -> str | None:
        """The producer's commit, abbreviated (``+dirty`` for uncommitted changes)."""
        producer = self.producer or {}
        commit = producer.get("commit")
        if not commit:
            return None
        return str(commit)[:_SHORT_COMMIT] + ("+dirty" if producer.get("dirty") else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "dataset": self.dataset,
            "number": self.number,
            "desc": self.desc,
            "content_digest": self.content_digest,
            "state": self.state,
            "depth": self.depth,
            "parents": [dict(p) for p in self.parents],
            "sources": [dict(s) for s in self.sources],
            "producer": dict(self.producer) if self.producer is not None else None,
            "params_digest": self.params_digest,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> HistoryEntry:
        return cls(
            version=str(body["version"]),
            dataset=str(body["dataset"]),
            number=body.get("number"),
            desc=body.get("desc"),
            content_digest=body.get("content_digest"),
            state=str(body.get("state") or "committed"),
            depth=int(body.get("depth") or 0),
            parents=tuple(dict(p) for p in body.get("parents") or ()),
            sources=tuple(dict(s) for s in body.get("sources") or ()),
            producer=dict(body["producer"]) if body.get("producer") else None,
            params_digest=body.get("params_digest"),
        )


def _short_ref(dataset: str, number: int | None, name: str) -> str:
    return f"{dataset}@v{number}" if number is not None else name


def describe(entry: HistoryEntry) -> str:
    """``coco@v3 ← coco@v2 + add_person @ 3f2a9c1 ← gs://raw/coco/annotations.json``: the
    version, its parents (roles other than base in brackets), its desc and commit, its sources.
    A version that recorded nothing of where it came from reads ``coco@v1 (no provenance)``."""
    head = entry.ref
    inputs = []
    for parent in entry.parents_base_first:
        text = _short_ref(str(parent["dataset"]), parent.get("number"), str(parent["version"]))
        role = parent.get("role")
        inputs.append(text if role == "base" else f"{text} ({role})")
    change = " + ".join(inputs)
    if entry.desc:
        change = f"{change} + {entry.desc}" if change else entry.desc
    if entry.commit:
        if change:
            change = f"{change} @ {entry.commit}"
        else:
            head = f"{head} @ {entry.commit}"
    parts = [head, change] if change else [head]
    if entry.sources:
        parts.append(", ".join(str(s["uri"]) for s in entry.sources))
    if len(parts) == 1 and head == entry.ref:
        return f"{entry.ref} (no provenance)"
    return " ← ".join(parts)


def history_lines(history: Iterable[HistoryEntry]) -> list[str]:
    """One :func:`describe` line per entry, as a tree: each version the chain trained on
    (depth 0, by name), then its parents under it (base first), indented one step per parent
    link — so a line's parent is the nearest less indented line above it.  A version reached
    through several children is listed once, under the first."""
    entries = list(history)
    by_name = {e.version: e for e in entries}
    lines: list[str] = []
    seen: set[str] = set()
    # depth first, with an explicit stack: a chain of 100,000 versions is no recursion limit
    stack = [(e, 0) for e in sorted(entries, key=lambda e: e.version, reverse=True) if not e.depth]
    while stack:
        entry, level = stack.pop()
        if entry.version in seen:
            continue
        seen.add(entry.version)
        lines.append("  " * level + describe(entry))
        ups = [by_name.get(str(p.get("version"))) for p in entry.parents_base_first]
        stack.extend((up, level + 1) for up in reversed(ups) if up is not None)
    # entries no version of depth 0 reaches (an answer cut at its guard): nearest first
    for entry in sorted(entries, key=lambda e: (e.depth, e.version)):
        if entry.version not in seen:
            lines.append("  " * entry.depth + describe(entry))
    return lines


def source_candidates(uri: str) -> list[str]:
    """The recorded source URIs that hold ``uri``: itself (with and without a trailing ``/``)
    and every prefix it lies under (``gs://raw/coco/a.json`` → ``gs://raw/coco/``,
    ``gs://raw/coco``, ``gs://raw/``, ``gs://raw``), never the bare scheme."""
    text = uri.strip()
    out = [text]
    stripped = text.rstrip("/")
    if stripped and stripped != text:
        out.append(stripped)
    scheme, sep, rest = stripped.partition("://")
    if not sep:
        scheme, rest = "", stripped
    head = f"{scheme}://" if sep else ""
    pieces = rest.split("/")
    # file:///a/b: rest is "/a/b" → pieces ["", "a", "b"]; keep the leading "" as the root
    for end in range(len(pieces) - 1, 0, -1):
        prefix = "/".join(pieces[:end])
        if not prefix.strip("/") and not (prefix == "" and head == "file://"):
            continue
        out.append(f"{head}{prefix}/")
        if prefix:
            out.append(f"{head}{prefix}")
    return list(dict.fromkeys(p for p in out if p and p != head))


def source_matches(recorded: str, asked: str, *, prefix: bool) -> bool:
    """Whether a version that recorded the source ``recorded`` is affected by ``asked``: the
    same URI, a prefix ``asked`` lies under, or (``prefix``) a URI under ``asked``."""
    if recorded in source_candidates(asked):
        return True
    return prefix and recorded.startswith(asked)


def order_history(entries: Sequence[HistoryEntry]) -> list[HistoryEntry]:
    """Entries nearest first (depth), then by name: the order answers use."""
    return sorted(entries, key=lambda e: (e.depth, e.version))
