"""The ``recordkeeper`` command line (typer).

Every command takes ``--json`` for machine-readable output.  Errors print the detail and the
stable code (``error: coco has no version 7 [version_not_found]``) and exit with status 1 —
never a traceback.  ``verify`` exits 1 when it finds problems.

When the ``server`` extra is installed, ``serve``, ``db`` and ``token`` commands are added by
:func:`recordkeeper_service.cli.register`.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from recordkeeper.core.errors import RecordkeeperError

__all__ = ["app", "main", "parse_storage_options"]

app = typer.Typer(
    name="recordkeeper",
    help="Dataset versioning and lineage for TFRecord training data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
alias_app = typer.Typer(help="Movable names for versions (prod, golden, …).", no_args_is_help=True)
app.add_typer(alias_app, name="alias")

_state: dict[str, Any] = {"url": None, "token": None}
F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
StorageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        "-o",
        help="fsspec storage option KEY=VALUE (repeatable; VALUE may be JSON; "
        "dotted keys nest: client_kwargs.endpoint_url=http://…).",
    ),
]


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    console = Console(stderr=stderr, soft_wrap=False)
    if not console.is_terminal:
        # Pipes and logs: never crop names and URIs to 80 columns.
        console = Console(stderr=stderr, soft_wrap=False, width=max(console.width, 240))
    return console


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _fail(message: str, code: str | None) -> None:
    suffix = f" [{code}]" if code else ""
    sys.stderr.write(f"error: {message}{suffix}\n")
    raise typer.Exit(1)


def _handle_errors(func: F) -> F:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except RecordkeeperError as exc:
            _fail(exc.detail, exc.code)
        except KeyError as exc:
            _fail(str(exc.args[0]) if exc.args else "not found", None)
        except (ValueError, TypeError, OSError) as exc:
            _fail(str(exc), None)
        except ImportError as exc:
            _fail(f"{exc}; install the matching extra (recordkeeper[s3], [gcs], [tf])", None)
        return None

    return wrapper  # type: ignore[return-value]


def parse_storage_options(pairs: list[str] | None) -> dict[str, Any]:
    """``["anon=true", "client_kwargs.endpoint_url=http://x"]`` → nested options dict."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"storage option {pair!r} is not KEY=VALUE")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        target = options
        *parents, leaf = key.split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return options


def _client(storage_options: dict[str, Any] | None = None) -> Any:
    from recordkeeper.client import Client

    return Client(_state["url"], _state["token"], storage_options=storage_options)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


@app.callback()
def _main(
    url: Annotated[
        str | None,
        typer.Option(
            envvar="RECORDKEEPER_URL", help="Service URL [default: http://127.0.0.1:8080]"
        ),
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="RECORDKEEPER_TOKEN", help="API token.", show_default=False)
    ] = None,
) -> None:
    """Dataset versioning and lineage for TFRecord training data."""
    _state["url"] = url
    _state["token"] = token


@app.command()
@_handle_errors
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
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register existing TFRecord shards as a new version (in place or copied)."""
    import warnings

    from recordkeeper.dataset import Dataset
    from recordkeeper.storage import join_uri, list_files, to_uri

    options = parse_storage_options(storage_option)
    root = to_uri(path_or_url).rstrip("/")
    files = list_files(root, options)
    if join_uri(root, "dataset_info.json") in files:
        dataset = Dataset.from_tfds(root, name, storage_options=options)
    elif files == [root]:
        if name is None:
            raise typer.BadParameter("--name is required when publishing a single file")
        dataset = Dataset.from_files(name, [root], storage_options=options)
    else:
        dataset = Dataset.from_directory(root, name, storage_options=options)
    client = _client(options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        version = client.publish(
            dataset,
            desc=desc,
            copy_to=copy_to if copy_to is not None else copy or None,
            force_new=force_new,
            storage_options=options,
            progress=None if not as_json else False,
        )
    duplicate = any("identical" in str(w.message) for w in caught)
    if as_json:
        _print_json({**version.to_dict(), "existing": duplicate})
        return
    out = _console()
    if duplicate:
        out.print(
            f"[yellow]identical content already published as {version.name}; kept it "
            "(--force-new commits a new version)[/]"
        )
    else:
        out.print(f"published [bold]{version.name}[/]")
    out.print(f"  digest  {version.content_digest}")
    for split in sorted(version.splits.values(), key=lambda s: s.name):
        out.print(
            f"  {split.name:<12} {split.shard_count} shards  {split.record_count} records  "
            f"{_size(split.size)}"
        )


@app.command()
@_handle_errors
def resolve(
    ref: Annotated[str, typer.Argument(help="coco@latest, coco@v3, a name or coco@sha256:…")],
    expect_digest: Annotated[
        str | None, typer.Option("--expect-digest", help="Fail unless the content digest matches.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the exact version name and content digest a reference resolves to."""
    version = _client().resolve(ref, expect_digest=expect_digest, shards=False)
    if as_json:
        data = version.to_dict()
        data.pop("splits", None)
        _print_json(data)
        return
    print(f"{version.name}\t{version.content_digest}\t{version.state}")


@app.command()
@_handle_errors
def show(
    ref: Annotated[str, typer.Argument(help="Version reference.")],
    as_json: JsonOpt = False,
) -> None:
    """Show a version: splits, shards and schema."""
    version = _client().resolve(ref)
    schema = version.schema
    if as_json:
        _print_json({**version.to_dict(), "schema": schema.to_dict()})
        return
    from rich.table import Table

    out = _console()
    out.print(f"[bold]{version.name}[/]  ({version.state}, resolved from {version.ref})")
    out.print(f"  date {version.date}  desc {version.desc or '-'}  convention {version.convention}")
    out.print(f"  content {version.content_digest}")
    out.print(f"  prefix  {version.storage_prefix}")
    splits = Table(
        "split", "shards", "records", "size", "compression", "first shard", title="splits"
    )
    for split in sorted(version.splits.values(), key=lambda s: s.name):
        comps = ",".join(sorted({s.compression for s in split.shards}))
        splits.add_row(
            split.name,
            str(split.shard_count),
            str(split.record_count),
            _size(split.size),
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


@app.command("ls")
@_handle_errors
def list_(
    dataset: Annotated[str | None, typer.Argument(help="List this dataset's versions.")] = None,
    state: Annotated[str | None, typer.Option(help="Only versions in this state.")] = None,
    limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List datasets, or the versions of one dataset (newest first)."""
    from rich.table import Table

    client = _client()
    if dataset is None:
        datasets = client.datasets(limit=limit)
        if as_json:
            _print_json([d.__dict__ for d in datasets])
            return
        table = Table("dataset", "versions", "latest", "description")
        for d in datasets:
            table.add_row(d.name, str(d.version_count), d.latest or "-", d.description or "")
        _console().print(table)
        return
    versions = client.versions(dataset, state=state, limit=limit)
    if as_json:
        _print_json([{k: v for k, v in x.to_dict().items() if k != "splits"} for x in versions])
        return
    table = Table("version", "state", "date", "shards", "records", "size", "digest")
    for v in versions:
        table.add_row(
            v.name,
            v.state,
            str(v.date),
            str(v.shard_count),
            str(v.record_count),
            _size(v.size),
            (v.content_digest or "")[:19],
        )
    _console().print(table)


@app.command()
@_handle_errors
def verify(
    ref: Annotated[str, typer.Argument(help="Version reference.")],
    deep: Annotated[
        bool, typer.Option("--deep", help="Re-read and re-hash every shard (finds bit flips).")
    ] = False,
    split: Annotated[list[str] | None, typer.Option(help="Only these splits.")] = None,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check that the stored shards are the registered ones; exit 1 on any problem."""
    options = parse_storage_options(storage_option)
    version = _client(options).resolve(ref)
    report = version.verify(
        deep=deep, splits=split, storage_options=options, progress=None if not as_json else False
    )
    if as_json:
        _print_json(report.to_dict())
    else:
        out = _console()
        mode = "deep" if deep else "fast"
        if report.ok:
            rate = (
                f", {_size(int(report.bytes_read / report.seconds))}/s"
                if deep and report.seconds > 0
                else ""
            )
            out.print(
                f"[green]ok[/] {version.name}: {report.checked} shards ({mode}, "
                f"{report.seconds:.2f} s{rate})"
            )
        else:
            out.print(
                f"[red]FAILED[/] {version.name}: {len(report.problems)} of "
                f"{report.checked} shards ({mode})"
            )
            for p in report.problems:
                where = f" at offset {p.offset}" if p.offset is not None else ""
                out.print(f"  {p.shard.name}  {p.reason}{where}: {p.detail}\n    {p.uri}")
    if not report.ok:
        raise typer.Exit(1)


@app.command()
@_handle_errors
def diff(
    a: Annotated[str, typer.Argument(help="Old version reference.")],
    b: Annotated[str, typer.Argument(help="New version reference.")],
    as_json: JsonOpt = False,
) -> None:
    """Show what changed between two versions: shards, record counts, schema."""
    result = _client().diff(a, b)
    if as_json:
        _print_json(result.to_dict())
        return
    out = _console()
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


@alias_app.command("set")
@_handle_errors
def alias_set(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    alias: Annotated[str, typer.Argument(help="Alias name, e.g. prod.")],
    ref: Annotated[str, typer.Argument(help="Version reference to point at.")],
    as_json: JsonOpt = False,
) -> None:
    """Point DATASET@ALIAS at a committed version."""
    result = _client().set_alias(dataset, alias, ref)
    if as_json:
        _print_json(result)
        return
    print(f"{dataset}@{alias} -> {result.get('version')}")


@alias_app.command("ls")
@_handle_errors
def alias_ls(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    as_json: JsonOpt = False,
) -> None:
    """List a dataset's aliases (latest included)."""
    from rich.table import Table

    aliases = _client().aliases(dataset)
    if as_json:
        _print_json(aliases)
        return
    table = Table("alias", "version", "updated")
    for a in aliases:
        table.add_row(a.get("alias", ""), a.get("version", ""), str(a.get("updated_at") or ""))
    _console().print(table)


def _register_lineage_commands(main_app: typer.Typer) -> None:
    from recordkeeper.cli_lineage import register  # lineage, consumers, lock, checkpoints

    register(main_app)


def _register_service_commands() -> None:
    try:
        from recordkeeper_service.cli import register
    except ImportError:
        return  # base install: no server extra
    register(app)


_register_service_commands()
_register_lineage_commands(app)
from recordkeeper.cli_gc import register as _register_gc  # noqa: E402

_register_gc(app)  # recordkeeper gc


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
