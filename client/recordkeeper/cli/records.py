"""Record identity commands: ``index``, ``check-leakage`` (``diff --records`` is in versions)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from recordkeeper.cli.common import (
    CliError,
    ExitCode,
    JsonOpt,
    StorageOpt,
    connect,
    console,
    parse_storage_options,
    print_json,
)
from recordkeeper.core.display import counted
from recordkeeper.core.record_diff import RecordDiff
from recordkeeper.core.record_identity import DEFAULT_WIDTH, IdentityKind

__all__ = [
    "DecodeOpt",
    "print_features",
    "print_record_diff",
    "print_sampled",
    "register",
    "write_jsonl",
]

KindOpt = Annotated[
    str, typer.Option("--kind", help="Record identity: bytes, or example (canonical Example).")
]
WidthOpt = Annotated[int, typer.Option("--width", help="Bytes per record identity (16 to 32).")]
DecodeOpt = Annotated[
    bool,
    typer.Option(
        "--decode/--no-decode",
        help="Read the sampled records from the shards holding them and show them decoded "
        "(--no-decode: identities only, no shard read).",
    ),
]


def register(app: typer.Typer) -> None:
    """Add the record identity commands to the main app."""
    app.command()(index)
    app.command("check-leakage")(check_leakage)
    app.command("leakage-policy")(leakage_policy)
    app.command("which-checkpoints")(which_checkpoints)
    app.command()(head)


def head(
    ref: Annotated[str, typer.Argument(help="Version reference (coco@latest).")],
    split: Annotated[
        str | None, typer.Option("--split", help="split to read [default: train, else the first]")
    ] = None,
    n: Annotated[int, typer.Option("-n", "--records", min=0, help="records to show")] = 5,
    width: Annotated[
        int, typer.Option("--width", min=8, help="characters of a text value shown")
    ] = 64,
    record_sample: Annotated[
        bool,
        typer.Option(
            "--record-sample",
            help="also store the first records of every split as the version's sample "
            "(shown on its UI page)",
        ),
    ] = False,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a version's first records with their features decoded (tf.train.Example and
    SequenceExample; other records as a hex prefix).  With --record-sample, also store the
    first -n records of every split (at most 10) as the version's sample records."""
    from recordkeeper.core.record_sample import MAX_SAMPLE_RECORDS, record_row

    client = connect(parse_storage_options(storage_option))
    version = client.resolve(ref)
    names = sorted(version.splits)
    chosen = (
        split if split is not None else ("train" if "train" in names else names[0] if names else "")
    )
    if chosen not in version.splits:
        raise CliError(
            f"{version.name} has no split {chosen!r}; splits: {', '.join(names) or 'none'}",
            "not_found",
            ExitCode.NOT_FOUND,
        )
    rows = [record_row(i, r, width=width, cap=False) for i, r in enumerate(version.head(chosen, n))]
    if record_sample:
        stored = client.record_sample(version.name, records=min(n, MAX_SAMPLE_RECORDS), width=width)
        if not as_json:
            count = sum(len(s["records"]) for s in stored["splits"])
            splits = len(stored["splits"])
            console().print(
                f"[bold]{version.name}[/]: stored a sample of {count} "
                f"record{'' if count == 1 else 's'} ({splits} split{'' if splits == 1 else 's'}), "
                "shown on its UI page"
            )
    if as_json:
        answer: dict[str, Any] = {"version": version.name, "split": chosen, "records": rows}
        if record_sample:
            answer["sample"] = stored
        print_json(answer)
        return
    out = console()
    total = version.splits[chosen].record_count
    out.print(f"[bold]{version.name}[/] {chosen}: first {len(rows)} of {total:,} records")
    for row in rows:
        out.print(f"[bold]#{row['index']}[/] ({row['size']} bytes)")
        print_features(row, "  ")


def print_features(row: Mapping[str, Any], indent: str) -> None:
    """A decoded record's features as ``head`` shows them, one line per feature (a bytes
    record: its hex prefix on one line)."""
    from recordkeeper.core.record_sample import MAX_SAMPLE_VALUES

    out = console()
    if row["kind"] == "bytes":
        out.print(f"{indent}{row['features']}", markup=False, highlight=False)
        return
    for name, values in row["features"].items():
        text = json.dumps(values, ensure_ascii=False)
        if isinstance(values, list) and len(values) > MAX_SAMPLE_VALUES:
            # 784 pixels per record filled the terminal; the UI's sample cuts there too
            cut = json.dumps(values[:MAX_SAMPLE_VALUES], ensure_ascii=False)
            text = f"{cut[:-1]}, …] ({len(values):,} values; --json shows all)"
        # one line per feature, however long: in a pipe rich broke it at 240 columns
        out.print(f"{indent}{name}: {text}", markup=False, highlight=False, soft_wrap=True)


def print_sampled(
    mark: str, identities: Sequence[str], decoded: Sequence[Mapping[str, Any]]
) -> None:
    """Sampled records of a record diff or leakage pair: each identity, and when decoded the
    shard and place it was read from and its features (or why it could not be read)."""
    out = console()
    if not decoded:
        for h in identities:
            out.print(f"{mark}{h}", markup=False, highlight=False)
        return
    for row in decoded:
        if "error" in row:
            out.print(
                f"{mark}{row['record']}  (not read: {row['error']})", markup=False, highlight=False
            )
            continue
        out.print(
            f"{mark}{row['record']}  {row['shard']} #{row['position']} ({row['size']} bytes)",
            markup=False,
            highlight=False,
        )
        print_features(row, " " * (len(mark) + 2))


def index(
    ref: Annotated[str, typer.Argument(help="Version to index.")],
    kind: KindOpt = "bytes",
    width: WidthOpt = DEFAULT_WIDTH,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Give a version record identity: a record index beside each shard (resumable: indexed
    shards are skipped), then its set digests registered."""
    client = connect(parse_storage_options(storage_option))
    answer = client.index(ref, kind=_kind(kind), width=width)
    if as_json:
        print_json(answer)
        return
    out = console()
    out.print(f"[bold]{answer['version']}[/] records {answer['records_digest']}")
    for s in answer["splits"]:
        out.print(f"  {s['split']:<12} {s['records']:>10} records  {s['digest']}")


def _kind(kind: str) -> IdentityKind:
    from recordkeeper.core.record_identity import validate_identity

    return validate_identity(kind, DEFAULT_WIDTH)[0]


def check_leakage(
    ref: Annotated[str, typer.Argument(help="Version whose evaluation splits are checked.")],
    against: Annotated[
        list[str] | None,
        typer.Option("--against", help="Another version whose training splits count too."),
    ] = None,
    max_rate: Annotated[
        float, typer.Option("--max-rate", help="Leak rate tolerated per pair (0: none).")
    ] = 0.0,
    kind: KindOpt = "bytes",
    width: WidthOpt = DEFAULT_WIDTH,
    decode: DecodeOpt = True,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Records of a version's evaluation splits found in its other splits or in the training
    splits of other versions, a sample of them decoded.  Exits 4 when a pair leaks more than
    --max-rate (for CI)."""
    client = connect(parse_storage_options(storage_option))
    pairs = client.check_leakage(ref, against or [], kind=_kind(kind), width=width, decode=decode)
    failed = [p for p in pairs if p.leaked and p.rate > max_rate]
    if as_json:
        print_json({"ok": not failed, "pairs": [p.to_dict() for p in pairs]})
    else:
        out = console()
        if not pairs:  # it printed nothing and exited 0: a CI log that says nothing was checked
            out.print(
                f"nothing checked: {ref} has no evaluation split (a split not named train…) "
                "with another split to compare it with"
                + ("" if against else "; --against adds other versions' training splits")
            )
        for p in pairs:
            mark = "[red]LEAK[/]" if p in failed else "ok  "
            out.print(
                f"{mark} {p.ref}:{p.split} in {p.other_ref}:{p.other_split}: "
                f"{p.leaked}/{p.records} records ({p.rate:.2%}), {p.distinct} distinct"
            )
            print_sampled("       ", p.sample, p.decoded)
    if failed:
        raise typer.Exit(int(ExitCode.VERIFICATION_FAILED))


def leakage_policy(
    dataset: Annotated[str, typer.Argument(help="Dataset name.")],
    mode: Annotated[
        str | None,
        typer.Option(
            "--set",
            help="off, warn (commit, with a warning) or refuse (refuse the commit) when a "
            "version's evaluation split shares records with another split.",
        ),
    ] = None,
    max_rate: Annotated[
        float | None,
        typer.Option("--max-rate", help="Leak rate tolerated per split pair (0: none)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Show a dataset's leakage policy, or set it (--set, a write token): checked when its
    versions are committed."""
    client = connect()
    if mode is None and max_rate is not None:
        mode = str(client.leakage_policy(dataset)["mode"])
    if mode is None:
        policy = client.leakage_policy(dataset)
    else:
        policy = client.set_leakage_policy(
            dataset, mode, max_rate=0.0 if max_rate is None else max_rate
        )
    if as_json:
        print_json(policy)
        return
    rate = f", max rate {policy['max_rate']:.2%}" if policy["mode"] != "off" else ""
    origin = "" if policy["source"] == "dataset" else " (none set)"
    console().print(f"{dataset}: leakage policy {policy['mode']}{rate}{origin}")


def which_checkpoints(
    dataset: Annotated[
        str | None, typer.Argument(help="Dataset whose published versions are searched.")
    ] = None,
    version: Annotated[
        list[str] | None,
        typer.Option("--version", help="Search this version (instead of a whole dataset)."),
    ] = None,
    identity: Annotated[
        str | None,
        typer.Option(
            "--hash",
            help="The record's identity in full hex (32 digits at the default width), as "
            "`diff --records` and `check-leakage` list them.",
        ),
    ] = None,
    record_file: Annotated[
        Path | None, typer.Option("--record-file", help="A file holding the record's bytes.")
    ] = None,
    direct: Annotated[
        bool, typer.Option("--direct", help="Only checkpoints whose own segment used it.")
    ] = False,
    storage_option: StorageOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which checkpoints saw a record: the shards holding it, their versions and every
    checkpoint trained on them, from record lookups and indexes (no shard is read)."""
    if (identity is None) == (record_file is None):
        raise typer.BadParameter("give exactly one of --hash or --record-file")
    if (dataset is None) == (not version):
        raise typer.BadParameter("give a DATASET or --version (one or more), not both")
    client = connect(parse_storage_options(storage_option))
    record: Any = identity if identity is not None else Path(record_file or "").read_bytes()
    answer = client.record_lineage(
        record, dataset=dataset, versions=version or None, transitive=not direct
    )
    if as_json:
        print_json(answer.to_json())
        return
    out = console()
    for kind, h in answer.identities.items():
        out.print(f"record {kind} {h}")
    if not answer.found:
        out.print(f"not found in {len(answer.searched)} indexed version(s)")
    for s in answer.shards:
        out.print(
            f"  {s['version']}:{s['split']} shard {s['index']}: "
            f"{counted(s['copies'], 'copy', 'copies')}  {s['uri']}"
        )
    for c in answer.checkpoints:
        how = "direct" if c.direct else "inherited"
        out.print(f"  checkpoint {c.ref} (step {c.step}, {how}, {c.state})")
    if answer.not_indexed:
        out.print(
            f"[yellow]not indexed (not searched):[/] {', '.join(answer.not_indexed)} "
            "— run recordkeeper index on them"
        )


def write_jsonl(stream: IO[str]) -> Any:
    """An ``emit`` callback writing one JSON line per record of a record diff."""

    def emit(category: str, split: str, identity: bytes) -> None:
        stream.write(json.dumps({"change": category, "split": split, "record": identity.hex()}))
        stream.write("\n")

    return emit


def print_record_diff(a: str, b: str, result: RecordDiff) -> None:
    out = console()
    out.print(
        f"[bold]{a}[/] → [bold]{b}[/] records" + ("  (same records)" if result.identical else "")
    )
    for name in sorted(result.splits):
        s = result.splits[name]
        out.print(
            f"  {name:<12} {s.records_a} → {s.records_b}: +{s.added} -{s.removed} "
            f"={s.common}; duplicates {s.duplicates_a} → {s.duplicates_b}"
        )
        print_sampled("      + ", s.sample_added, s.decoded_added)
        print_sampled("      - ", s.sample_removed, s.decoded_removed)
    for (x, y), n in sorted(result.moved.items()):
        out.print(f"  moved {x} → {y}: {n}")
    out.print(f"  new to {b}: {result.new}; gone from {a}: {result.gone}")
