"""Storage URIs: normalisation and the allow-list of storage roots (one check, both sides).

The service checks every storage root and shard URI with :meth:`AllowedRoots.check`; the
client's pre-checks (publish, gc) ask :meth:`AllowedRoots.allows` with the roots the service
reports, so both answer the same for one URI.

Every URI goes through :func:`normalize_uri`, which
refuses anything that could escape a root by path tricks (``..`` segments, also percent-encoded
or in full-width dots, backslashes, control characters), anything that does not show what it
names (Unicode format characters such as zero-width spaces and bidirectional overrides; a
bucket or host that is not ASCII, e.g. with a full-width dot) and lower-cases the scheme.
:class:`AllowedRoots` then compares normalised URIs as prefixes ending in ``/``, so
``s3://ml-data`` does not admit ``s3://ml-data-evil/``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import unquote

from recordkeeper.core.errors import StorageRootNotAllowed
from recordkeeper.core.limits import MAX_URI_LENGTH

__all__ = [
    "MAX_URI_LENGTH",
    "AllowedRoots",
    "UriError",
    "UriEscapes",
    "allowed_root",
    "as_root",
    "check_object_uri",
    "configured_roots",
    "enclosing_prefixes",
    "intersect_roots",
    "normalize_uri",
    "path_is_inside",
    "storage_root_of",
]

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
_CONTROL_RE = re.compile(r"[\x00-\x20\x7f\\]")
# A relative object name that needs no closer look: none of the characters normalize_uri
# refuses or decodes ('%'), no query or fragment (path segments are checked separately).
_PLAIN_NAME_RE = re.compile(r"[^\x00-\x20\x7f\\?#%]+")
# The same characters as bytes, but for "\n", which separates the names of a batch
# (_plain_names); UTF-8 writes any character outside ASCII in bytes of 0x80 and above.
_NOT_PLAIN_BYTES = bytes([*range(0x0A), *range(0x0B, 0x21), 0x7F]) + b"\\?#%"
# In b"\n" + b"\n".join(names) + b"\n": a name that starts or ends with "/" or holds "//",
_NOT_PLAIN_PARTS = (b"\n/", b"/\n", b"//")
# ... or has a "." or ".." segment (as the per-name check reads "/{name}/").
_DOT_PARTS = (b"/./", b"/../", b"\n./", b"\n../", b"/.\n", b"/..\n", b"\n.\n", b"\n..\n")


def _invisible(text: str) -> str | None:
    """The first Unicode format character (category Cf: zero-width spaces and joiners, the
    bidirectional embeddings, overrides and isolates, the BOM, ...) in ``text``, if any."""
    if text.isascii():
        return None
    return next((char for char in text if unicodedata.category(char) == "Cf"), None)


class UriError(ValueError):
    """A URI is malformed; the message says why."""


class UriEscapes(UriError):
    """A URI has ``.``/``..`` segments that could climb out of a root."""


def normalize_uri(uri: str) -> str:
    """Return ``uri`` with a lower-case scheme, or raise :class:`UriError`.

    Requires ``scheme://``; refuses whitespace, control characters, backslashes, and ``.``/``..``
    path segments (also when percent-encoded), and URIs longer than :data:`MAX_URI_LENGTH`.
    Empty segments (``a//b``) are refused too, so prefix comparison cannot be fooled.
    """
    if not isinstance(uri, str) or not uri:
        raise UriError("URI must be a non-empty string")
    if len(uri.encode("utf-8", "surrogatepass")) > MAX_URI_LENGTH:
        raise UriError(f"URI is longer than {MAX_URI_LENGTH} bytes")
    match = _SCHEME_RE.fullmatch(uri)
    if match is None:
        raise UriError(f"{_shown(uri)} has no scheme; write e.g. file:///data/x or s3://bucket/x")
    scheme, rest = match[1].lower(), match[2]
    decoded = unquote(rest)
    if _CONTROL_RE.search(rest) or _CONTROL_RE.search(decoded):
        raise UriError(f"{_shown(uri)} contains whitespace, a control character or a backslash")
    invisible = _invisible(rest) or _invisible(decoded)
    if invisible is not None:
        raise UriError(
            f"{_shown(uri)} contains the invisible character U+{ord(invisible):04X} "
            f"({unicodedata.name(invisible, 'a format character')}): a URI must show what it "
            "names (zero-width and bidirectional controls are refused)"
        )
    if "?" in rest or "#" in rest:
        raise UriError(f"{_shown(uri)} must not carry a query or fragment")
    if scheme == "file":
        if not rest.startswith("/"):
            raise UriError(f"{_shown(uri)}: a file URI must be absolute (file:///path)")
        path = rest[1:]
    else:
        bucket, _, path = rest.partition("/")
        if not bucket:
            raise UriError(f"{_shown(uri)} has no bucket or host after '{scheme}://'")
        if not unquote(bucket).isascii():
            raise UriError(
                f"{_shown(uri)}: the bucket or host {_shown(unquote(bucket))} must be ASCII "
                "(a full-width dot or a look-alike letter names another bucket than it shows)"
            )
    segments = unquote(path).split("/")
    # A trailing '/' leaves one empty last segment, which is fine.
    inner = segments[:-1] if segments and segments[-1] == "" else segments
    for segment in inner:
        if unicodedata.normalize("NFKC", segment) in (".", ".."):  # also full-width dots
            raise UriEscapes(f"{_shown(uri)} contains a {segment!r} path segment")
        if segment == "" and path:
            raise UriError(f"{_shown(uri)} contains an empty path segment ('//')")
    return f"{scheme}://{rest}"


def as_root(uri: str) -> str:
    """Normalise ``uri`` and make it end with exactly one ``/``."""
    return normalize_uri(uri).rstrip("/") + "/"


def allowed_root(root: str) -> str:
    """``root`` as an allowed storage root (normalised, one trailing ``/``), or
    :class:`UriError` if it is malformed or would allow every location of its scheme (the whole
    file system, every bucket): the rule for ``RECORDKEEPER_ALLOWED_ROOTS`` and for the roots
    a client accepts from a service's ``/info``."""
    scheme, _, rest = normalize_uri(root).partition("://")
    if rest.strip("/") == "":
        raise UriError(
            f"{_shown(root)} would allow every {scheme} location (the whole file system or "
            "every bucket); name a directory or bucket"
        )
    return as_root(root)


def check_object_uri(uri: str, containers: Iterable[str] = (), what: str = "an object") -> str:
    """Return the normalised ``uri`` if it can name an object (a file), else raise
    :class:`UriError`.

    An object lies strictly inside its directories: it does not end with ``/`` and is not
    itself one of ``containers`` (storage roots, a version's prefix, compared as roots).
    """
    normalized = normalize_uri(uri)
    _refuse_directory(uri, normalized, {as_root(c) for c in containers}, what)
    return normalized


def _refuse_directory(uri: str, normalized: str, roots: Container[str], what: str) -> None:
    """The rule of :func:`check_object_uri` on an already normalised URI, ``roots`` being the
    containers as roots (:func:`as_root`)."""
    if normalized.endswith("/"):
        raise UriError(f"{_shown(uri)} ends with '/': it names a directory, not {what}")
    if normalized + "/" in roots:
        raise UriError(f"{_shown(uri)} is a directory (a storage root or prefix), not {what}")


def enclosing_prefixes(uri: str) -> tuple[str, ...]:
    """Every directory prefix (ending in ``/``) that ``uri`` lies at or under, outermost first.

    ``s3://b/ds/v/x.tfrecord`` → ``s3://b/``, ``s3://b/ds/``, ``s3://b/ds/v/``,
    ``s3://b/ds/v/x.tfrecord/``: the last one is the URI itself as a directory, so a storage
    prefix equal to the URI counts too.  ``uri`` is normalised first (:class:`UriError` if it
    cannot be).
    """
    normalized = normalize_uri(uri).rstrip("/")
    scheme, _, rest = normalized.partition("://")
    if scheme == "file":
        head, parts = "file:///", rest[1:].split("/")
    else:
        bucket, _, path = rest.partition("/")
        head, parts = f"{scheme}://{bucket}/", path.split("/") if path else []
    found = [head]
    for part in parts:
        if part:
            found.append(found[-1] + part + "/")
    return tuple(found)


def intersect_roots(trusted: Iterable[str], reported: Iterable[str]) -> tuple[str, ...]:
    """The roots inside both lists: each root of one that lies inside a root of the other.

    Deletions use this: the roots a service reports (which a lying service or proxy could
    widen to ``file:///``) intersected with the roots configured where the deletion runs.
    """
    ours, theirs = AllowedRoots.of(trusted), AllowedRoots.of(reported)
    both = [r for r in ours.roots if theirs.allows(r)]
    both += [r for r in theirs.roots if ours.allows(r) and r not in both]
    # A root inside another root of the result adds nothing.
    return tuple(sorted(r for r in both if not any(o != r and r.startswith(o) for o in both)))


def configured_roots(values: Iterable[str], setting: str) -> tuple[str, ...]:
    """Roots an operator configured (``RECORDKEEPER_ALLOWED_ROOTS``, the collector's
    ``--root``), normalised; :class:`UriError` for a malformed one, or one that would admit
    every location of its scheme (``file:///``, ``s3://``)."""
    roots = []
    for value in values:
        try:
            roots.append(allowed_root(value))
        except UriError as exc:
            raise UriError(f"{setting}: {exc}") from None
    return tuple(roots)


def storage_root_of(prefix: str) -> str:
    """The storage root a version's prefix ``{root}/{dataset}/{version}/`` lies in (two
    segments up, ending in ``/``); :class:`UriError` if there is no such root."""
    normalized = as_root(prefix)
    head, _, _ = normalized.rstrip("/").rpartition("/")
    root, _, _ = head.rpartition("/")
    if "://" not in root or root.endswith(":/") or root.endswith(":"):
        raise UriError(f"storage prefix {_shown(prefix)} is not {{root}}/{{dataset}}/{{version}}/")
    return root + "/"


def path_is_inside(path: str, directory: str) -> bool:
    """Whether the absolute, already resolved ``path`` is ``directory`` or lies under it
    (compared by whole segments: ``/data-evil`` is not inside ``/data``)."""
    base = directory.rstrip("/")
    return path == base or path.startswith(base + "/") or base == ""


def _plain_names(names: Sequence[str], room: int) -> bool:
    """True when every name would pass the per-name check of :meth:`AllowedRoots.check_objects`
    as plain (no closer look needed), found with a few scans in C of the names joined by
    ``"\n"`` instead of a regular expression per name; False sends them through the per-name
    check."""
    if not names:
        return True
    try:
        joined = ("\n" + "\n".join(names) + "\n").encode("utf-8", "surrogatepass")
    except TypeError:  # not all strings: the per-name check says which
        return False
    if joined.count(b"\n") != len(names) + 1:  # a name holds the separator
        return False
    if len(joined.translate(None, _NOT_PLAIN_BYTES)) != len(joined):  # a character to look at
        return False
    if not all(names) or max(map(len, names)) * 4 > room:  # empty, or maybe too long
        return False
    if b"/" in joined and any(part in joined for part in _NOT_PLAIN_PARTS):
        return False
    dots = b"/." in joined or b"\n." in joined  # a segment starting with "."
    return not (dots and any(part in joined for part in _DOT_PARTS))


def _shown(uri: str) -> str:
    return repr(uri if len(uri) <= 200 else uri[:200] + "…")


@dataclass(frozen=True)
class AllowedRoots:
    """The URI prefixes under which storage roots and shards may live."""

    roots: tuple[str, ...]

    @classmethod
    def of(cls, roots: Iterable[str]) -> AllowedRoots:
        return cls(tuple(as_root(r) for r in roots))

    def allows(self, uri: str) -> bool:
        """True if ``uri`` lies inside one of the roots.

        A malformed URI, or one with ``.``/``..`` segments, lies inside none.
        """
        try:
            target = normalize_uri(uri)
        except UriError:
            return False
        return self._contains(target)

    def _contains(self, normalized: str) -> bool:
        """:meth:`allows` of a URI :func:`normalize_uri` has answered (it answers itself for
        its answer: normalising is idempotent)."""
        target_dir = normalized if normalized.endswith("/") else normalized + "/"
        return any(target_dir.startswith(root) for root in self.roots)

    def check_objects(self, prefix: str, names: Iterable[str], what: str) -> None:
        """Check that every ``prefix + name`` names an object inside the roots, as
        :meth:`check` and :func:`check_object_uri` would, checking ``prefix`` once.

        For the shard lists a service answers (a page holds up to 10,000 names after one
        ``uri_prefix``).  Raises :class:`StorageRootNotAllowed` for a URI outside the roots or
        climbing out of them, :class:`UriError` for a malformed one.
        """
        if prefix and (not prefix.endswith("/") or not self.allows(prefix)):
            # A prefix common to objects under two roots (a derived version keeping its
            # base's shards and adding files from elsewhere) lies above both: each object is
            # then checked whole.
            names = [prefix + name for name in names]
            prefix = ""
        if prefix:
            self.check(prefix, what)
        room = MAX_URI_LENGTH - len(prefix.encode("utf-8", "surrogatepass"))
        names = names if isinstance(names, list | tuple) else list(names)
        if prefix and _plain_names(names, room):
            return
        for name in names:
            if not isinstance(name, str):
                raise UriError(f"{what}: {name!r} is not a string")
            simple = (
                prefix
                and _PLAIN_NAME_RE.fullmatch(name)
                and len(name) * 4 <= room  # at most 4 UTF-8 bytes a character
                and not name.endswith("/")
            )
            path = f"/{name}/"
            if simple and "/./" not in path and "/../" not in path and "//" not in path:
                continue
            check_object_uri(self.check(prefix + name, what), (), what)

    def check(self, uri: str, what: str) -> str:
        """Return the normalised ``uri`` or raise :class:`StorageRootNotAllowed`.

        Malformed URIs raise :class:`UriError`, except those with ``.``/``..`` segments, which
        are treated as outside every root.
        """
        try:
            normalized = normalize_uri(uri)
        except UriEscapes as exc:
            raise StorageRootNotAllowed(
                f"{what}: {exc}; it could escape the allowed storage roots",
                allowed_roots=list(self.roots),
            ) from None
        if not self._contains(normalized):
            raise StorageRootNotAllowed(
                f"{what} {_shown(uri)} is outside the allowed storage roots "
                f"({', '.join(self.roots)}); see RECORDKEEPER_ALLOWED_ROOTS",
                allowed_roots=list(self.roots),
            )
        return normalized

    def check_object(self, uri: str, what: str, kind: str = "an object") -> str:
        """``check_object_uri(self.check(uri, what), self.roots, kind)``, normalising ``uri``
        once (a shard registration: one URI of thousands); the same answers and errors."""
        normalized = self.check(uri, what)
        _refuse_directory(normalized, normalized, self._as_roots, kind)
        return normalized

    @cached_property
    def _as_roots(self) -> frozenset[str]:
        """The roots as :func:`check_object_uri` compares containers (computed once)."""
        return frozenset(as_root(r) for r in self.roots)
