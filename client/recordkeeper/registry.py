"""The version registry over the HTTP helper: read, alias and move versions through their life.

:class:`Registry` holds an :class:`~recordkeeper.http.HttpCore` and the default storage options,
and turns the service's answers into :class:`~recordkeeper.values.DatasetVersion` objects.  It is
what the capability modules receive (:mod:`recordkeeper.writer` and :mod:`recordkeeper.publish`
stage, register and finish through it, :mod:`recordkeeper.gc` abandons through it) and what the
:class:`~recordkeeper.client.Client` façade delegates to.  It also serves the versions it makes
(:class:`~recordkeeper.values.VersionServices`): their schema, ``verify``, ``tf_dataset`` and
``export_tfds``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack, overload

from recordkeeper import record_diffs, record_finder, record_lineage, record_sets
from recordkeeper.core.derive import refuse_staged_derived
from recordkeeper.core.digests import parse_digest
from recordkeeper.core.errors import (
    DeprecatedVersionWarning,
    InvalidReference,
    InvalidRequest,
    InvalidResponse,
    LeakageWarning,
    RecordkeeperError,
    StorageRootNotAllowed,
)
from recordkeeper.core.leakage_policy import leakage_warning_text
from recordkeeper.core.limits import MAX_SHARDS_PER_REQUEST
from recordkeeper.core.naming import format_date, validate_dataset_name
from recordkeeper.core.provenance import validate_provenance
from recordkeeper.core.record_diff import DEFAULT_SAMPLE, Emit, LeakPair, RecordDiff
from recordkeeper.core.record_identity import DEFAULT_WIDTH, IdentityKind
from recordkeeper.core.refs import (
    PUBLISHED_STATES,
    Reference,
    parse_reference,
    validate_alias_name,
)
from recordkeeper.core.roots import AllowedRoots, UriError, allowed_root
from recordkeeper.core.schema import Schema
from recordkeeper.core.shard_columns import ShardColumns, unpack_columns
from recordkeeper.diff import VersionDiff, derived_diff, diff_versions
from recordkeeper.http import MAX_LIST_ITEMS, HttpCore, quote_segment, reading_answer
from recordkeeper.leakage import save_leakage
from recordkeeper.listing import Listing
from recordkeeper.provenance import Provenance, source_uri
from recordkeeper.record_lineage import RecordLineage
from recordkeeper.tfds_export import export_tfds
from recordkeeper.values import (
    DatasetInfo,
    DatasetVersion,
    FetchedSplits,
    Shard,
    Split,
    TfDatasetOptions,
    TfdsExport,
    TfdsExportOptions,
    VerifyOptions,
    VerifyReport,
)
from recordkeeper.verify import verify_pages, verify_version
from recordkeeper.version_cache import VersionCache

if TYPE_CHECKING:
    import datetime

    from recordkeeper.progress import ProgressLike

from recordkeeper.core.lifecycle import OnDuplicate

__all__ = [
    "MAX_SHARDS_PER_REQUEST",
    "DuplicateWarning",
    "OnDuplicate",
    "Registry",
    "collect_splits",
]


log = logging.getLogger("recordkeeper")


class DuplicateWarning(UserWarning):
    """Published content equals an existing version, which was returned instead."""


class Registry:
    """Datasets, versions and aliases of one service, over one :class:`HttpCore`.

    ``storage_options`` are the default fsspec options (credentials, endpoint) handed to the
    versions it resolves, writes or publishes.
    """

    def __init__(
        self,
        http: HttpCore,
        storage_options: Mapping[str, Any] | None = None,
        cache: VersionCache | None = None,
    ) -> None:
        self.http = http
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        #: What this registry keeps of the versions it resolved (see :meth:`resolve`).
        self.cache = cache if cache is not None else VersionCache()
        #: Shards per page when fetching a version's shards (None: the service's maximum).
        self.page_size: int | None = None
        self._info: dict[str, Any] | None = None

    @classmethod
    def from_env(cls) -> Registry:
        """A registry for ``RECORDKEEPER_URL``/``RECORDKEEPER_TOKEN`` (read now)."""
        return cls(HttpCore.from_env())

    def version(
        self,
        data: Mapping[str, Any],
        *,
        schema: Schema | None = None,
        splits: Mapping[str, Split] | None = None,
    ) -> DatasetVersion:
        """A :class:`DatasetVersion` from the service's ``Version`` JSON, served from here.

        An answer that is not a version (a missing field, a value of the wrong type) raises
        :class:`~recordkeeper.errors.InvalidResponse`; shards it carries must lie inside the
        service's allowed roots (:meth:`check_shard_uris`).
        """
        with reading_answer("a version"):
            _check_version_answer(data)
            version = DatasetVersion.from_dict(
                data,
                client=self,
                storage_options=self.storage_options or None,
                schema=schema,
                splits=splits,
            )
        if splits is None and version.splits:
            for split in version.splits.values():
                self.check_shard_uris("", split.uris, version.name)
        return version

    # -- service ---------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The service's ``/info``: storage root, allowed roots, limits (cached)."""
        if self._info is None:
            info = self.http.api("GET", "/info")
            if not isinstance(info, dict):
                raise InvalidResponse(f"GET /info answered a {type(info).__name__}, not an object")
            self._info = info
        return dict(self._info)

    def allowed_roots(self) -> AllowedRoots:
        """The service's allowed storage roots (``/info``), checked as the service checks its
        own setting: what the client holds the locations the service names to.

        Raises :class:`~recordkeeper.errors.InvalidResponse` for an answer without roots, or
        with a root that is malformed or admits a whole scheme (``file:///``, ``s3://``).
        """
        roots = self.info().get("allowed_roots")
        if not isinstance(roots, list) or not roots:
            raise InvalidResponse(
                f"GET /info answered allowed_roots={roots!r}, not a list of storage roots"
            )
        try:
            return AllowedRoots(tuple(allowed_root(root) for root in roots))
        except UriError as exc:
            raise InvalidResponse(
                f"GET /info answered an allowed root the client refuses: {exc}"
            ) from None

    def check_shard_uris(self, prefix: str, names: Iterable[str], version: str) -> None:
        """Refuse shard URIs (``prefix + name``) the service answered for ``version`` unless
        each names an object inside the service's allowed roots, before any storage access.

        Raises :class:`~recordkeeper.errors.StorageRootNotAllowed` (outside, or climbing out
        with ``..``) or :class:`~recordkeeper.errors.InvalidResponse` (not a URI).
        """
        what = f"a shard URI the service answered for {version}"
        try:
            self.allowed_roots().check_objects(prefix, names, what)
        except UriError as exc:
            raise InvalidResponse(f"{what} is malformed: {exc}") from None

    def check_storage_prefix(self, prefix: str, root: str | None, version: str) -> str:
        """The storage prefix the service staged ``version`` under, if it is a directory inside
        the service's allowed roots (and inside ``root`` when the caller chose one); else
        :class:`~recordkeeper.errors.StorageRootNotAllowed`, before anything is written."""
        what = f"the storage prefix the service answered for {version}"
        try:
            normalized = self.allowed_roots().check(prefix, what)
            if root is not None:
                AllowedRoots.of([root]).check(normalized, what)
        except UriError as exc:
            raise InvalidResponse(f"{what} is malformed: {exc}") from None
        if not normalized.endswith("/"):
            raise InvalidResponse(f"{what}, {prefix!r}, does not end with '/'")
        return normalized

    def health(self) -> bool:
        """True when the service answers ``/healthz``."""
        self.http.request("GET", "/healthz")
        return True

    # -- reading -----------------------------------------------------------------------------

    def datasets(self, prefix: str | None = None, *, limit: int | None = None) -> list[DatasetInfo]:
        """Every dataset (optionally only names starting with ``prefix``)."""
        with reading_answer("a dataset list"):
            return [
                DatasetInfo.from_dict(d)
                for d in self.http.paged("/datasets", {"prefix": prefix}, limit)
            ]

    def versions(
        self,
        dataset: str,
        *,
        state: str | Sequence[str] | None = None,
        since: str | datetime.date | None = None,
        until: str | datetime.date | None = None,
        limit: int | None = None,
    ) -> Listing[DatasetVersion]:
        """Versions of ``dataset`` newest first, without shards (use :meth:`resolve` for those).

        ``state`` is one state (``"committed"``), several — ``("committed", "deprecated")``,
        the published ones, is what ``recordkeeper ls DATASET`` lists — or None for every state
        (staged and abandoned versions, which have no number yet, come first).
        """
        validate_dataset_name(dataset)
        states = [state] if isinstance(state, str) else None if state is None else list(state)
        if states == []:
            raise InvalidRequest("state: give at least one state, or None for every state")
        params = {"state": states, "since": _date_param(since), "until": _date_param(until)}
        path = f"/datasets/{quote_segment(dataset)}/versions"
        return Listing(self.version(v) for v in self.http.paged(path, params, limit))

    def resolve(
        self, ref: str, *, expect_digest: str | None = None, shards: bool = True
    ) -> DatasetVersion:
        """Resolve a reference (``coco@latest``, ``coco@v3``, a name, a digest) to a version.

        ``expect_digest`` (``sha256:…``) makes resolution fail with
        :class:`~recordkeeper.errors.DigestMismatch` if the content differs from the pin.

        The reference is resolved by the service every time.  The shards of a committed
        version are fetched once (in pages of the compact form) and kept by the version's name
        and content digest (:class:`~recordkeeper.version_cache.VersionCache`); resolving a
        version this client holds costs one small request, answered ``304`` when nothing
        changed.
        """
        parsed = check_ref(ref)
        if expect_digest is not None:
            expect_digest = parse_digest(expect_digest, "expect_digest")
        ref = ref.strip()
        path = f"/versions/{quote_segment(ref)}"
        params = {"shards": "false", "expect_digest": expect_digest}
        offered = self.cache.offered_tags(parsed.dataset)
        body, etag = self.http.conditional_get(path, params=params, etags=offered)
        if body is None:  # 304: one of the offered answers is current
            body = self.cache.answer(etag) if etag is not None else None
            if body is None:  # forgotten meanwhile (another thread): ask without offering
                body, etag = self.http.conditional_get(path, params=params)
        elif etag is not None:
            self.cache.keep_answer(etag, body)
        with reading_answer("a version"):
            _check_version_answer(body)
        body["ref"] = ref
        if not shards:
            version = self.version(body)
        else:
            version = self.version(body, splits=self._splits(body, cacheable=etag is not None))
        version.warn_if_deprecated("resolved", stacklevel=3)  # the caller of client.resolve
        return version

    def _splits(self, body: Mapping[str, Any], *, cacheable: bool) -> Mapping[str, Split]:
        """The splits of the version ``body`` describes: held, or fetched (and kept when the
        service said the version is published: its answer had an ``ETag``)."""
        name, digest = body["name"], body.get("content_digest")
        if cacheable and digest:
            held = self.cache.splits(name, digest)
            if held is not None:
                return held
        with reading_answer(f"shards of {name}"):
            splits = collect_splits(self.shard_pages(name, page_size=self.page_size))
        if cacheable and digest:
            self.cache.keep_splits(name, digest, splits)
        return splits

    def shard_pages(
        self, version: str | DatasetVersion, *, page_size: int | None = None
    ) -> Iterator[ShardColumns[Shard]]:
        """The shards of a version page by page (compact form, split then index order).

        Memory stays bounded by one page (at most 10,000 shards) when the caller drops each
        page after use; this is how a very large version is verified or copied.

        Every page is checked before it is handed out: its shard URIs must lie inside the
        service's allowed roots (:meth:`check_shard_uris`), and the pages must end — a cursor
        that repeats, an empty page that is not the last or more shards than the version's
        ``shard_count`` raise :class:`~recordkeeper.errors.InvalidResponse`.
        """
        name = version.name if isinstance(version, DatasetVersion) else version
        check_ref(name)
        path = f"/versions/{quote_segment(name.strip())}/shards"
        after: str | None = None
        cursors: set[str] = set()
        served = 0
        total: int | None = None
        while True:
            body = self._shard_page(path, after, page_size)
            with reading_answer(f"a page of the shards of {name}"):
                if body.get("packed") is not None:
                    packed = body["packed"]
                    prefix, length = packed["uri_prefix"], packed["length"]
                    if not isinstance(length, int) or not isinstance(packed["columns"], dict):
                        raise TypeError("length is not an integer or columns not an object")
                    columns = unpack_columns(packed["columns"], length)
                else:
                    compact = body["compact"]
                    prefix, columns = compact["uri_prefix"], compact["columns"]
                if not isinstance(prefix, str) or not isinstance(columns, dict):
                    raise TypeError("uri_prefix is not a string or columns not an object")
                page = ShardColumns(Shard, prefix, columns)
                count = body.get("shard_count")
                if total is None and isinstance(count, int):
                    total = count
                after = body.get("next")
                if after is not None and not isinstance(after, str):
                    raise TypeError(f"next is a {type(after).__name__}, not a string")
            served += len(page)
            problem = (
                f"served {served} shards of a version of {total}"
                if total is not None and served > total
                else f"served more than {MAX_LIST_ITEMS} shards"
                if served > MAX_LIST_ITEMS
                else f"answered the cursor {after!r} again"
                if after is not None and after in cursors
                else "answered an empty page that is not the last"
                if after is not None and not len(page)
                else None
            )
            if problem is not None:
                raise InvalidResponse(
                    f"GET {path} {problem}: the client stops paging (a service or proxy "
                    "that does not page as the API says)",
                    path=path,
                )
            self.check_shard_uris(prefix, columns["uri"], name)
            yield page
            if after is None:
                return
            cursors.add(after)

    def _shard_page(self, path: str, after: str | None, page_size: int | None) -> Any:
        """One page in the packed form, or the compact form from a service that has no packed
        form (it refuses the ``form`` value: asked once per client)."""
        params = {"after": after, "limit": page_size}
        return self.http.get_in_form(path, params, "shards", ("packed", "compact"))

    def verify(
        self,
        ref: str,
        *,
        deep: bool = False,
        splits: Sequence[str] | None = None,
        storage_options: Mapping[str, Any] | None = None,
        max_workers: int | None = None,
        progress: bool | None = None,
    ) -> VerifyReport:
        """Verify a version's stored shards reading its shard list page by page.

        The same checks as :meth:`DatasetVersion.verify`, with memory bounded by one page of
        shards: the way to verify a version of 100,000 shards or more.
        """
        version = self.resolve(ref, shards=False)
        version.ensure_readable()
        wanted = None if splits is None else set(splits)
        pages: Iterable[Sequence[Shard]] = self.shard_pages(version.name, page_size=self.page_size)
        if wanted is not None:
            pages = ([s for s in page if s.split in wanted] for page in pages)
        options = storage_options if storage_options is not None else self.storage_options
        return verify_pages(
            pages,
            label=version.name,
            deep=deep,
            storage_options=options or None,
            max_workers=max_workers,
            progress=progress,
        )

    def schema(self, ref: str) -> Schema:
        """The merged schema of a version."""
        check_ref(ref)
        body = self.http.api("GET", f"/versions/{quote_segment(ref.strip())}/schema")
        with reading_answer("a schema"):
            return Schema.from_dict(body["schema"])

    @overload
    def diff(
        self,
        a: str | DatasetVersion,
        b: str | DatasetVersion,
        *,
        records: Literal[False] = False,
    ) -> VersionDiff: ...
    @overload
    def diff(
        self,
        a: str | DatasetVersion,
        b: str | DatasetVersion,
        *,
        records: Literal[True],
        kind: IdentityKind = "bytes",
        width: int = DEFAULT_WIDTH,
        sample: int = DEFAULT_SAMPLE,
        emit: Emit | None = None,
        decode: bool = True,
        progress: bool | ProgressLike | None = None,
        save: bool = True,
    ) -> RecordDiff: ...
    def diff(
        self,
        a: str | DatasetVersion,
        b: str | DatasetVersion,
        *,
        records: bool = False,
        kind: IdentityKind = "bytes",
        width: int = DEFAULT_WIDTH,
        sample: int = DEFAULT_SAMPLE,
        emit: Emit | None = None,
        decode: bool = True,
        progress: bool | ProgressLike | None = None,
        save: bool = True,
    ) -> VersionDiff | RecordDiff:
        """What changed from version ``a`` to version ``b`` (shards, record counts, schema).

        With ``records=True``, record by record from both versions' record indexes
        (:func:`recordkeeper.record_sets.record_diff`: per split added, removed, common,
        duplicates; moves between splits; ``emit(category, split, identity)`` streams the full
        lists, as identities).  Both versions must have been indexed (:meth:`index`).
        ``decode`` (default) also reads the ``sample`` records added and removed per split
        from the shards holding them and decodes them like ``recordkeeper head``
        (:func:`recordkeeper.record_finder.decode_diff`: ``decoded_added``,
        ``decoded_removed``); ``decode=False`` reads no shard.  ``progress``: a bar on stderr
        while shards are read (None: when stderr is a terminal).  With ``save`` (the default)
        its summary is then stored in the registry for the UI's compare page
        (:func:`recordkeeper.record_diffs.save_record_diff`: best effort; with a read-only
        token nothing is stored and the diff is returned all the same).
        """
        if not records:
            return self._shard_diff(a, b)
        va = a if isinstance(a, DatasetVersion) else self.resolve(a)
        vb = b if isinstance(b, DatasetVersion) else self.resolve(b)
        result = record_sets.record_diff(
            self.http, va, vb, kind=kind, width=width, sample=sample, emit=emit
        )
        if save:
            record_diffs.save_record_diff(self.http, va.name, vb.name, result, kind, width)
        if decode:
            record_finder.decode_diff(result, va, vb, kind=kind, width=width, progress=progress)
        return result

    def _shard_diff(self, a: str | DatasetVersion, b: str | DatasetVersion) -> VersionDiff:
        """:meth:`diff` of shards: by the service from the derivation when one version is
        derived from the other and this client does not hold both versions' shards (in
        proportion to the change, :func:`recordkeeper.diff.derived_diff`); else on both
        versions' shards, fetched unless held."""
        va = a if isinstance(a, DatasetVersion) else self.resolve(a, shards=False)
        vb = b if isinstance(b, DatasetVersion) else self.resolve(b, shards=False)
        for version in (va, vb):
            refuse_staged_derived(
                version.name,
                version.state,
                any(p.role == "base" for p in version.provenance.parents),
            )
        if not (self._holds_shards(va) and self._holds_shards(vb)):
            found = derived_diff(self.http, va.name, vb.name)
            if found is not None:
                return found
        return diff_versions(self._with_shards(va), self._with_shards(vb))

    def _holds_shards(self, version: DatasetVersion) -> bool:
        """Whether ``version``'s shards are in hand (read, or kept by this client)."""
        splits = version.splits
        if isinstance(splits, FetchedSplits):
            return splits.fetched
        if splits:
            return True
        digest = version.content_digest
        return digest is not None and self.cache.splits(version.name, digest) is not None

    def _with_shards(self, version: DatasetVersion) -> DatasetVersion:
        """``version`` with its splits (resolved by name when it came without)."""
        if isinstance(version.splits, FetchedSplits) or version.splits:
            return version
        with warnings.catch_warnings():  # a deprecated version was named once already
            warnings.simplefilter("ignore", DeprecatedVersionWarning)
            return self.resolve(version.name)

    def record_diffs(
        self, a: str | DatasetVersion, b: str | DatasetVersion
    ) -> list[dict[str, Any]]:
        """The record diffs stored in the registry for ``a`` → ``b`` (one per identity kind and
        width; empty: none was computed with a token allowed to write): ``a``, ``b``, ``kind``,
        ``width``, ``identical``, ``new``, ``gone``, per split ``splits`` (records on each side,
        added, removed, common, moved in and out, duplicates, sample identities as hex),
        ``recorded_at``, ``recorded_by``."""
        names = [v.name if isinstance(v, DatasetVersion) else v for v in (a, b)]
        return record_diffs.record_diffs(self.http, names[0], names[1])

    def index(
        self,
        ref: str | DatasetVersion,
        *,
        kind: IdentityKind = "bytes",
        width: int = DEFAULT_WIDTH,
        progress: bool | ProgressLike | None = None,
    ) -> dict[str, Any]:
        """Give a committed version record identity (``recordkeeper index REF``): a record
        index beside each shard (shards indexed already are skipped), then its split set
        digests registered; returns the registration with the version's ``records_digest``."""
        version = ref if isinstance(ref, DatasetVersion) else self.resolve(ref)
        return record_sets.index_version(
            self.http, version, kind=kind, width=width, progress=progress
        )

    def record_lineage(
        self,
        record: Any,
        *,
        dataset: str | None = None,
        versions: Iterable[str | DatasetVersion] | None = None,
        transitive: bool = True,
    ) -> RecordLineage:
        """Which checkpoints saw ``record`` (bytes, a ``tf.train.Example`` or its identity as
        hex): the shards holding it, their versions and every checkpoint trained on them,
        from the versions' record lookups and shard indexes — no shard is read
        (:func:`recordkeeper.record_lineage.record_lineage`)."""
        if (dataset is None) == (versions is None):
            raise InvalidRequest("give exactly one of dataset= or versions=")
        if dataset is not None:
            targets = list(self.versions(dataset, state=("committed", "deprecated")))
        else:
            targets = [
                v if isinstance(v, DatasetVersion) else self.resolve(v, shards=False)
                for v in versions or ()
            ]
        return record_lineage.record_lineage(self.http, targets, record, transitive=transitive)

    def record_sets(self, ref: str) -> list[dict[str, Any]]:
        """The record identities registered for a version (empty: not indexed yet)."""
        return record_sets.record_sets(self.http, ref)

    def versions_with_records(self, records_digest: str) -> list[dict[str, Any]]:
        """Committed versions whose records have this ``records_digest`` (any sharding)."""
        answer = self.http.api("GET", f"/record-sets/{quote_segment(records_digest)}")
        data: list[dict[str, Any]] = answer["data"]
        return data

    def check_leakage(
        self,
        ref: str | DatasetVersion,
        against: Sequence[str | DatasetVersion] = (),
        *,
        kind: IdentityKind = "bytes",
        width: int = DEFAULT_WIDTH,
        sample: int = DEFAULT_SAMPLE,
        decode: bool = True,
        progress: bool | ProgressLike | None = None,
        save: bool = True,
    ) -> list[LeakPair]:
        """Records of a version's evaluation splits that also occur in its other splits or in
        the training splits of the ``against`` versions, from their record indexes
        (:func:`recordkeeper.record_sets.check_leakage`).  ``decode`` (default) reads each
        pair's ``sample`` leaked records from the evaluation split's shards and decodes them
        (``LeakPair.decoded``, :func:`recordkeeper.record_finder.decode_leakage`);
        ``decode=False`` reads no shard.  ``save``: the result is stored as the version's
        (``GET /versions/{ref}/leakage``), best effort (a read-only token or an older service
        stores nothing)."""
        version = ref if isinstance(ref, DatasetVersion) else self.resolve(ref)
        others = [v if isinstance(v, DatasetVersion) else self.resolve(v) for v in against]
        pairs = record_sets.check_leakage(
            self.http, version, others, kind=kind, width=width, sample=sample
        )
        if decode:
            record_finder.decode_leakage(
                pairs, {version.name: version}, kind=kind, width=width, progress=progress
            )
        if save:
            save_leakage(self.http, version.name, pairs, kind=kind, width=width)
        return pairs

    # -- what versions ask of the registry that made them (models.VersionServices) -----------

    def verify_version(
        self, version: DatasetVersion, **options: Unpack[VerifyOptions]
    ) -> VerifyReport:
        """:func:`recordkeeper.verify.verify_version`, and a failed verification reported to
        the service (:meth:`report_verification`); a deep one with ``record_index`` over the
        whole version registers its record identity (:meth:`_register_checked_indexes`)."""
        report = verify_version(version, **options)
        if not report.ok:
            self.report_verification(version.name, report)
        elif options.get("splits") is None:
            report = self._register_checked_indexes(version, report, options)
        return report

    def _register_checked_indexes(
        self,
        version: DatasetVersion,
        report: VerifyReport,
        options: Mapping[str, Any],
    ) -> VerifyReport:
        """After a good deep verify that checked every shard's record index: the split set
        digests from those indexes registered, as ``recordkeeper index`` does (it finds every
        index present and matching, so it reads no shard; the merge reads the indexes)."""
        if not (options.get("deep") and options.get("record_index")):
            return report
        if sum(report.record_index.values()) != report.checked:
            return report
        counts = {**report.record_index, "registered": 1}
        if report.record_index.get("matched") == report.checked and record_sets.is_registered(
            self.http, version, options.get("storage_options") or None
        ):  # the registered digests and lookup come from these very indexes: nothing to redo
            return dataclasses.replace(report, record_index=counts)
        record_sets.index_version(
            self.http,
            version.with_storage_options(options.get("storage_options") or None),
            progress=False,
        )
        return dataclasses.replace(report, record_index=counts)

    def report_verification(self, ref: str, report: VerifyReport) -> bool:
        """Tell the service that ``report`` found problems (its metrics and audit log count
        them), best-effort: a failure to report is logged, never raised, and the report is
        sent once, without retries (the first 10,000 problems of a larger report).  True if
        the service recorded it."""
        body = {
            "mode": "deep" if report.deep else "fast",
            "checked": report.checked,
            "problems": [
                {"shard": p.shard.name, "reason": p.reason}
                for p in report.problems[:MAX_SHARDS_PER_REQUEST]
            ],
        }
        path = f"/versions/{quote_segment(ref)}/verifications"
        try:
            self.http.api("POST", path, json=body, idempotent=False)
        except RecordkeeperError as exc:
            log.warning("could not report the failed verification of %s: %s", ref, exc)
            return False
        return True

    def tf_dataset(
        self, version: DatasetVersion, split: str, **options: Unpack[TfDatasetOptions]
    ) -> Any:
        # The optional TensorFlow integration sits above this layer: imported on first use, so
        # `import recordkeeper` never loads it (the one exception declared in pyproject.toml).
        from recordkeeper.tf.data import tf_dataset

        return tf_dataset(version, split, **options)

    def export_tfds(
        self, version: DatasetVersion, data_dir: str, **options: Unpack[TfdsExportOptions]
    ) -> TfdsExport:
        """:func:`recordkeeper.tfds_export.export_tfds` (imports TFDS only when called)."""
        return export_tfds(version, data_dir, **options)

    # -- aliases -----------------------------------------------------------------------------

    def set_alias(self, dataset: str, alias: str, ref: str | DatasetVersion) -> dict[str, Any]:
        """Point ``dataset@alias`` at a committed version; returns the alias record."""
        validate_dataset_name(dataset)
        validate_alias_name(alias)
        target = ref.name if isinstance(ref, DatasetVersion) else ref
        check_ref(target)
        result: dict[str, Any] = self.http.api(
            "PUT",
            f"/datasets/{quote_segment(dataset)}/aliases/{quote_segment(alias)}",
            json={"version": target},
        )
        return result

    def aliases(self, dataset: str) -> list[dict[str, Any]]:
        """Aliases of ``dataset`` (``latest`` included)."""
        validate_dataset_name(dataset)
        return list(self.http.paged(f"/datasets/{quote_segment(dataset)}/aliases"))

    def alias_history(self, dataset: str, alias: str) -> list[dict[str, Any]]:
        """Moves of one alias, newest first."""
        path = f"/datasets/{quote_segment(dataset)}/aliases/{quote_segment(alias)}/history"
        return list(self.http.paged(path))

    def delete_alias(self, dataset: str, alias: str) -> None:
        """Remove the alias ``dataset@alias``."""
        self.http.api(
            "DELETE", f"/datasets/{quote_segment(dataset)}/aliases/{quote_segment(alias)}"
        )

    # -- lifecycle -----------------------------------------------------------------------------

    def stage(
        self,
        dataset: str,
        *,
        desc: str | None = None,
        date: str | datetime.date | None = None,
        root: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        reserve: bool = False,
        content_digest: str | None = None,
        on_duplicate: OnDuplicate = "error",
        provenance: Mapping[str, Any] | None = None,
        base: str | None = None,
    ) -> DatasetVersion:
        """Stage a new version: the service answers its name and storage prefix.

        ``base`` (a reference to a committed version of ``dataset``) stages a *derived*
        version, committed with :meth:`commit`'s ``changes`` (see :meth:`Client.derive
        <recordkeeper.derive.Derivation>`, which does all of it).

        By default the version has a staged name (``coco_20231015_staged4``) and gets its number
        at commit.  ``reserve=True`` takes the number now, so the prefix carries the committed
        name (``…/coco/coco_20231015_v3/``); abandoning it, or committing a duplicate, leaves
        that number as a gap.  ``content_digest`` (implies ``reserve``) declares the content
        about to be stored: a committed version with that digest raises
        :class:`~recordkeeper.errors.DuplicateContent` (``on_duplicate="error"``), is answered
        instead with ``duplicate_of`` set and nothing staged (``"use_existing"``), or is
        ignored (``"commit"``).

        ``provenance`` is the document :func:`recordkeeper.provenance.build_provenance` makes
        (parents, sources, producer, params, ...); the service refuses it with a stable code
        (``parent_not_found``, ``invalid_params``, ...) before anything is staged.

        The prefix must lie inside the service's allowed roots (and inside ``root`` when
        given); otherwise the staged version is abandoned and
        :class:`~recordkeeper.errors.StorageRootNotAllowed` raised before anything is written.
        """
        validate_dataset_name(dataset)
        body: dict[str, Any] = {
            "desc": desc,
            "date": _date_param(date),
            "root": root,
            "metadata": dict(metadata or {}),
        }
        if reserve or content_digest is not None:
            body["reserve"] = True
        if content_digest is not None:
            body["content_digest"] = content_digest
            body["on_duplicate"] = on_duplicate
        if provenance is not None:
            validate_provenance(provenance)  # the service's rules, before anything is staged
            body["provenance"] = dict(provenance)
        if base is not None:
            check_ref(base)
            body["base"] = base
        # Not replayable: a retried stage would allocate a second number.
        data = self.http.api("POST", f"/datasets/{quote_segment(dataset)}/versions", json=body)
        staged = self.version(data)
        if staged.duplicate_of is not None:  # nothing was staged: the existing version
            return staged
        try:
            self.check_storage_prefix(staged.storage_prefix, root, staged.name)
        except (StorageRootNotAllowed, InvalidResponse):
            with contextlib.suppress(RecordkeeperError):
                self.abandon(staged)
            raise
        return staged

    def set_provenance(
        self, version: str | DatasetVersion, provenance: Mapping[str, Any]
    ) -> Provenance:
        """Replace a staged version's provenance (a committed version's is immutable:
        :class:`~recordkeeper.errors.ProvenanceImmutable`)."""
        name = version.name if isinstance(version, DatasetVersion) else version
        validate_provenance(provenance)  # the service's rules, before anything is sent
        data = self.http.api(
            "PUT",
            f"/versions/{quote_segment(name)}/provenance",
            json=dict(provenance),
            idempotent=True,
        )
        with reading_answer("a provenance"):
            return Provenance.from_dict(data, storage_options=self.storage_options or None)

    def log(self, dataset: str, *, limit: int = 20, offset: int = 0) -> list[dict[str, Any]]:
        """The dataset's published versions, newest first, like ``git log``: each entry has
        ``name``, ``number``, ``date``, ``desc``, ``parents``, ``commit`` (the producer's),
        ``compared_with`` (the base parent, else the previous version) and ``change``
        (``shards_added``/``removed``/``changed``, ``records_added``/``removed``)."""
        validate_dataset_name(dataset)
        data = self.http.api(
            "GET",
            f"/datasets/{quote_segment(dataset)}/log",
            params={"limit": limit, "offset": offset},
        )
        with reading_answer("a dataset log"):
            entries = data["data"]
            if not isinstance(entries, list):
                raise TypeError("data is not a list")
            return entries

    def children(self, ref: str | DatasetVersion) -> list[dict[str, Any]]:
        """The versions naming ``ref`` as a parent (``name``, ``dataset``, ``role``, ...)."""
        target = ref.name if isinstance(ref, DatasetVersion) else ref
        check_ref(target)
        data = self.http.api("GET", f"/versions/{quote_segment(target)}/children")
        with reading_answer("a list of versions"):
            return list(data["data"])

    def versions_from_source(self, uri: str) -> list[dict[str, Any]]:
        """The versions that recorded ``uri`` as a source, with the identity each recorded (a
        local path is asked as its ``file://`` URI, as recorded: ``provenance.source_uri``)."""
        data = self.http.api("GET", "/sources/versions", params={"uri": source_uri(uri)})
        with reading_answer("a list of versions"):
            return list(data["data"])

    def register_shards(
        self, version: str | DatasetVersion, shards: Sequence[Mapping[str, Any]]
    ) -> dict[str, int]:
        """Register shard records on a staged version, in batches the service accepts.

        Returns the summed ``registered``/``unchanged`` counts and the final ``shard_count``.
        Registering identical shards again is a no-op, so batches are safe to retry.
        """
        name = version.name if isinstance(version, DatasetVersion) else version
        if isinstance(shards, str | bytes | Mapping) or not all(
            isinstance(s, Mapping) for s in shards
        ):
            raise InvalidRequest("register_shards takes a list of shard records (mappings)")
        per_request = int(self.info().get("max_shards_per_request") or MAX_SHARDS_PER_REQUEST)
        per_request = max(1, min(per_request, MAX_SHARDS_PER_REQUEST))
        totals = {"registered": 0, "unchanged": 0, "shard_count": 0}
        for start in range(0, len(shards), per_request):
            batch = [dict(s) for s in shards[start : start + per_request]]
            answer = self.http.api(
                "POST",
                f"/versions/{quote_segment(name)}/shards",
                json={"shards": batch},
                idempotent=True,
            )
            with reading_answer("a shard registration"):
                totals["registered"] += int(answer.get("registered", 0))
                totals["unchanged"] += int(answer.get("unchanged", 0))
                totals["shard_count"] = int(answer.get("shard_count", 0))
        return totals

    def commit(
        self,
        version: str | DatasetVersion,
        *,
        on_duplicate: OnDuplicate = "error",
        changes: Mapping[str, Any] | None = None,
        leakage: Mapping[str, Any] | None = None,
    ) -> DatasetVersion:
        """Commit a staged version (idempotent).

        ``on_duplicate``: ``error`` raises :class:`~recordkeeper.errors.DuplicateContent` when a
        committed version has the same content, ``use_existing`` answers that version (and
        abandons the staged one), ``commit`` commits anyway.  ``changes`` (a derived version
        only, :mod:`recordkeeper.core.derive`): ``remove_splits``, ``rename_splits``,
        ``remove_shards`` of its base.  ``leakage``: the leakage check of the staged splits
        (:func:`recordkeeper.leakage.commit_check`) the dataset's leakage policy judges:
        :class:`~recordkeeper.errors.SplitOverlap` / ``LeakageCheckMissing`` under
        ``refuse`` (the version stays staged), :class:`~recordkeeper.errors.LeakageWarning`
        under ``warn``.
        """
        return self.version(self._commit(version, on_duplicate, changes, leakage))

    def _commit(
        self,
        version: str | DatasetVersion,
        on_duplicate: OnDuplicate,
        changes: Mapping[str, Any] | None = None,
        leakage: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        name = version.name if isinstance(version, DatasetVersion) else version
        body: dict[str, Any] = {"on_duplicate": on_duplicate}
        if changes is not None:
            body["changes"] = dict(changes)
        if leakage is not None:
            body["leakage"] = dict(leakage)
        data: dict[str, Any] = self.http.api(
            "POST", f"/versions/{quote_segment(name)}/commit", json=body, idempotent=True
        )
        warning = data.pop("leakage_warning", None) if isinstance(data, dict) else None
        if warning is not None:
            with reading_answer("a commit's leakage warning"):
                text = leakage_warning_text(data, warning)
            warnings.warn(LeakageWarning(text), stacklevel=4)
        return data

    def abandon(self, version: str | DatasetVersion) -> DatasetVersion:
        """Abandon a staged version (idempotent); committed versions cannot be abandoned."""
        name = version.name if isinstance(version, DatasetVersion) else version
        data = self.http.api("POST", f"/versions/{quote_segment(name)}/abandon", idempotent=True)
        return self.version(data)

    def deprecate(
        self, ref: str | DatasetVersion, reason: str | None = None, *, force: bool = False
    ) -> DatasetVersion:
        """Deprecate a version: it stays resolvable by name but leaves ``latest``.

        A version that trained checkpoints raises :class:`~recordkeeper.errors.VersionInUse`
        unless ``force`` (admin tokens only).
        """
        target = ref.name if isinstance(ref, DatasetVersion) else ref
        check_ref(target)
        data = self.http.api(
            "POST",
            f"/versions/{quote_segment(target)}/deprecate",
            json={"reason": reason, "force": force},
            idempotent=True,
        )
        return self.version(data)

    def finish(
        self,
        version: DatasetVersion,
        *,
        force_new: bool,
        changes: Mapping[str, Any] | None = None,
        leakage: Mapping[str, Any] | None = None,
        fetch_shards: bool = True,
    ) -> DatasetVersion:
        """Commit a staged version, keeping an identical existing one unless ``force_new``
        (``changes``: a derived version's; ``leakage``: its leakage check; see :meth:`commit`).

        ``fetch_shards=False``: the version just committed gets its shards when they are first
        read (:class:`~recordkeeper.values.FetchedSplits`), not now — a derivation's commit
        answers a 100,000-shard version without fetching its pages.

        Warns :class:`DuplicateWarning` when the content already existed and that version was
        kept.
        """
        lineage_run = _openlineage_run(self, version)
        try:
            on_duplicate: OnDuplicate = "commit" if force_new else "use_existing"
            data = self._commit(version, on_duplicate, changes, leakage)
        except BaseException:
            if lineage_run is not None:
                lineage_run.fail()
            raise
        committed = self.version(data)
        duplicate_of = committed.duplicate_of
        if not committed.splits:  # the commit answer carries no shards
            if duplicate_of is None and committed.was_staged_as(version.name):
                # This answer is what resolving the version's name answers, but the shards
                # (tests/client/test_resolve_cache.py): only they are fetched, one round trip
                # less than resolve().
                body = {**data, "ref": committed.name}
                published = body.get("state") in PUBLISHED_STATES
                if fetch_shards:
                    splits = self._splits(body, cacheable=published)
                else:
                    splits = FetchedSplits(lambda: self._splits(body, cacheable=published))
                committed = self.version(body, splits=splits)
            else:  # another version was kept: resolved as it is now
                committed = self.resolve(committed.name)
        if duplicate_of or not committed.was_staged_as(version.name):
            existing = duplicate_of or committed.name
            warnings.warn(
                f"the content is identical to {existing}; keeping that version and abandoning "
                f"{version.name} (pass force_new=True to commit a new version anyway)",
                DuplicateWarning,
                stacklevel=3,
            )
        if lineage_run is not None:
            lineage_run.complete(committed)
        return committed


def _openlineage_run(registry: Registry, staged: DatasetVersion) -> Any:
    """The OpenLineage run of publishing ``staged`` when enabled by setting (START emitted),
    else None; openlineage-python is imported only then
    (:mod:`recordkeeper.integrations.openlineage`)."""
    from recordkeeper.integrations import openlineage_settings

    if not openlineage_settings.enabled():
        return None
    try:
        from recordkeeper.integrations.openlineage import publish_events

        return publish_events(staged, url=registry.http.base_url, resolve=registry.resolve)
    except Exception:
        log.exception("could not start the OpenLineage run of publishing %s", staged.name)
        return None


def collect_splits(pages: Iterable[ShardColumns[Shard]]) -> dict[str, Split]:
    """Splits from compact pages in (split, index) order; a split may span pages."""
    parts: dict[str, list[tuple[str, dict[str, list[Any]]]]] = {}
    for page in pages:
        names = page.column("split")
        if names and names.count(names[0]) == len(names):  # one split: no scan name by name
            parts.setdefault(names[0], []).append(page.raw_slice(0, len(names)))
            continue
        start = 0
        while start < len(names):
            split = names[start]
            end = start
            while end < len(names) and names[end] == split:  # runs are long: few splits
                end += 1
            parts.setdefault(split, []).append(page.raw_slice(start, end))
            start = end
    splits: dict[str, Split] = {}
    for split, chunks in parts.items():
        prefixes = {prefix for prefix, _ in chunks}
        prefix = prefixes.pop() if len(prefixes) == 1 else ""
        columns: dict[str, list[Any]] = {}
        if len(chunks) == 1:  # the whole split in one page: its fresh lists as they are
            columns = chunks[0][1]
            chunks = []
        for chunk_prefix, chunk in chunks:
            for field, values in chunk.items():
                if field == "uri" and chunk_prefix != prefix:
                    values = [chunk_prefix + u for u in values]
                columns.setdefault(field, []).extend(values)
        splits[split] = Split.from_columns(split, ShardColumns(Shard, prefix, columns))
    return splits


def _check_version_answer(data: Any) -> None:
    """The fields of a ``Version`` answer the client relies on before reading the rest
    (``TypeError``/``KeyError``: see :func:`~recordkeeper.http.reading_answer`)."""
    if not isinstance(data, dict):
        raise TypeError(f"a {type(data).__name__} instead of an object")
    for key in ("name", "dataset"):
        if not isinstance(data[key], str):
            raise TypeError(f"{key} is a {type(data[key]).__name__}, not a string")
    if not isinstance(data.get("storage_prefix", ""), str):
        raise TypeError("storage_prefix is not a string")


def check_ref(ref: str) -> Reference:
    """Refuse a reference that is not a string or does not parse, before any request; the
    parsed reference."""
    if not isinstance(ref, str):
        raise InvalidReference(f"reference must be a string, got {type(ref).__name__}")
    return parse_reference(ref)


def _date_param(value: str | datetime.date | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return format_date(value)
