"""Version commands: ``publish``, ``convert``, ``resolve``, ``show``, ``ls``, ``log``,
``verify``, ``diff``, ``export-tfds``."""

from __future__ import annotations

import errno
import os
import shlex
import warnings
from collections.abc import Mapping
from typing import Annotated, Any

import typer
from rich.markup import escape

from recordkeeper.cli.common import (
    CliError,
    ExitCode,
    JsonOpt,
    StorageOpt,
    connect,
    console,
    leakage_warnings,
    parse_storage_options,
    print_json,
    size,
)
from recordkeeper.core.display import counted
from recordkeeper.core.errors import InvalidRequest
from recordkeeper.core.refs import PUBLISHED_STATES
from recordkeeper.core.shards import shard_location
from recordkeeper.dataset import Dataset
from recordkeeper.local_files import local_path
from recordkeeper.provenance import Provenance
from recordkeeper.storage import join_uri, list_files, profile_of, to_uri

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the version commands to the main app."""
    app.command()(publish)
    app.command()(convert)
    app.command()(resolve)
    app.command()(show)
    app.command("ls")(list_)
    app.command()(log)
    app.command()(verify)
    app.command()(diff)
    app.command("export-tfds")(export_tfds)


def publish(
    path_or_url: Annotated[str, typer.Argument(help="Directory, TFDS build dir or file.")],
    name: Annotated[str | None, typer.Option("--name", "-n", help="Dataset name.")] = None,
    desc: Annotated[str | None, typer.Option(help="Version description slug.")] = None,
    copy_to: Annotated[
        str | None, typer.Option("--copy-to", help="Copy shards under this storage root.")
    ] = None,
    copy: Annotated[
        bool, typer.Option("--copy", help="Copy shards under the service's storage root.")
    ] = False,
    force_new: Annotated[
        bool, typer.Option("--force-new", help="Commit even if identical content exists.")
    ] = False,
    parent: Annotated[
        list[str] | None,
        typer.Option(
            "--parent",
            help="A version this one was derived from, REF[:ROLE] (role base, source, labels "
            "or a slug; repeatable). Without a role, the one parent of the same dataset is the "
            "base.",
        ),
    ] = None,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            help="A raw input outside the registry (file or prefix; repeatable): its listing "
            "identity is recorded.",
        ),
    ] = None,
    params: Annotated[
        str | None,
        typer.Option("--params", help="Parameters: a YAML or JSON file (stored canonically)."),
    ] = None,
    note: Annotated[str | None, typer.Option("--note", help="A free-text note.")] = None,
    no_code: Annotated[
        bool, typer.Option("--no-code", help="Do not record the git state of the work tree.")
    ] = False,
    hash_sources: Annotated[
        bool,
        typer.Option("--hash-sources", help="Identify sources by reading their bytes (sha256)."),
    ] = False,
    record_index: Annotated[
        bool,
        typer.Option(
            "--record-index/--no-record-index",
            help="Index each record's identity while scanning (as `recordkeeper index` would).",
        ),
    ] = True,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register existing TFRecord shards as a new version (in place or copied), with where it
    came from (--parent, --source, --params, --note; the git state is recorded)."""
    options = parse_storage_options(storage_option)
    root = to_uri(path_or_url).rstrip("/")
    if profile_of(root).local and not os.path.exists(local_path(root)):
        # a local path the user typed: file_not_found (exit 3), as for every local file
        raise FileNotFoundError(errno.ENOENT, "no such file or directory", path_or_url)
    files = list_files(root, options)
    if join_uri(root, "dataset_info.json") in files:
        dataset = Dataset.from_tfds(root, name, storage_options=options)
    elif files == [root]:
        if name is None:
            raise typer.BadParameter("--name is required when publishing a single file")
        dataset = Dataset.from_file(root, name, storage_options=options)
    else:
        dataset = Dataset.from_directory(root, name, storage_options=options)
    from recordkeeper.provenance import build_provenance

    document = build_provenance(
        dataset=dataset.name,
        parents=parent or [],
        sources=source or [],
        params=params,
        code=None if no_code else os.getcwd(),
        note=note,
        storage_options=options,
        hash_sources=hash_sources,
    )
    client = connect(options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        version = client.publish(
            dataset,
            desc=desc,
            copy_to=copy_to if copy_to is not None else copy or None,
            force_new=force_new,
            storage_options=options,
            progress=None if not as_json else False,
            provenance=document,
            record_index=record_index,
        )
    duplicate = any("identical" in str(w.message) for w in caught)
    leaks = leakage_warnings(caught)  # a warn leakage policy: shown on stderr
    if as_json:
        print_json(
            {**version.to_dict(), "existing": duplicate}
            | ({"leakage_warnings": leaks} if leaks else {})
        )
        return
    out = console()
    if duplicate:
        out.print(
            f"[yellow]identical content already published as {version.name}; kept it "
            "(--force-new commits a new version)[/]"
        )
    else:
        out.print(f"published [bold]{version.name}[/]")
        if version.number == 1:  # a misspelt --name starts a new dataset: say so
            out.print(
                f"  the first version of dataset '{version.dataset}' (was the name meant to "
                "be an existing dataset's? `recordkeeper ls` lists them)"
            )
    out.print(f"  digest  {version.content_digest}")
    for split in sorted(version.splits.values(), key=lambda s: s.name):
        out.print(
            f"  {split.name:<12} {counted(split.shard_count, 'shard')}  "
            f"{counted(split.record_count, 'record')}  "
            f"{size(split.size)}"
        )


def convert(
    ref: Annotated[str, typer.Argument(help="The version to convert: coco@v3, coco@prod, …")],
    to: Annotated[str, typer.Option("--to", help="Record format: array_record or tfrecord.")],
    group_size: Annotated[
        int | None, typer.Option("--group-size", help="ArrayRecord: records per chunk.")
    ] = None,
    compression: Annotated[
        str | None,
        typer.Option(help="TFRecord: none/gzip/zlib; ArrayRecord: format option, e.g. zstd:3."),
    ] = None,
    desc: Annotated[str | None, typer.Option(help="Version description slug.")] = None,
    root: Annotated[str | None, typer.Option(help="Storage root of the new version.")] = None,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a version's records in another format as a new version (same content digest)."""
    options = parse_storage_options(storage_option)
    format_options: dict[str, object] = {}
    stream_compression = None
    if group_size is not None:
        format_options["group_size"] = group_size
    if compression is not None and to == "tfrecord":
        stream_compression = compression
    elif compression is not None:
        format_options["compression"] = compression
    client = connect(storage_options=options or None)
    version = client.convert(
        ref,
        to=to,
        format_options=format_options or None,
        desc=desc,
        root=root,
        compression=stream_compression,
        progress=None if not as_json else False,
    )
    if as_json:
        data = version.to_dict()
        data.pop("splits", None)
        print_json(data)
        return
    print(f"{version.name}\t{version.content_digest}")


def resolve(
    ref: Annotated[str, typer.Argument(help="coco@latest, coco@v3, a name or coco@sha256:…")],
    expect_digest: Annotated[
        str | None, typer.Option("--expect-digest", help="Fail unless the content digest matches.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the exact version name and content digest a reference resolves to."""
    version = connect().resolve(ref, expect_digest=expect_digest, shards=False)
    if as_json:
        data = version.to_dict()
        data.pop("splits", None)
        print_json(data)
        return
    state = version.state + (f", {version.data_status()}" if version.data_deleted else "")
    print(f"{version.name}\t{version.content_digest}\t{state}")


def show(
    ref: Annotated[str, typer.Argument(help="Version reference.")],
    as_json: JsonOpt = False,
) -> None:
    """Show a version: splits, shards and schema."""
    version = connect().resolve(ref)
    schema = version.schema
    if as_json:
        uris = [s.uri for split in version.splits.values() for s in split.shards]
        location, under_prefix = shard_location(version.storage_prefix, uris)
        print_json(
            {
                **version.to_dict(),
                "schema": schema.to_dict(),
                "shard_location": location,
                "in_place": not under_prefix,
            }
        )
        return
    from rich.table import Table

    out = console()
    out.print(f"[bold]{version.name}[/]  ({version.state}, resolved from {version.ref})")
    if version.data_deleted:
        out.print(f"  [bold red]{version.data_status()}[/]: digests, schema and lineage kept")
    out.print(f"  date {version.date}  desc {version.desc or '-'}  convention {version.convention}")
    out.print(f"  content {version.content_digest}")
    location, under_prefix = shard_location(
        version.storage_prefix, [s.uri for split in version.splits.values() for s in split.shards]
    )
    if under_prefix:
        out.print(f"  prefix  {version.storage_prefix}")
    else:  # published in place: nothing was written under the storage prefix
        out.print(f"  shards  {location}  (registered in place, not copied)")
    for line in provenance_lines(version.provenance):
        out.print("  " + line, markup=False, highlight=False)
    splits = Table(
        "split", "shards", "records", "size", "compression", "first shard", title="splits"
    )
    for split in sorted(version.splits.values(), key=lambda s: s.name):
        comps = ",".join(sorted({s.compression for s in split.shards}))
        splits.add_row(
            split.name,
            str(split.shard_count),
            str(split.record_count),
            size(split.size),
            comps,
            split.shards[0].uri if split.shards else "",
        )
    out.print(splits)
    features = Table(
        "feature",
        "scope",
        "kind",
        "values/record",
        "presence",
        title=f"schema ({schema.record_type}, {schema.record_count} records)",
    )
    for feat in schema.features:
        count = (
            str(feat.min_count)
            if feat.min_count == feat.max_count
            else f"{feat.min_count}..{feat.max_count}"
        )
        features.add_row(feat.name, feat.scope, feat.kind, count, f"{schema.presence(feat):.0%}")
    out.print(features)


def provenance_lines(provenance: Provenance) -> list[str]:
    """What ``show`` prints of a version's provenance (nothing when none was recorded)."""
    if provenance.empty:
        return ["provenance: none recorded"]
    lines = []
    for p in provenance.parents:
        lines.append(f"parent  {p.name} ({p.role})")
    for s in provenance.sources:
        ident = (
            f"{s.identity.method} {s.identity.digest[:19]}… {s.identity.files} files "
            f"{size(s.identity.size)}"
            if s.identity
            else "identity not recorded"
        )
        lines.append(f"source  {s.uri}  [{ident}]")
    producer = provenance.producer
    if producer is not None:
        if producer.vcs == "git" and producer.commit:
            where = " ".join(
                x
                for x in (
                    producer.short,
                    f"on {producer.branch}" if producer.branch else "",
                    producer.remote or "",
                    producer.entry or "",
                )
                if x
            )
            lines.append(f"code    {where}")
            if producer.dirty and producer.diff_digest:
                lines.append(f"        uncommitted changes {producer.diff_digest[:19]}…")
        elif producer.vcs == "git":  # `git init` without a commit yet
            branch = f" (branch {producer.branch})" if producer.branch else ""
            lines.append(f"code    a git work tree with no commit yet{branch}")
        else:
            lines.append("code    unknown (not run in a git work tree)")
    if provenance.params is not None:
        lines.append(f"params  {provenance.params_digest}  {len(provenance.params)} keys")
    if provenance.command:
        # quoted as a shell would need it: `--note "more boxes"` is not two arguments
        lines.append("command " + shlex.join(provenance.command)[:300])
    env = provenance.environment
    if env is not None:
        lines.append(
            f"env     python {env.python or '?'}  tensorflow {env.tensorflow or '-'}  "
            f"recordkeeper {env.recordkeeper or '?'}"
        )
    if provenance.note:
        lines.append(f"note    {provenance.note}")
    return lines


def change_summary(change: Mapping[str, Any] | None, compared_with: str | None) -> str:
    """``+10 shards (+1,200 records), -2 shards (-240 records) vs coco_…_v2`` for ``log``."""
    if change is None or compared_with is None:
        return "first version"
    parts = []
    if change["shards_added"]:
        parts.append("+" + counted(change["shards_added"], "shard"))
    if change["shards_removed"]:
        parts.append("-" + counted(change["shards_removed"], "shard"))
    if change["shards_changed"]:
        parts.append(f"~{change['shards_changed']} changed")
    records = f"+{change['records_added']:,}/-{change['records_removed']:,} records"
    renamed = "".join(
        f", split {old} renamed {new}" for old, new in (change.get("renamed_splits") or {}).items()
    )
    return (", ".join(parts) or "no shard changed") + f" ({records}){renamed} vs {compared_with}"


#: Versions per ``GET /datasets/{name}/log`` request (its ``limit`` is at most 100).
_LOG_PAGE = 100


def log(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, help="At most this many versions.")
    ] = 20,
    as_json: JsonOpt = False,
) -> None:
    """The dataset's history like `git log`: each version's number, date, desc, parents,
    producer commit and what changed against its base parent (or the previous version)."""
    client = connect()
    entries: list[dict[str, Any]] = []
    wanted = limit + 1  # one more than shown: whether older versions were left out
    while len(entries) < wanted:  # pages of at most 100, the route's bound (-n 500 was refused)
        want = min(_LOG_PAGE, wanted - len(entries))
        page = client.log(dataset, limit=want, offset=len(entries))
        entries += page
        if len(page) < want:
            break
    more = len(entries) > limit
    entries = entries[:limit]
    if as_json:
        print_json(entries)
        return
    out = console()
    for entry in entries:
        commit = entry.get("commit")
        code = (commit[:7] + ("+dirty" if entry.get("dirty") else "")) if commit else "-"
        out.print(
            f"[bold yellow]v{entry['number']}[/] [bold]{entry['name']}[/]  {entry['date']}"
            + ("  [red](deprecated)[/]" if entry["state"] == "deprecated" else "")
        )
        parents = ", ".join(f"{p['name']} ({p['role']})" for p in entry["parents"]) or "-"
        out.print(f"    desc     {entry['desc'] or '-'}", markup=False, highlight=False)
        out.print(f"    parents  {parents}", markup=False, highlight=False)
        out.print(f"    code     {code}", markup=False, highlight=False)
        out.print(
            f"    change   {change_summary(entry['change'], entry['compared_with'])}",
            markup=False,
            highlight=False,
        )
    if not entries:
        out.print(f"no published version of {dataset}")
    elif more:
        out.print(
            f"(older versions not shown: recordkeeper log {dataset} -n {limit + 20})",
            markup=False,
            highlight=False,
        )


def list_(
    dataset: Annotated[str | None, typer.Argument(help="List this dataset's versions.")] = None,
    state: Annotated[
        list[str] | None,
        typer.Option(
            help="Only versions in this state (repeatable): staged, committed, deprecated, "
            "abandoned.",
            show_default="committed and deprecated",
        ),
    ] = None,
    all_states: Annotated[
        bool,
        typer.Option("--all", help="Include staged and abandoned versions (publish attempts) too."),
    ] = False,
    limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List datasets, or the published versions of one dataset, newest first (--all adds
    staged and abandoned ones)."""
    from rich.table import Table

    if state and all_states:
        raise typer.BadParameter("give --state or --all, not both")
    if dataset is None and (state or all_states):
        raise typer.BadParameter("--state and --all apply to a dataset's versions: ls DATASET")
    client = connect()
    if dataset is None:
        datasets = client.datasets(limit=limit)
        if as_json:
            print_json([d.__dict__ for d in datasets])
            return
        table = Table("dataset", "versions", "latest", "description")
        for d in datasets:
            table.add_row(d.name, str(d.version_count), d.latest or "-", d.description or "")
        console().print(table)
        return
    states = None if all_states else state or PUBLISHED_STATES
    versions = client.versions(dataset, state=states, limit=limit)
    if as_json:
        print_json([{k: v for k, v in x.to_dict().items() if k != "splits"} for x in versions])
        return
    table = Table("version", "state", "date", "shards", "records", "size", "digest")
    for v in versions:
        table.add_row(
            v.name,
            v.state + (f", {v.data_status()}" if v.data_deleted else ""),
            str(v.date),
            str(v.shard_count),
            str(v.record_count),
            size(v.size),
            (v.content_digest or "")[:19],
        )
    console().print(table)


def verify(
    ref: Annotated[str, typer.Argument(help="Version reference.")],
    deep: Annotated[
        bool, typer.Option("--deep", help="Re-read and re-hash every shard (finds bit flips).")
    ] = False,
    split: Annotated[list[str] | None, typer.Option(help="Only these splits.")] = None,
    record_index: Annotated[
        bool,
        typer.Option(
            "--record-index",
            help="With --deep: check each shard's record index against its records in the "
            "same read (write a missing one, rewrite a wrong one) and register the version's "
            "record identity.",
        ),
    ] = False,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check that the stored shards are the registered ones; exit 4 on any problem."""
    options = parse_storage_options(storage_option)
    version = connect(options).resolve(ref)
    for name in split or ():
        try:
            version.split(name)
        except KeyError as exc:  # an unknown --split: the message names the splits
            raise CliError(exc.args[0], InvalidRequest.code) from None
    if record_index and not deep:
        raise CliError("--record-index needs --deep (it reads the records)", InvalidRequest.code)
    report = version.verify(
        deep=deep,
        splits=split,
        storage_options=options,
        progress=None if not as_json else False,
        record_index=record_index,
    )
    if as_json:
        print_json(report.to_dict())
    else:
        out = console()
        mode = "deep" if deep else "fast"
        if report.ok:
            rate = (
                f", {size(int(report.bytes_read / report.seconds))}/s"
                if deep and report.seconds > 0
                else ""
            )
            out.print(
                f"[green]ok[/] {version.name}: {counted(report.checked, 'shard')} ({mode}, "
                f"{report.seconds:.2f} s{rate})"
            )
        else:
            out.print(
                f"[red]FAILED[/] {version.name}: {len(report.problems)} of "
                f"{counted(report.checked, 'shard')} ({mode})"
            )
            for p in report.problems:
                where = f" at offset {p.offset}" if p.offset is not None else ""
                out.print(f"  {p.shard.name}  {p.reason}{where}: {p.detail}\n    {p.uri}")
        for note in report.notes:
            out.print(f"[yellow]note[/] {escape(note)}")
        if report.record_index:
            counts = ", ".join(f"{n} {what}" for what, n in sorted(report.record_index.items()))
            out.print(f"record indexes: {counts}")
    if not report.ok:
        raise typer.Exit(int(ExitCode.VERIFICATION_FAILED))


def diff(
    a: Annotated[str, typer.Argument(help="Old version reference.")],
    b: Annotated[str, typer.Argument(help="New version reference.")],
    as_json: JsonOpt = False,
    records: Annotated[
        bool, typer.Option("--records", help="Record by record, from the record indexes.")
    ] = False,
    jsonl: Annotated[
        str | None,
        typer.Option(
            "--jsonl",
            help="With --records: write every change as JSON lines here (identities).",
        ),
    ] = None,
    decode: Annotated[
        bool,
        typer.Option(
            "--decode/--no-decode",
            help="With --records: read the sampled records added and removed and show them "
            "decoded (--no-decode: identities only, no shard read).",
        ),
    ] = True,
    storage_option: StorageOpt = None,
) -> None:
    """Show what changed between two versions: shards, record counts, schema (with --records:
    records added, removed, common, moved and duplicated, per split, a sample decoded)."""
    if records:
        _record_diff(a, b, as_json, jsonl, decode, parse_storage_options(storage_option))
        return
    result = connect().diff(a, b)
    if as_json:
        print_json(result.to_dict())
        return
    out = console()
    out.print(
        f"[bold]{result.old}[/] → [bold]{result.new}[/]"
        + ("  (same content)" if result.same_content else "")
    )
    for s in result.splits:
        delta = f"{s.record_delta:+d}" if s.record_delta else "±0"
        out.print(
            f"  {s.split:<12} records {s.old_records} → {s.new_records} ({delta}), "
            f"shards {s.old_shards} → {s.new_shards}"
        )
    out.print(
        f"  shards: {len(result.added)} added, {len(result.removed)} removed, "
        f"{len(result.changed)} changed, {result.unchanged_shards} unchanged"
    )
    for c in result.shards[:50]:
        mark = {"added": "+", "removed": "-", "changed": "~"}[c.change]
        shard = c.new or c.old
        out.print(f"    {mark} {c.split}[{c.index}] {shard.uri if shard else ''}")
    if result.schema:
        out.print("  schema:")
        for f in result.schema:
            out.print(f"    {f.describe()}")
    else:
        out.print("  schema: unchanged")


def export_tfds(
    ref: Annotated[str, typer.Argument(help="Version reference (a committed version).")],
    data_dir: Annotated[str, typer.Argument(help="Local TFDS data directory to write into.")],
    name: Annotated[
        str | None, typer.Option("--name", help="TFDS dataset name (default: the dataset's).")
    ] = None,
    tfds_version: Annotated[
        str | None,
        typer.Option("--tfds-version", help="TFDS version X.Y.Z (default: vN -> N.0.0)."),
    ] = None,
    link: Annotated[
        bool | None,
        typer.Option(
            "--link/--copy",
            help="Hard-link local uncompressed shards (fail if impossible) / always copy.",
            show_default="link when possible, else copy",
        ),
    ] = None,
    supervised: Annotated[
        str | None,
        typer.Option("--supervised", help="INPUT,TARGET feature names for as_supervised."),
    ] = None,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a version as a TFDS dataset (tfds.load(name, data_dir=DATA_DIR) reads it)."""
    options = parse_storage_options(storage_option)
    keys: tuple[str, str] | None = None
    if supervised is not None:
        parts = tuple(p.strip() for p in supervised.split(","))
        if len(parts) != 2 or not all(parts):
            raise typer.BadParameter("--supervised takes two feature names: INPUT,TARGET")
        keys = (parts[0], parts[1])
    version = connect(options).resolve(ref)
    export = version.export_tfds(
        data_dir,
        name=name,
        tfds_version=tfds_version,
        link=link,
        supervised_keys=keys,
        features=None,
        storage_options=options or None,
        progress=None if not as_json else False,
    )
    if as_json:
        print_json(export.to_dict())
        return
    out = console()
    verb = "already exported" if export.existing else "exported"
    out.print(f"{verb} [bold]{export.version}[/] as {export.load_name}")
    out.print(f"  builder dir  {export.builder_dir}")
    for split, lengths in sorted(export.splits.items()):
        shards, records = counted(len(lengths), "shard"), counted(sum(lengths), "record")
        out.print(f"  {split:<12} {shards}  {records}")
    methods = export.to_dict()["methods"]
    if methods:
        out.print("  shards       " + ", ".join(f"{n} {m}" for m, n in sorted(methods.items())))
    for note in export.notes:
        out.print(f"  [yellow]note[/] {note}")
    out.print(f"  read with    tfds.load({export.load_name!r}, data_dir={export.data_dir!r})")


def _record_diff(
    a: str, b: str, as_json: bool, jsonl: str | None, decode: bool, options: dict[str, Any]
) -> None:
    from recordkeeper.cli.records import print_record_diff, write_jsonl

    client = connect(options)
    # resolved once: the output names the versions compared (as `diff` without --records
    # does), not `coco@latest` or `coco@records:sha256:…`
    va, vb = client.registry.resolve(a), client.registry.resolve(b)
    if jsonl is None:
        result = client.registry.diff(va, vb, records=True, decode=decode)
    else:
        with open(jsonl, "w", encoding="utf-8") as stream:
            emit = write_jsonl(stream)
            result = client.registry.diff(va, vb, records=True, emit=emit, decode=decode)
    if as_json:
        print_json(result.to_dict())
    else:
        print_record_diff(va.name, vb.name, result)
