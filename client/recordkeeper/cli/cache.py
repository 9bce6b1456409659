"""The shard cache commands: ``pull`` and ``cache ls|du|clear``
(:mod:`recordkeeper.shard_cache`)."""

from __future__ import annotations

from typing import Annotated

import typer

from recordkeeper.cli.common import (
    JsonOpt,
    StorageOpt,
    connect,
    console,
    parse_storage_options,
    print_json,
    size,
)
from recordkeeper.core.display import counted
from recordkeeper.shard_cache import ShardCache

__all__ = ["cache_app", "register"]

cache_app = typer.Typer(
    help="The local shard cache (RECORDKEEPER_CACHE_DIR, RECORDKEEPER_CACHE_MAX_SIZE).",
    no_args_is_help=True,
)

CacheDirOpt = Annotated[
    str | None,
    typer.Option(
        "--cache-dir",
        help="Cache directory (default: RECORDKEEPER_CACHE_DIR or the "
        "per-user cache dir, ~/.cache/recordkeeper).",
    ),
]
MaxSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--max-size",
        help="Bound of the cache, e.g. 200GB or 10GiB (default: "
        "RECORDKEEPER_CACHE_MAX_SIZE or 50GiB).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add ``pull`` and ``cache`` to the main app."""
    app.command()(pull)
    app.add_typer(cache_app, name="cache")


def pull(
    ref: Annotated[str, typer.Argument(help="Version to pull, e.g. coco@v3.")],
    split: Annotated[
        list[str] | None, typer.Option("--split", help="Only this split (repeatable).")
    ] = None,
    verify: Annotated[
        str,
        typer.Option(
            "--verify", help="Check cached entries: fast (size and mtime), deep (re-hash) or none."
        ),
    ] = "fast",
    workers: Annotated[int, typer.Option("--workers", help="Shards downloaded at once.")] = 8,
    cache_dir: CacheDirOpt = None,
    max_size: MaxSizeOpt = None,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Download a version's shards into the local shard cache, each verified against its
    registered sha256 (shards already cached are checked and kept)."""
    if verify not in ("fast", "deep", "none"):
        raise typer.BadParameter("--verify must be fast, deep or none")
    cache = ShardCache(cache_dir, max_size)
    client = connect(parse_storage_options(storage_option))
    version = client.resolve(ref)
    report = cache.pull(
        version,
        split,
        verify=None if verify == "none" else verify,  # type: ignore[arg-type]
        workers=workers,
        progress=None if not as_json else False,
    )
    if as_json:
        print_json(report.to_dict())
        return
    console().print(
        f"[bold]{report.version}[/] {counted(report.shards, 'shard')} in {cache.directory}: "
        f"{report.downloaded} downloaded ({size(report.downloaded_bytes)}"
        + (f", {report.refetched} re-fetched: bad cache entries" if report.refetched else "")
        + f"), {report.cached} already cached"
    )


@cache_app.command("ls")
def cache_ls(cache_dir: CacheDirOpt = None, as_json: JsonOpt = False) -> None:
    """The versions pulled into the cache and how much of each is still there."""
    cache = ShardCache(cache_dir)
    versions = cache.versions()
    if as_json:
        print_json({"directory": str(cache.directory), "versions": [v.to_dict() for v in versions]})
        return
    out = console()
    for v in versions:
        splits = ",".join(v.splits)
        out.print(
            f"{v.name:<40} {splits:<20} {v.cached_shards:>6}/{v.shards:<6} shards "
            f"{size(v.cached_size):>10} of {size(v.size)}"
        )
    if not versions:
        out.print(f"nothing pulled into {cache.directory}")


@cache_app.command("du")
def cache_du(cache_dir: CacheDirOpt = None, as_json: JsonOpt = False) -> None:
    """How much the cache holds (distinct shards: shared ones count once) and its bound."""
    cache = ShardCache(cache_dir)
    entries = cache.entries()
    used = sum(e.size for e in entries)
    if as_json:
        print_json(
            {
                "directory": str(cache.directory),
                "entries": len(entries),
                "size": used,
                "max_size": cache.max_size,
            }
        )
        return
    console().print(
        f"{cache.directory}: {counted(len(entries), 'shard')}, {size(used)} of "
        f"{size(cache.max_size)}"
    )


@cache_app.command("clear")
def cache_clear(
    refs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Version names to remove (default: everything); shards another "
            "cached version uses stay."
        ),
    ] = None,
    cache_dir: CacheDirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove cached shards (all, or those of the named versions); shards a running reader
    holds stay."""
    cache = ShardCache(cache_dir)
    count, freed = cache.clear(refs or None)
    if as_json:
        print_json({"removed": count, "freed": freed})
        return
    console().print(f"removed {counted(count, 'shard')} ({size(freed)}) from {cache.directory}")
