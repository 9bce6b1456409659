"""Provenance of a version: where it came from, written once, checked alike everywhere.

A version's provenance is given when it is staged, may be replaced while it is staged, and is
immutable once it is committed.  Its parts:

* ``parents`` — registered versions it was derived from (any dataset), each with a *role*:
  ``base`` (the version this one is a change of; at most one), ``source``, ``labels``, or any
  lowercase slug (``[a-z][a-z0-9_-]{0,31}``).  A request names a parent by any reference
  (``coco@v2``); the service stores and answers the version's name.
* ``sources`` — inputs outside the registry, by URI (a file or a prefix), each with a content
  *identity*: a digest over the listing of the objects under it (relative path, size and the
  backend's identity token — GCS generation, S3 ETag/VersionId, local mtime), or, on request,
  over their sha256.  The identity changes when a raw file changes, is added or removed.
* ``producer`` — the code: ``vcs`` (``git`` or ``unknown``), ``commit``, ``remote`` (never
  with credentials: :mod:`recordkeeper.core.secrets`), ``branch``, ``dirty`` and
  ``diff_digest`` (sha256 of the uncommitted diff), ``entry`` (the entry script relative to
  the repository root).
* ``params`` — a JSON object, stored canonically (:func:`canonical_params`) with its digest.
* ``command`` — the command line, its secrets redacted by the client and again here
  (:func:`~recordkeeper.core.secrets.redact_command`).
* ``environment`` — Python, TensorFlow and recordkeeper versions, nothing else (never
  environment variables).
* ``note`` — free text.

:func:`validate_provenance` is the one check: the client runs it before sending, the service
on every request; both answer the same codes (``invalid_provenance``, ``invalid_params``, and
``invalid_request`` for text outside the text policy).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from recordkeeper.core.canonical import canonical_json
from recordkeeper.core.errors import InvalidParams, InvalidProvenance, InvalidRequest
from recordkeeper.core.limits import (
    MAX_INT64,
    MAX_REFERENCE_LENGTH,
    MAX_URI_LENGTH,
    MIN_INT64,
    invalid_text_at,
    is_valid_text,
)
from recordkeeper.core.secrets import (
    redact_command,
    strip_credentials,
    strip_userinfo,
    url_credentials,
)

__all__ = [
    "ENVIRONMENT_KEYS",
    "MAX_COMMAND_ARGS",
    "MAX_COMMAND_BYTES",
    "MAX_NOTE_LENGTH",
    "MAX_PARAMS_BYTES",
    "MAX_PARAMS_DEPTH",
    "MAX_PARENTS",
    "MAX_SOURCES",
    "PRODUCER_KEYS",
    "ROLES",
    "SOURCE_METHODS",
    "canonical_params",
    "check_role",
    "digest_bytes",
    "empty_provenance",
    "has_provenance",
    "is_role",
    "parse_parent_spec",
    "source_query",
    "source_uri_problem",
    "strip_credentials",
    "strip_userinfo",
    "validate_provenance",
]

#: The roles with a meaning of their own; any other lowercase slug is accepted as well.
ROLES: tuple[str, ...] = ("base", "source", "labels")
MAX_PARENTS = 32
MAX_SOURCES = 256
#: Canonical params, in UTF-8 bytes, and their nesting depth.
MAX_PARAMS_BYTES = 64 * 1024
MAX_PARAMS_DEPTH = 32
MAX_NOTE_LENGTH = 4000
MAX_COMMAND_ARGS = 512
MAX_COMMAND_BYTES = 16 * 1024
#: A branch, a remote, an entry path, a version string.
_MAX_FIELD = 1024
ENVIRONMENT_KEYS: tuple[str, ...] = ("python", "tensorflow", "recordkeeper")
PRODUCER_KEYS: tuple[str, ...] = (
    "vcs",
    "commit",
    "remote",
    "branch",
    "dirty",
    "diff_digest",
    "entry",
)
#: ``listing``: digest over (path, size, identity token) of each object; ``sha256``: over
#: (path, size, sha256 of the bytes) — a full read, on request only.
SOURCE_METHODS: tuple[str, ...] = ("listing", "sha256")
_SOURCE_IDENTITY_KEYS = ("method", "digest", "files", "size")

_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_VERSION_TEXT = re.compile(r"[A-Za-z0-9.+_-]{1,64}")
_TOP_KEYS = (
    "parents",
    "sources",
    "producer",
    "params",
    "params_digest",
    "command",
    "environment",
    "note",
)


def is_role(text: object) -> bool:
    """True for a parent role: ``base``, ``source``, ``labels`` or a lowercase slug."""
    return isinstance(text, str) and _ROLE.fullmatch(text) is not None


def check_role(role: object, where: str) -> str:
    """``role`` if it is a parent role (:func:`is_role`), else ``invalid_provenance`` naming
    ``where`` and what a role may be: the one message for the client, the CLI and the service."""
    if not is_role(role):
        raise InvalidProvenance(
            f"{where}: {str(role)[:40]!r} is not a role (base, source, labels or a lowercase "
            "slug [a-z][a-z0-9_-]{0,31})"
        )
    assert isinstance(role, str)
    return role


def digest_bytes(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def empty_provenance() -> dict[str, Any]:
    """The provenance of a version that recorded none (every part empty or null)."""
    return {
        "parents": [],
        "sources": [],
        "producer": None,
        "params": None,
        "params_digest": None,
        "command": None,
        "environment": None,
        "note": None,
    }


def parse_parent_spec(text: str, default_role: str = "source") -> tuple[str, str]:
    """``("coco@v2", "base")`` from the CLI's ``coco@v2:base``; a spec without a role gets
    ``default_role``.  A digest reference (``coco@sha256:9f2c…``) keeps its own colon."""
    head, sep, tail = text.rpartition(":")
    if not sep or head.endswith("@sha256") or not head:
        return text, default_role
    return head, check_role(tail, f"parent {text[:100]!r}")


# -- params ---------------------------------------------------------------------------------


def _canonical_value(value: Any, where: str, depth: int) -> Any:
    if depth > MAX_PARAMS_DEPTH:
        raise InvalidParams(f"{where}: params nest deeper than {MAX_PARAMS_DEPTH} levels")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not MIN_INT64 <= value <= MAX_INT64:
            raise InvalidParams(f"{where}: integers are 64-bit signed")
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidParams(f"{where}: {value!r} has no JSON form (numbers are finite)")
        return float(value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        keys = list(value)
        for key in keys:
            if not isinstance(key, str):
                raise InvalidParams(
                    f"{where}: key {key!r} is a {type(key).__name__}; JSON keys are strings"
                )
        for key in sorted(keys):
            out[key] = _canonical_value(value[key], f"{where}.{key}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_canonical_value(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise InvalidParams(
        f"{where}: a {type(value).__name__} has no canonical JSON form "
        "(params hold objects, arrays, strings, numbers, booleans and null)"
    )


def canonical_params(value: Any) -> tuple[dict[str, Any], bytes, str]:
    """``(params, canonical bytes, "sha256:…")`` of a JSON-able mapping, or
    :class:`~recordkeeper.core.errors.InvalidParams`.

    Canonical: keys sorted, no whitespace, UTF-8
    (:func:`recordkeeper.core.canonical.canonical_json`); the digest is over these bytes, so the
    same parameters written in another order, or read from YAML instead of JSON, have the same
    digest.  Values that have no JSON form (a date, a
    set, bytes, NaN) are refused rather than converted.
    """
    if not isinstance(value, Mapping):
        raise InvalidParams(
            f"params must be a JSON object (a mapping), not a {type(value).__name__}"
        )
    normalized = _canonical_value(value, "params", 1)
    where = invalid_text_at(normalized, "params")
    if where is not None:
        raise InvalidRequest(f"{where}: text must be Unicode text without NUL")
    data = canonical_json(normalized)
    if len(data) > MAX_PARAMS_BYTES:
        raise InvalidParams(
            f"params are {len(data)} bytes as canonical JSON; at most {MAX_PARAMS_BYTES} are "
            "allowed (keep large inputs in a source and refer to it)"
        )
    return normalized, data, digest_bytes(data)


# -- the document ---------------------------------------------------------------------------


def _text(value: Any, where: str, *, limit: int = _MAX_FIELD, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidProvenance(f"{where} must be a non-empty string")
    if len(value) > limit:
        raise InvalidProvenance(f"{where} is longer than {limit} characters")
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT64:
        raise InvalidProvenance(f"{where} must be a non-negative 64-bit integer")
    return value


def _parents(value: Any) -> list[dict[str, str]]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidProvenance("parents must be a list of {ref, role}")
    if len(value) > MAX_PARENTS:
        raise InvalidProvenance(f"at most {MAX_PARENTS} parents are allowed")
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        where = f"parents[{i}]"
        if not isinstance(item, Mapping) or set(item) - {"ref", "role"}:
            raise InvalidProvenance(f"{where} must be an object with 'ref' and 'role'")
        ref = _text(item.get("ref"), f"{where}.ref", limit=MAX_REFERENCE_LENGTH, optional=False)
        role = item.get("role", "source")
        check_role(role, f"{where}.role")
        assert ref is not None
        if ref in seen:
            raise InvalidProvenance(f"{where}: {ref!r} is named twice")
        seen.add(ref)
        out.append({"ref": ref, "role": role})
    if sum(1 for p in out if p["role"] == "base") > 1:
        raise InvalidProvenance("at most one parent is the base (role 'base')")
    return out


#: Characters a source URI may not hold: control characters (C0, DEL, C1: a terminal would
#: act on ESC and CSI sequences when `recordkeeper show` prints the source), format characters
#: (zero-width, bidirectional overrides: the URI would not show what it names) and line or
#: paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def source_uri_problem(uri: str) -> str | None:
    """Why ``uri`` cannot be a recorded source, or be asked about as one (impact, versions
    from a source); None when it can.

    Sources are matched by their text (a recorded ``gs://raw/coco/`` holds
    ``gs://raw/coco/a.json``), so a ``.`` or ``..`` segment — also percent-encoded, or in
    full-width dots — would make a URI name another place than its text lies under, and
    hidden characters would make two URIs that look alike differ.  Spaces, queries and any
    scheme are kept: a source is described, never opened by the service.
    """
    if not uri.isprintable():
        for char in uri:
            if char != " " and unicodedata.category(char) in _HIDDEN_CATEGORIES:
                return (
                    f"URIs hold no control, format or separator characters (U+{ord(char):04X}, "
                    f"{unicodedata.name(char, 'a control character')})"
                )
    _, sep, rest = uri.partition("://")
    path = rest if sep else uri
    for segment in unquote(path).split("/"):
        if segment in (".", "..") or unicodedata.normalize("NFKC", segment) in (".", ".."):
            return f"URIs have no {segment!r} path segment (write the path it stands for)"
    return None


def source_query(value: str) -> str:
    """A source URI as asked about (impact, the lineage graph, versions from a source): stripped
    of surrounding spaces and of credentials (:func:`strip_credentials`: the client records a
    source without them, so asking with the URL used to list it finds it, and the answer never
    echoes a secret).  Refused (:class:`InvalidRequest`) when empty, over the URI limit, not
    valid text, or with a problem (:func:`source_uri_problem`) no recorded source can have."""
    text = value.strip()
    if not text or len(text.encode("utf-8", "surrogatepass")) > MAX_URI_LENGTH:
        raise InvalidRequest(
            f"source must be a URI of 1 to {MAX_URI_LENGTH} bytes of valid text, "
            f"got {value[:200]!r}"
        )
    if not is_valid_text(text):
        raise InvalidRequest(f"source {text[:200]!r} is not valid text (a lone surrogate, a NUL)")
    problem = source_uri_problem(text)
    if problem is not None:
        raise InvalidRequest(f"source {text[:200]!r}: {problem}")
    return strip_credentials(text)


def _source_uri(value: Any, where: str) -> str:
    uri = _text(value, where, limit=MAX_URI_LENGTH, optional=False)
    assert uri is not None
    if len(uri.encode("utf-8", "surrogatepass")) > MAX_URI_LENGTH:
        raise InvalidProvenance(f"{where} is longer than {MAX_URI_LENGTH} bytes")
    credentials = url_credentials(uri)
    if credentials is not None:
        raise InvalidProvenance(f"{where}: URIs must not carry credentials ({credentials})")
    problem = source_uri_problem(uri)
    if problem is not None:
        raise InvalidProvenance(f"{where}: {problem}")
    return uri


def _sources(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidProvenance("sources must be a list of {uri, identity}")
    if len(value) > MAX_SOURCES:
        raise InvalidProvenance(f"at most {MAX_SOURCES} sources are allowed")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        where = f"sources[{i}]"
        if not isinstance(item, Mapping) or set(item) - {"uri", "identity"}:
            raise InvalidProvenance(f"{where} must be an object with 'uri' and 'identity'")
        uri = _source_uri(item.get("uri"), f"{where}.uri")
        if uri in seen:
            raise InvalidProvenance(f"{where}: {uri!r} is named twice")
        seen.add(uri)
        identity = item.get("identity")
        if identity is not None:
            if not isinstance(identity, Mapping) or set(identity) != set(_SOURCE_IDENTITY_KEYS):
                raise InvalidProvenance(
                    f"{where}.identity must be null or an object with exactly "
                    + ", ".join(_SOURCE_IDENTITY_KEYS)
                )
            method = identity["method"]
            if method not in SOURCE_METHODS:
                raise InvalidProvenance(f"{where}.identity.method must be listing or sha256")
            digest = identity["digest"]
            if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
                raise InvalidProvenance(f"{where}.identity.digest must be sha256:<64 hex>")
            identity = {
                "method": method,
                "digest": digest,
                "files": _int(identity["files"], f"{where}.identity.files"),
                "size": _int(identity["size"], f"{where}.identity.size"),
            }
        out.append({"uri": uri, "identity": identity})
    return out


def _producer(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - set(PRODUCER_KEYS):
        raise InvalidProvenance(
            "producer must be an object with some of " + ", ".join(PRODUCER_KEYS)
        )
    vcs = value.get("vcs", "unknown")
    if vcs not in ("git", "unknown"):
        raise InvalidProvenance("producer.vcs must be 'git' or 'unknown'")
    commit = value.get("commit")
    if commit is not None and (not isinstance(commit, str) or not _COMMIT.fullmatch(commit)):
        raise InvalidProvenance("producer.commit must be a full lowercase hex commit id")
    remote = _text(value.get("remote"), "producer.remote")
    credentials = None if remote is None else url_credentials(remote)
    if credentials is not None:
        raise InvalidProvenance(f"producer.remote must not carry credentials ({credentials})")
    dirty = value.get("dirty")
    if dirty is not None and not isinstance(dirty, bool):
        raise InvalidProvenance("producer.dirty must be true, false or null")
    diff_digest = value.get("diff_digest")
    if diff_digest is not None and (
        not isinstance(diff_digest, str) or not _DIGEST.fullmatch(diff_digest)
    ):
        raise InvalidProvenance("producer.diff_digest must be sha256:<64 hex>")
    if diff_digest is not None and dirty is not True:
        raise InvalidProvenance("producer.diff_digest is given only for a dirty work tree")
    entry = _text(value.get("entry"), "producer.entry")
    if entry is not None and (entry.startswith("/") or "\\" in entry or ".." in entry.split("/")):
        raise InvalidProvenance("producer.entry is a path relative to the repository root")
    if vcs == "unknown" and any(value.get(k) is not None for k in PRODUCER_KEYS if k != "vcs"):
        raise InvalidProvenance(
            "producer: an unknown producer ('vcs': 'unknown') has no git fields"
        )
    return {
        "vcs": vcs,
        "commit": commit,
        "remote": remote,
        "branch": _text(value.get("branch"), "producer.branch"),
        "dirty": dirty,
        "diff_digest": diff_digest,
        "entry": entry,
    }


def _command(value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or not all(isinstance(a, str) for a in value):
        raise InvalidProvenance("command must be a list of strings (the arguments)")
    if len(value) > MAX_COMMAND_ARGS:
        raise InvalidProvenance(f"command has more than {MAX_COMMAND_ARGS} arguments")
    if sum(len(a.encode("utf-8", "surrogatepass")) for a in value) > MAX_COMMAND_BYTES:
        raise InvalidProvenance(f"command is longer than {MAX_COMMAND_BYTES} bytes")
    return redact_command(value)


def _environment(value: Any) -> dict[str, str | None] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or set(value) - set(ENVIRONMENT_KEYS):
        raise InvalidProvenance(
            "environment holds only " + ", ".join(ENVIRONMENT_KEYS) + " versions"
        )
    out: dict[str, str | None] = {}
    for key in ENVIRONMENT_KEYS:
        text = value.get(key)
        if text is not None and (not isinstance(text, str) or not _VERSION_TEXT.fullmatch(text)):
            raise InvalidProvenance(f"environment.{key} must be a version string (2.21.0)")
        out[key] = text
    return out


def validate_provenance(value: Any) -> dict[str, Any]:
    """The provenance document ``value`` (as sent at stage) checked and normalised.

    Parents keep the reference as given (the service resolves them); params are made canonical
    and ``params_digest`` computed (a digest sent with them must be theirs: ``invalid_params``).
    """
    if value is None:
        return empty_provenance()
    if not isinstance(value, Mapping):
        raise InvalidProvenance("provenance must be an object")
    unknown = set(value) - set(_TOP_KEYS)
    if unknown:
        raise InvalidProvenance(
            f"provenance has no field {sorted(unknown)[0][:40]!r} (fields: {', '.join(_TOP_KEYS)})"
        )
    where = invalid_text_at(dict(value), "provenance")
    if where is not None:
        raise InvalidRequest(f"{where}: text must be Unicode text without NUL")
    params = value.get("params")
    params_digest = None
    if params is not None:
        params, _, params_digest = canonical_params(params)
        sent = value.get("params_digest")
        if sent is not None and sent != params_digest:
            raise InvalidParams(
                f"params_digest {str(sent)[:80]} is not the digest of the params' canonical form "
                f"({params_digest})"
            )
    elif value.get("params_digest") is not None:
        raise InvalidParams("params_digest is given without params")
    note = _text(value.get("note"), "note", limit=MAX_NOTE_LENGTH)
    return {
        "parents": _parents(value.get("parents")),
        "sources": _sources(value.get("sources")),
        "producer": _producer(value.get("producer")),
        "params": params,
        "params_digest": params_digest,
        "command": _command(value.get("command")),
        "environment": _environment(value.get("environment")),
        "note": note,
    }


def has_provenance(document: Mapping[str, Any]) -> bool:
    """True unless every part of ``document`` is empty."""
    return any(document.get(k) for k in _TOP_KEYS)
