"""Provenance of a version, captured where it is produced, read back as a value.

What a version records about where it came from (rules: :mod:`recordkeeper.core.provenance`):

* **parents** — registered versions it was derived from, each with a role;
* **sources** — raw inputs outside the registry, by URI, with a content identity computed from
  a listing (:func:`source_identity`: sizes plus each backend's identity token; no object is
  read) or, on request, from the objects' sha256;
* **producer** — the git commit, remote (without credentials), branch, dirty flag with a digest
  of the uncommitted changes, and the entry script, captured with the ``git`` command
  (:func:`capture_git`; no git, or not a repository: recorded as unknown, never an error);
* **params** — a mapping, or a YAML/JSON file (:func:`load_params`), stored canonically with a
  digest; **command** (arguments that look like secrets are redacted), **environment** (Python,
  TensorFlow and recordkeeper versions, never environment variables) and a **note**.

:func:`build_provenance` assembles the document ``client.publish(...)``, ``client.writer(...)``
and the Beam transforms send when they stage; :class:`Provenance` is what
``DatasetVersion.provenance`` answers, and :meth:`Provenance.check_sources` answers "did the raw
data change?".
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from recordkeeper.core.canonical import canonical_json
from recordkeeper.core.errors import InvalidParams, InvalidProvenance, InvalidRequest
from recordkeeper.core.provenance import (
    canonical_params,
    check_role,
    digest_bytes,
    parse_parent_spec,
    validate_provenance,
)
from recordkeeper.core.refs import parse_reference
from recordkeeper.core.secrets import redact_command, strip_credentials
from recordkeeper.core.version import __version__
from recordkeeper.progress import ProgressLike, byte_progress
from recordkeeper.storage import (
    open_read,
    profile_of,
    stat_file,
    storage_errors,
    to_uri,
    url_to_fs,
)

__all__ = [
    "Environment",
    "Parent",
    "Producer",
    "Provenance",
    "Source",
    "SourceCheck",
    "SourceIdentity",
    "build_provenance",
    "capture_environment",
    "capture_git",
    "command_line",
    "load_params",
    "source_identity",
    "source_uri",
]

#: How long one ``git`` call may take before the producer is recorded as unknown.
GIT_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class Parent:
    """A registered version this one was derived from."""

    name: str
    dataset: str
    number: int | None
    role: str

    @property
    def ref(self) -> str:
        """``coco@v2`` (the name when it has no number)."""
        return f"{self.dataset}@v{self.number}" if self.number is not None else self.name


@dataclass(frozen=True, slots=True)
class SourceIdentity:
    """The content identity of a source: a digest over its listing (or its objects' sha256)."""

    method: Literal["listing", "sha256"]
    digest: str
    files: int
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "digest": self.digest,
            "files": self.files,
            "size": self.size,
        }


@dataclass(frozen=True, slots=True)
class Source:
    """A raw input outside the registry: a file or a prefix, with its identity when recorded."""

    uri: str
    identity: SourceIdentity | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"uri": self.uri, "identity": self.identity.to_dict() if self.identity else None}


@dataclass(frozen=True, slots=True)
class SourceCheck:
    """A source's recorded identity against its identity now (:meth:`Provenance.check_sources`)."""

    uri: str
    recorded: SourceIdentity | None
    current: SourceIdentity

    @property
    def changed(self) -> bool | None:
        """True if the data changed, False if not, None when no identity was recorded."""
        if self.recorded is None:
            return None
        return self.recorded.digest != self.current.digest


@dataclass(frozen=True, slots=True)
class Producer:
    """The code that produced a version; ``vcs="unknown"`` when it was not in a git work tree."""

    vcs: Literal["git", "unknown"] = "unknown"
    commit: str | None = None
    remote: str | None = None
    branch: str | None = None
    dirty: bool | None = None
    diff_digest: str | None = None
    entry: str | None = None

    @property
    def short(self) -> str:
        """``3f2a9c1`` (``3f2a9c1+dirty``), or ``unknown``."""
        if self.commit is None:
            return "unknown"
        return self.commit[:7] + ("+dirty" if self.dirty else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "vcs": self.vcs,
            "commit": self.commit,
            "remote": self.remote,
            "branch": self.branch,
            "dirty": self.dirty,
            "diff_digest": self.diff_digest,
            "entry": self.entry,
        }


@dataclass(frozen=True, slots=True)
class Environment:
    """Versions of Python, TensorFlow (None when not installed) and recordkeeper."""

    python: str | None = None
    tensorflow: str | None = None
    recordkeeper: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "tensorflow": self.tensorflow,
            "recordkeeper": self.recordkeeper,
        }


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a version came from, as the service answers it (immutable once committed).

    Every part is empty (``()`` or None) when the version recorded none.
    """

    parents: tuple[Parent, ...] = ()
    sources: tuple[Source, ...] = ()
    producer: Producer | None = None
    params: Mapping[str, Any] | None = None
    params_digest: str | None = None
    command: tuple[str, ...] | None = None
    environment: Environment | None = None
    note: str | None = None
    _storage_options: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any] | None, *, storage_options: Mapping[str, Any] | None = None
    ) -> Provenance:
        """From the ``provenance`` of the service's ``Version`` JSON."""
        if not data:
            return cls(_storage_options=storage_options)
        producer = data.get("producer")
        environment = data.get("environment")
        command = data.get("command")
        return cls(
            parents=tuple(
                Parent(
                    name=str(p["name"]),
                    dataset=str(p["dataset"]),
                    number=int(p["number"]) if p.get("number") is not None else None,
                    role=str(p["role"]),
                )
                for p in data.get("parents") or ()
            ),
            sources=tuple(
                Source(
                    uri=str(s["uri"]),
                    identity=SourceIdentity(**s["identity"]) if s.get("identity") else None,
                )
                for s in data.get("sources") or ()
            ),
            producer=Producer(**producer) if producer else None,
            params=_frozen_params(data.get("params")),
            params_digest=data.get("params_digest"),
            command=tuple(command) if command is not None else None,
            environment=Environment(**environment) if environment else None,
            note=data.get("note"),
            _storage_options=storage_options,
        )

    @property
    def base(self) -> Parent | None:
        """The parent this version is a change of (role ``base``), if any."""
        return next((p for p in self.parents if p.role == "base"), None)

    @property
    def empty(self) -> bool:
        """True when the version recorded no provenance."""
        return not (
            self.parents
            or self.sources
            or self.producer
            or self.params is not None
            or self.command
            or self.environment
            or self.note
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the service answers (parents by name)."""
        return {
            "parents": [
                {"name": p.name, "dataset": p.dataset, "number": p.number, "role": p.role}
                for p in self.parents
            ],
            "sources": [s.to_dict() for s in self.sources],
            "producer": self.producer.to_dict() if self.producer else None,
            "params": _thawed(self.params),
            "params_digest": self.params_digest,
            "command": list(self.command) if self.command is not None else None,
            "environment": self.environment.to_dict() if self.environment else None,
            "note": self.note,
        }

    def check_sources(self, storage_options: Mapping[str, Any] | None = None) -> list[SourceCheck]:
        """Each source's identity now against the recorded one ("did the raw data change?").

        Computed the way it was recorded (from a listing, or from contents for ``sha256``).
        """
        options = storage_options if storage_options is not None else self._storage_options
        out = []
        for source in self.sources:
            full = source.identity is not None and source.identity.method == "sha256"
            current = source_identity(source.uri, options, hash_contents=full)
            out.append(SourceCheck(source.uri, source.identity, current))
        return out


def _frozen_params(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    from types import MappingProxyType

    return MappingProxyType(json.loads(json.dumps(value)))


def _thawed(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return json.loads(json.dumps(dict(value))) if value is not None else None


# -- git --------------------------------------------------------------------------------------


def _git(root: str, *args: str, text: bool = True) -> Any:
    """Run ``git -C root args``; None if git is missing, fails or takes too long."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "LC_ALL": "C",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",
    }
    for name in ("HOME", "GIT_DIR", "GIT_WORK_TREE", "GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME"):
        if name in os.environ:  # where git finds the repository and its configuration
            env[name] = os.environ[name]
    try:
        done = subprocess.run(
            ["git", "-C", root, *args],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            env=env,
            check=False,
        )
    except (OSError, ValueError, subprocess.SubprocessError):  # ValueError: a NUL in a path
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace").strip() if text else done.stdout


def _entry_script() -> str | None:
    """The user's entry script: the ``__main__`` file, unless it is a tool's rather than the
    user's code — an installed console script (in the interpreter's scripts directory:
    ``recordkeeper``, ``pytest``, …), an installed package's module (site-packages: ``python
    -m some_tool``, a Jupyter kernel's launcher) or a module of recordkeeper itself (``python -m
    recordkeeper.cli``, also from a checkout).  ``recordkeeper convert`` run from a venv
    inside a checkout recorded that checkout's commit as the producer of the data; such a run
    is recorded from the current directory instead."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else None)
    if not path or path in ("-c", "-m", "-"):
        return None
    resolved = os.path.realpath(path)
    if not os.path.isfile(resolved):
        return None
    tools = [sysconfig.get_path(p) for p in ("scripts", "purelib", "platlib")]
    tools.append(os.path.dirname(__file__))  # …/recordkeeper
    for directory in tools:
        real = os.path.realpath(directory)
        if os.path.commonpath([real, resolved]) == real:
            return None
    return resolved


def capture_git(path: str | os.PathLike[str] | None = None) -> Producer:
    """The git state of the work tree containing ``path`` (default: the entry script's
    directory, else the current directory).

    Records the commit, the first remote's URL without ``user:password@``, the branch (None
    when detached), whether tracked files differ from the commit or untracked files exist, a
    digest over those changes (``git diff HEAD --binary`` plus each untracked file's path and
    sha256), and the entry script relative to the repository root.  Anything that cannot be
    found (no git, not a repository) gives ``Producer(vcs="unknown")``; nothing raises.
    """
    entry = _entry_script()
    start = os.fspath(path) if path is not None else None
    if start is None:
        start = os.path.dirname(entry) if entry else os.getcwd()
    if os.path.isfile(start):
        start = os.path.dirname(start) or "."
    root = _git(start, "rev-parse", "--show-toplevel")
    if not root:
        return Producer()
    commit = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    branch = _git(root, "symbolic-ref", "--short", "-q", "HEAD")
    remote = _remote(root)
    dirty, diff_digest = _changes(root, has_head=bool(commit))
    rel = None
    if entry:
        real_root = os.path.realpath(root)
        if os.path.commonpath([real_root, entry]) == real_root:
            rel = Path(os.path.relpath(entry, real_root)).as_posix()
    return Producer(
        vcs="git",
        commit=commit if commit and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit) else None,
        remote=remote,
        branch=branch or None,
        dirty=dirty,
        diff_digest=diff_digest,
        entry=rel,
    )


def _remote(root: str) -> str | None:
    names = _git(root, "remote")
    if not names:
        return None
    listed = names.splitlines()
    name = "origin" if "origin" in listed else listed[0]
    url = _git(root, "remote", "get-url", name)
    return strip_credentials(url) if url else None


def _changes(root: str, *, has_head: bool) -> tuple[bool | None, str | None]:
    diff = _git(root, "diff", "HEAD", "--binary", text=False) if has_head else b""
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z", text=False)
    if diff is None or untracked is None:
        return None, None
    files = sorted(p for p in untracked.decode("utf-8", "surrogateescape").split("\0") if p)
    if not diff and not files:
        return False, None
    h = hashlib.sha256(diff)
    for rel in files:
        h.update(b"\0untracked\0" + rel.encode("utf-8", "surrogateescape") + b"\0")
        try:
            with open(os.path.join(root, rel), "rb") as f:
                h.update(hashlib.file_digest(f, "sha256").digest())
        except OSError:
            h.update(b"unreadable")
    return True, "sha256:" + h.hexdigest()


# -- environment and command ------------------------------------------------------------------


def _installed(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def capture_environment() -> Environment:
    """Python, TensorFlow and recordkeeper versions — read from package metadata, so
    TensorFlow is never imported for it; no environment variable is ever read."""
    tf = sys.modules.get("tensorflow")
    tf_version = getattr(tf, "__version__", None) if tf is not None else None
    if not isinstance(tf_version, str):
        tf_version = _installed("tensorflow", "tensorflow-cpu", "tf-nightly")
    return Environment(
        python=platform.python_version(), tensorflow=tf_version, recordkeeper=__version__
    )


def command_line(argv: Sequence[str] | None = None) -> list[str]:
    """The command line (``sys.argv`` by default) with secrets redacted
    (:func:`recordkeeper.core.secrets.redact_command`): the value of an option or a
    ``NAME=value`` whose name looks like a secret (``--token=…``, ``--password …``,
    ``AWS_SECRET_ACCESS_KEY=…``) becomes ``***``, ``Authorization:`` values too, and every URL
    in an argument loses its ``user:password@`` and its secret query parameters
    (``X-Amz-Signature``, ``token``, …)."""
    out = redact_command(list(sys.argv if argv is None else argv))
    if out and not os.path.isabs(out[0]) and out[0].endswith(".py"):
        out[0] = Path(out[0]).as_posix()
    return out


# -- params -----------------------------------------------------------------------------------


def load_params(value: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    """Parameters from a mapping or a ``.yaml``/``.yml``/``.json`` file, checked to have a
    canonical JSON form (:class:`~recordkeeper.errors.InvalidParams` otherwise: a YAML date,
    set or binary value has none)."""
    if isinstance(value, Mapping):
        params, _, _ = canonical_params(value)
        return params
    if not isinstance(value, str | os.PathLike) or isinstance(value, bytes):
        raise InvalidParams(
            "params are a mapping or the path of a .yaml/.yml/.json file, not "
            f"{type(value).__name__}"
        )
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or a NUL in the path
        raise InvalidParams(f"params file {str(path)[:200]!r}: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise InvalidParams(f"params file {path} is not JSON: {exc}") from None
    else:
        import yaml

        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidParams(f"params file {path} is not YAML: {exc}") from None
    params, _, _ = canonical_params(loaded)
    return params


# -- sources ----------------------------------------------------------------------------------


def _token(uri: str, path: str, info: Mapping[str, Any]) -> str:
    """The identity token of one listed object (what changes when its bytes change): the
    fields its storage profile records for fast verification, without the size (listed
    separately) — local: inode and ``mtime_ns``; S3: ETag and version id; GCS: generation."""
    profile = profile_of(uri)
    stat = stat_file(uri, path) if profile.local else profile.stat_from_info(uri, info)
    fields = {k: v for k, v in stat.identity.items() if k not in ("backend", "size")}
    return ";".join(f"{k}={v}" for k, v in sorted(fields.items())) or "none"


def _sha256(uri: str, options: Mapping[str, Any] | None, advance: Callable[[int], None]) -> str:
    h = hashlib.sha256()
    with open_read(uri, options) as f:
        while chunk := f.read(8 * 2**20):
            h.update(chunk)
            advance(len(chunk))
    return h.hexdigest()


def source_identity(
    uri: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    hash_contents: bool = False,
    progress: bool | ProgressLike | None = None,
) -> SourceIdentity:
    """The content identity of the file or prefix ``uri``, from one listing.

    Each object contributes its path relative to ``uri``, its size and the backend's identity
    token (local: ``mtime_ns``; S3: ETag and VersionId; GCS: generation); the digest is the
    sha256 of the canonical JSON of that sorted listing.  No object is read — 100,000 raw files
    cost one paginated listing — unless ``hash_contents``, which reads every object and puts
    its sha256 in place of the token (``method="sha256"``), with a bytes/s bar on a terminal
    (``progress``: as for :func:`recordkeeper.progress.byte_progress`).  A missing ``uri``
    raises :class:`~recordkeeper.errors.StorageError`.
    """
    uri = to_uri(uri)
    local = profile_of(uri).local
    fs, path = url_to_fs(uri, storage_options)
    with storage_errors(uri):
        if hasattr(fs, "invalidate_cache"):
            fs.invalidate_cache(path)
        if fs.isfile(path):
            found = {path: fs.info(path)}
            base = path.rsplit("/", 1)[0]
        else:
            found = fs.find(path, detail=True)
            if not found and not fs.exists(path):
                raise FileNotFoundError(f"{uri} does not exist")
            base = path.rstrip("/")
    files = [(key, found[key]) for key in sorted(found) if found[key].get("type") != "directory"]
    total = sum(int(info.get("size") or 0) for _, info in files)
    entries = []
    reading = hash_contents and total > 0
    shown = strip_credentials(uri)
    with byte_progress(f"hashing {shown}", total, progress if reading else False) as advance:
        for key, info in files:
            rel = key[len(base) :].lstrip("/") if key.startswith(base) else key
            full = to_uri(key) if local else fs.unstrip_protocol(key)
            with storage_errors(full):
                token = (
                    "sha256=" + _sha256(full, storage_options, advance)
                    if hash_contents
                    else _token(full, key, info)
                )
            entries.append([rel, int(info.get("size") or 0), token])
    digest = digest_bytes(canonical_json(entries))
    return SourceIdentity(
        method="sha256" if hash_contents else "listing",
        digest=digest,
        files=len(entries),
        size=total,
    )


# -- the document sent at stage ---------------------------------------------------------------

ParentSpec = Any  # "coco@v2", "coco@v2:labels", ("coco@v2", "labels"), a DatasetVersion
SourceSpec = Any  # "gs://raw/coco/", a Source, {"uri": ..., "identity": ...}


def _items(value: Any, what: str, kinds: str) -> list[Any]:
    """``value`` as a list of the items of ``what``: refused (:class:`InvalidProvenance`) unless
    it is a list, tuple or other iterable of them (not bytes, not a single number)."""
    if isinstance(value, bytes | bytearray) or not isinstance(value, Iterable):
        raise InvalidProvenance(f"{what} are {kinds} (a list of them), not {type(value).__name__}")
    return list(value)


def _parent_pairs(
    parents: Iterable[ParentSpec] | Mapping[str, str],
) -> list[tuple[str, str | None]]:
    if isinstance(parents, Mapping):
        return [(str(ref), str(role)) for ref, role in parents.items()]
    if isinstance(parents, str) or (hasattr(parents, "name") and hasattr(parents, "dataset")):
        parents = [parents]  # one reference, or one DatasetVersion
    out: list[tuple[str, str | None]] = []
    for item in _items(parents, "parents", "references, (ref, role) pairs or versions"):
        if isinstance(item, str):
            ref, role = parse_parent_spec(item, default_role="")
            out.append((ref, role or None))
        elif isinstance(item, tuple) and len(item) == 2:
            out.append((str(item[0]), str(item[1])))
        elif isinstance(item, Mapping) and "ref" in item:
            out.append((str(item["ref"]), item.get("role")))
        elif hasattr(item, "name") and hasattr(item, "dataset"):  # a DatasetVersion
            out.append((str(item.name), None))
        else:
            raise InvalidProvenance(f"a parent is a reference or a version, not {item!r}"[:200])
    return out


def assign_roles(
    dataset: str | None, pairs: Sequence[tuple[str, str | None]]
) -> list[dict[str, str]]:
    """Parents with their roles: one without a role is the ``base`` when it is of the same
    dataset, no other parent is the base and it is the only such one; else a ``source``."""
    has_base = any(role == "base" for _, role in pairs)
    same = [ref for ref, role in pairs if role is None and _dataset_of(ref) == dataset and dataset]
    out = []
    for ref, role in pairs:
        if role is None:
            role = "base" if not has_base and len(same) == 1 and ref == same[0] else "source"
        out.append({"ref": ref, "role": check_role(role, f"parent {ref[:100]!r}")})
    return out


def _dataset_of(ref: str) -> str | None:
    try:
        return parse_reference(ref).dataset
    except Exception:
        return None


def source_uri(source: str | os.PathLike[str]) -> str:
    """A raw source as it is recorded and looked up: a URI as given, a local path as the
    ``file://`` URI of its absolute path, keeping the trailing ``/`` of a directory written
    ``raw/`` (``file:///…/raw/``, as ``Path("raw").absolute().as_uri() + "/"``).

    ``client.impact(source=...)``, ``client.versions_from_source`` and the CLI ask with it, so a
    path finds what a publish with that path recorded.
    """
    if not isinstance(source, str | os.PathLike):
        raise InvalidRequest(f"a source is a URI or a local path, not {type(source).__name__}")
    text = os.fspath(source)
    if not isinstance(text, str):
        raise InvalidRequest("a source path is text, not bytes")
    if "://" in text:
        return text
    uri = to_uri(text)
    if text.endswith(("/", os.sep)) and not uri.endswith("/"):
        uri += "/"
    return uri


def _sources(
    sources: Iterable[SourceSpec], options: Mapping[str, Any] | None, hash_contents: bool
) -> list[dict[str, Any]]:
    if isinstance(sources, str | os.PathLike | Source) or (
        isinstance(sources, Mapping) and "uri" in sources
    ):
        sources = [sources]  # one source
    out = []
    for item in _items(sources, "sources", "URIs, paths or Source values"):
        if isinstance(item, Source):
            out.append(item.to_dict())
        elif isinstance(item, Mapping) and "uri" in item:
            out.append({"uri": str(item["uri"]), "identity": item.get("identity")})
        elif not isinstance(item, str | os.PathLike):
            raise InvalidProvenance(
                f"a source is a URI, a path or a Source, not {type(item).__name__}"
            )
        else:
            uri = source_uri(item)
            identity = source_identity(uri, options, hash_contents=hash_contents)
            out.append({"uri": strip_credentials(uri), "identity": identity.to_dict()})
    return out


def build_provenance(
    *,
    dataset: str | None = None,
    parents: Iterable[ParentSpec] | Mapping[str, str] | None = None,
    sources: Iterable[SourceSpec] | None = None,
    params: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    code: Literal["auto"] | str | os.PathLike[str] | Producer | None = "auto",
    command: Sequence[str] | Literal["auto"] | None = "auto",
    environment: bool = True,
    note: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    hash_sources: bool = False,
) -> dict[str, Any]:
    """The provenance document to send when staging a version of ``dataset``.

    ``parents``: references (``"coco@v2"``, ``"coco@v2:labels"``), ``(ref, role)`` pairs, a
    ``{ref: role}`` mapping or resolved versions (roles: :func:`assign_roles`).  ``sources``:
    URIs (listed now, :func:`source_identity`; ``hash_sources`` reads them whole) or
    :class:`Source` values.  ``params``: a mapping or a YAML/JSON file.  ``code``: ``"auto"``
    captures git around the entry script (:func:`capture_git`), a path captures that work tree,
    a :class:`Producer` is recorded as is, None records none.  ``command``: ``"auto"`` records
    ``sys.argv`` (redacted, :func:`command_line`).  ``environment``: record the versions.
    Checked with the service's rules before anything is staged.
    """
    if not (code is None or isinstance(code, Producer | str | os.PathLike)):
        raise InvalidProvenance(
            f"code is 'auto', a work tree's path, a Producer or None, not {type(code).__name__}"
        )
    document: dict[str, Any] = {
        "parents": assign_roles(dataset, _parent_pairs([] if parents is None else parents)),
        "sources": _sources([] if sources is None else sources, storage_options, hash_sources),
        "producer": None,
        "params": load_params(params) if params is not None else None,
        "command": None,
        "environment": capture_environment().to_dict() if environment else None,
        "note": note,
    }
    if isinstance(code, Producer):
        document["producer"] = code.to_dict()
    elif code == "auto":
        document["producer"] = capture_git().to_dict()
    elif code is not None:
        document["producer"] = capture_git(code).to_dict()
    if command == "auto":
        document["command"] = command_line()
    elif command is not None:
        if isinstance(command, str) or not all(
            isinstance(a, str) for a in _items(command, "command", "the arguments (strings)")
        ):
            raise InvalidProvenance("command is 'auto', None or a list of strings (the arguments)")
        document["command"] = command_line(command)
    validate_provenance(document)
    return document
