"""``recordkeeper derive``: a new version as a change of another, its unchanged shards
referenced (see :mod:`recordkeeper.derive`)."""

from __future__ import annotations

import os
import warnings
from typing import Annotated

import typer

from recordkeeper.cli.common import (
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
from recordkeeper.storage import to_uri

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``derive`` command to the main app."""
    app.command()(derive)


def _split_and_uri(text: str) -> tuple[str, str]:
    split, sep, path = text.partition("=")
    if not sep or not split or not path:
        raise typer.BadParameter(f"{text!r}: expected SPLIT=PATH (e.g. train=s3://raw/x.tfrecord)")
    return split, to_uri(path)


def derive(
    base: Annotated[str, typer.Argument(help="The base version: coco@v2, a name, an alias…")],
    desc: Annotated[str | None, typer.Option(help="Version description slug.")] = None,
    add_shard: Annotated[
        list[str] | None,
        typer.Option(
            "--add-shard",
            help="Add an existing record file to a split, registered in place: SPLIT=PATH "
            "(repeatable; appended after the base's shards of the split, in the order given).",
        ),
    ] = None,
    remove_split: Annotated[
        list[str] | None,
        typer.Option("--remove-split", help="Leave a base split out (repeatable)."),
    ] = None,
    rename_split: Annotated[
        list[str] | None,
        typer.Option("--rename-split", help="Keep a base split under a new name: OLD=NEW."),
    ] = None,
    replace_split: Annotated[
        list[str] | None,
        typer.Option(
            "--replace-split",
            help="Drop a base split; the --add-shard files of that split are the whole split.",
        ),
    ] = None,
    remove_shard: Annotated[
        list[str] | None,
        typer.Option(
            "--remove-shard",
            help="Leave a base shard out: SPLIT:INDEX (its position in the base) or its URI.",
        ),
    ] = None,
    parent: Annotated[
        list[str] | None,
        typer.Option("--parent", help="Another parent, REF[:ROLE] (the base is recorded)."),
    ] = None,
    source: Annotated[
        list[str] | None, typer.Option("--source", help="A raw input outside the registry.")
    ] = None,
    params: Annotated[
        str | None, typer.Option("--params", help="Parameters: a YAML or JSON file.")
    ] = None,
    note: Annotated[str | None, typer.Option("--note", help="A free-text note.")] = None,
    no_code: Annotated[
        bool, typer.Option("--no-code", help="Do not record the git state of the work tree.")
    ] = False,
    hash_sources: Annotated[
        bool,
        typer.Option("--hash-sources", help="Identify sources by reading their bytes (sha256)."),
    ] = False,
    force_new: Annotated[
        bool, typer.Option("--force-new", help="Commit even if identical content exists.")
    ] = False,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Commit a new version as a change of BASE: add files in place, remove or rename splits,
    remove shards; the base's other shards are referenced, never copied or read."""
    options = parse_storage_options(storage_option)
    client = connect(options)
    d = client.derive(
        base,
        desc=desc,
        force_new=force_new,
        storage_options=options,
        parents=parent or [],
        sources=source or [],
        params=params,
        code=None if no_code else os.getcwd(),
        note=note,
        hash_sources=hash_sources,
    )
    for split in replace_split or []:
        d.replace_split(split)
    for split in remove_split or []:
        d.remove_split(split)
    for text in rename_split or []:
        old, sep, new = text.partition("=")
        if not sep:
            raise typer.BadParameter(f"--rename-split {text!r}: expected OLD=NEW")
        d.rename_split(old, new)
    if remove_shard:
        d.remove_shards(*remove_shard)
    for text in add_shard or []:
        target, uri = _split_and_uri(text)
        d.add_files(target, [uri])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        version = d.commit()
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
        out.print(f"[yellow]identical content already published as {version.name}; kept it[/]")
    else:
        out.print(f"derived [bold]{version.name}[/] from {d.base}")
    out.print(f"  digest  {version.content_digest}")
    for part in sorted(version.splits.values(), key=lambda s: s.name):
        out.print(
            f"  {part.name:<12} {counted(part.shard_count, 'shard')}  "
            f"{counted(part.record_count, 'record')}  "
            f"{size(part.size)}"
        )
