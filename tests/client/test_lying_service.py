"""Issue 21, item 7: a server or proxy that lies, and a client that used to trust it.

A fake service (a real HTTP server on 127.0.0.1, :mod:`tests.client._fake_service`) answers
crafted JSON.  Before, ``verify(deep=True)`` read local files outside every allowed root (``..``
paths) and posted their existence and size back; the writer wrote under a ``storage_prefix``
outside the roots; an endless body grew the client without bound; a cursor that never advances
looped forever; a 302 crashed ``resolve`` with ``TypeError`` and ``show``/``verify`` printed a
traceback.  Now the client applies the core's root rules to what it is told, bounds bodies and
paging, refuses redirects with a typed error naming the ``Location``, and turns answers it
cannot read into ``invalid_response``.  Each case runs through the Python API and through the
CLI in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from tests.client._fake_service import (
    FakeService,
    Reply,
    Seen,
    info,
    shard_page,
    version,
)
from tests.client._records import sample_examples, write_tfrecord

#: recordkeeper.http.MAX_RESPONSE_BYTES (stated here: the tests also run against older code)
MAX_RESPONSE_BYTES = 64 * 2**20
NAME = "coco_20261201_v1"
STAGED = "coco_20261201_staged1"


@pytest.fixture
def fake() -> Iterator[FakeService]:
    with FakeService() as service:
        yield service


@pytest.fixture
def store(tmp_path: Path) -> str:
    """The one allowed root (a directory URI ending in '/'); ``tmp_path/secret.txt`` and
    ``tmp_path/outside/`` lie outside it."""
    root = tmp_path / "store"
    root.mkdir()
    (tmp_path / "secret.txt").write_bytes(b"not for the service's eyes\n" * 100)
    return root.as_uri() + "/"


def client_for(fake: FakeService) -> rk.Client:
    return rk.Client(fake.url, retries=0)


def cli(fake: FakeService, *args: str) -> subprocess.CompletedProcess[str]:
    """``recordkeeper ARGS`` against the fake service, in a subprocess (bounded in time)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECORDKEEPER_")}
    env["RECORDKEEPER_URL"] = fake.url
    result = subprocess.run(
        [sys.executable, "-m", "recordkeeper.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def serve_version(fake: FakeService, roots: list[str], page: Any) -> None:
    fake.route("GET", "/info", Reply(body=info(roots)))
    fake.route("GET", f"/versions/{NAME}", Reply(body=version(NAME, prefix=roots[0])))
    fake.route("GET", f"/versions/{NAME}/shards", page if callable(page) else Reply(body=page))
    fake.route("POST", f"/versions/{NAME}/verifications", Reply(201, {"recorded": True}))


# -- answers of the wrong shape ----------------------------------------------------------------

MALFORMED_VERSIONS: dict[str, Any] = {
    "not-json": b"<html>a proxy's page</html>",
    "a-list": [],
    "name-not-a-string": {**version(NAME), "name": 5},
    "no-dataset": {k: v for k, v in version(NAME).items() if k != "dataset"},
    "a-bad-date": {**version(NAME), "date": "yesterday"},
    "prefix-not-a-string": {**version(NAME), "storage_prefix": ["x"]},
}

MALFORMED_PAGES: dict[str, Any] = {
    "compact-a-string": {**shard_page("file:///x/", ["a"]), "compact": "abc"},
    "uri-column-a-string": {
        **shard_page("file:///x/", ["a"]),
        "compact": {"uri_prefix": "file:///x/", "columns": {"uri": "abc"}},
    },
    "size-not-a-number": shard_page("file:///x/", ["a"])
    | {
        "compact": {
            "uri_prefix": "file:///x/",
            "columns": {**shard_page("file:///x/", ["a"])["compact"]["columns"], "size": ["x"]},
        }
    },
    "cursor-a-number": {**shard_page("file:///x/", ["a"]), "next": 7},
    "packed-unknown-encoding": {
        **shard_page("file:///x/", ["a"]),
        "packed": {"uri_prefix": "file:///x/", "length": 1, "columns": {"split": {"zip": "a"}}},
    },
    "packed-length-wrong": {
        **shard_page("file:///x/", ["a"]),
        "packed": {
            "uri_prefix": "file:///x/",
            "length": 2,
            "columns": shard_page("file:///x/", ["a"])["compact"]["columns"],
        },
    },
    "packed-length-a-string": {
        **shard_page("file:///x/", ["a"]),
        "packed": {"uri_prefix": "file:///x/", "length": "1", "columns": {}},
    },
}


def _serve_malformed(fake: FakeService, case: str) -> None:
    serve_version(fake, ["file:///x/"], MALFORMED_PAGES.get(case, shard_page("file:///x/", ["a"])))
    if case in MALFORMED_VERSIONS:
        fake.route("GET", f"/versions/{NAME}", Reply(body=MALFORMED_VERSIONS[case]))


@pytest.mark.parametrize("case", [*MALFORMED_VERSIONS, *MALFORMED_PAGES])
def test_an_answer_of_the_wrong_shape_is_an_invalid_response(fake: FakeService, case: str) -> None:
    _serve_malformed(fake, case)
    with pytest.raises(rk.InvalidResponse) as caught:
        client_for(fake).resolve(NAME)
    assert caught.value.code == "invalid_response"


@pytest.mark.parametrize("case", ["not-json", "no-dataset", "compact-a-string"])
def test_cli_show_of_an_answer_of_the_wrong_shape(fake: FakeService, case: str) -> None:
    _serve_malformed(fake, case)
    result = cli(fake, "show", NAME)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: ") and "[invalid_response]" in result.stderr


def test_a_service_without_the_packed_form_is_asked_for_the_compact_form(
    fake: FakeService,
) -> None:
    """An older service refuses ``form=packed`` (422 naming ``form``): the client asks for the
    compact form, once per client, and reads the same version."""

    def pages(seen: Seen) -> Reply:
        if seen.query.get("form") == ["packed"]:
            error = {"code": "invalid_request", "detail": "query.form: Input should be 'full' "
                     "or 'compact'"}  # fmt: skip
            return Reply(422, error)
        return Reply(body=shard_page("file:///x/", ["a", "b"]))

    serve_version(fake, ["file:///x/"], pages)
    client = client_for(fake)
    assert client.resolve(NAME).files("train") == ["file:///x/a", "file:///x/b"]
    client.registry.cache.clear()
    assert client.resolve(NAME).files("train") == ["file:///x/a", "file:///x/b"]
    forms = [s.query.get("form") for s in fake.seen if s.path.endswith("/shards")]
    assert forms == [["packed"], ["compact"], ["compact"]]


def _packed_page(length: Any, run: int) -> dict[str, Any]:
    """A packed page whose every column is one run of ``run`` copies of a real value."""
    compact = shard_page("file:///x/", ["a"])
    columns = {
        name: {"json": [None] * min(run, 10)}
        if name == "storage_identity"
        else {"runs": [[values[0], run]]}
        for name, values in compact["compact"]["columns"].items()
    }
    packed = {"uri_prefix": "file:///x/", "length": length, "columns": columns}
    return {**compact, "compact": None, "packed": packed, "shard_count": 1}


@pytest.mark.parametrize(
    ("length", "run"), [(10**12, 10**12), (1, 10**12), (10_001, 10_001), (True, 1)]
)
def test_a_packed_page_is_not_expanded_past_a_page(
    fake: FakeService, length: Any, run: int
) -> None:
    """A 1 KB answer claiming a run of 10^12 shards (or a page of more than 10,000) is an
    invalid response before any list is built (it was a list of 10^12 items: MemoryError, or
    gigabytes for a smaller run)."""
    serve_version(fake, ["file:///x/"], _packed_page(length, run))
    with pytest.raises(rk.InvalidResponse, match="packed"):
        client_for(fake).resolve(NAME)


def test_a_list_page_of_the_wrong_shape(fake: FakeService) -> None:
    fake.route("GET", "/datasets", Reply(body={"data": "coco", "count": 1}))
    with pytest.raises(rk.InvalidResponse, match="not a list page"):
        client_for(fake).datasets()
    result = cli(fake, "ls")
    assert result.returncode == 1 and "[invalid_response]" in result.stderr


# -- a redirect (an http → https proxy) --------------------------------------------------------


def _to_https(fake: FakeService) -> None:
    https = fake.url.replace("http://", "https://")
    fake.fallback = lambda seen: Reply(
        302, b"", {"Location": https + seen.path, "Content-Length": "0"}
    )


def test_a_redirect_is_refused_naming_where_it_points(fake: FakeService) -> None:
    _to_https(fake)
    https = fake.url.replace("http://", "https://")
    with pytest.raises(rk.ServiceRedirected) as caught:
        client_for(fake).resolve("coco@latest")
    error = caught.value
    assert error.code == "service_redirected"
    assert error.extra["location"] == f"{https}/api/v1/versions/coco%40latest"
    assert "set RECORDKEEPER_URL to it" in error.detail and f"at {https} " in error.detail
    assert len(fake.seen) == 1  # not followed


@pytest.mark.parametrize("command", [["show", "coco@latest"], ["verify", "coco@latest"]])
def test_cli_names_the_redirect(fake: FakeService, command: list[str]) -> None:
    _to_https(fake)
    result = cli(fake, *command)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: ") and "[service_redirected]" in result.stderr
    assert fake.url.replace("http://", "https://") in result.stderr


# -- an endless body ---------------------------------------------------------------------------


def _endless(sent: list[int]) -> Iterator[bytes]:
    """A JSON string that goes on (twice the client's limit, then ends: bounded)."""
    yield b'{"name": "'
    chunk = b"a" * 2**20
    while sent[0] < 2 * MAX_RESPONSE_BYTES:
        sent[0] += len(chunk)
        yield chunk
    yield b'"}'


def test_an_endless_body_is_cut_at_the_limit(fake: FakeService, store: str) -> None:
    sent = [0]
    fake.route("GET", "/info", Reply(body=info([store])))
    fake.route("GET", f"/versions/{NAME}", lambda seen: Reply(body=_endless(sent)))
    client = client_for(fake)
    assert client.http.max_response_bytes == MAX_RESPONSE_BYTES
    with pytest.raises(rk.ResponseTooLarge, match=f"longer than {MAX_RESPONSE_BYTES} bytes"):
        client.resolve(NAME)
    # the client stopped reading: the server could not send much more than the limit
    assert sent[0] < 1.5 * MAX_RESPONSE_BYTES


def test_cli_show_of_an_endless_body(fake: FakeService, store: str) -> None:
    sent = [0]
    fake.route("GET", f"/versions/{NAME}", lambda seen: Reply(body=_endless(sent)))
    result = cli(fake, "show", NAME)
    assert result.returncode == 1, result.stderr
    assert "[response_too_large]" in result.stderr


# -- paging that does not end --------------------------------------------------------------------


def _stuck_cursor(seen: Seen) -> Reply:
    """The same cursor on every page (until the 200th request: the test stays bounded)."""
    stuck = len(_stuck_cursor.calls) < 200  # type: ignore[attr-defined]
    _stuck_cursor.calls.append(seen)  # type: ignore[attr-defined]
    page = shard_page("", ["file:///x/a"], next="c1" if stuck else None, shard_count=10**6)
    return Reply(body=page)


def test_a_shard_cursor_that_never_advances(fake: FakeService, store: str) -> None:
    _stuck_cursor.calls = []  # type: ignore[attr-defined]
    roots = ["file:///x/"]
    serve_version(fake, roots, _stuck_cursor)
    with pytest.raises(rk.InvalidResponse, match="answered the cursor 'c1' again"):
        client_for(fake).resolve(NAME)
    assert len(fake.requests("GET", "/shards")) == 2
    with pytest.raises(rk.InvalidResponse, match="again"):
        client_for(fake).verify(NAME)


def test_cli_verify_with_a_shard_cursor_that_never_advances(fake: FakeService) -> None:
    _stuck_cursor.calls = []  # type: ignore[attr-defined]
    serve_version(fake, ["file:///x/"], _stuck_cursor)
    result = cli(fake, "verify", NAME)
    assert result.returncode == 1, result.stderr
    assert "[invalid_response]" in result.stderr and "again" in result.stderr


def _ignores_offset(seen: Seen) -> Reply:
    """The first page again whatever the offset, with a count that never ends."""
    done = len(_ignores_offset.calls) >= 300  # type: ignore[attr-defined]
    _ignores_offset.calls.append(seen)  # type: ignore[attr-defined]
    data = [] if done else [{"name": "coco", "version_count": 1, "latest": None}]
    return Reply(body={"data": data, "count": 10**12})


def _more_pages_than_counted(seen: Seen) -> Reply:
    """Ten new items a page, for a list of 2,500 paged 1,000 at a time."""
    offset = int(seen.query["offset"][0])
    data = [
        {"name": f"d{i}", "version_count": 0, "latest": None} for i in range(offset, offset + 10)
    ]
    return Reply(body={"data": data if offset < 2500 else [], "count": 2500})


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_ignores_offset, "the same 1 items for offset 1"),
        (_more_pages_than_counted, "served 5 pages of a list whose count is 2500"),
    ],
    ids=["ignores-offset", "more-pages-than-counted"],
)
def test_a_list_that_does_not_page(fake: FakeService, answer: Any, message: str) -> None:
    answer.calls = []
    fake.route("GET", "/datasets", answer)
    with pytest.raises(rk.InvalidResponse, match=message):
        client_for(fake).datasets()
    assert len(fake.requests("GET", "/datasets")) <= 5
    answer.calls = []
    result = cli(fake, "ls")
    assert result.returncode == 1, result.stderr
    assert "[invalid_response]" in result.stderr


# -- shard URIs the service names are checked against its roots before any storage access ----


def _outside_cases(tmp_path: Path, store: str) -> dict[str, tuple[list[str], str, list[str]]]:
    secret = (tmp_path / "secret.txt").as_uri()
    return {  # roots, uri_prefix, names
        "dot-dot": ([store], store + "coco/", ["../../secret.txt"]),
        "percent-encoded-dot-dot": ([store], store + "coco/", ["%2e%2e/%2e%2e/secret.txt"]),
        "outside-the-roots": ([store], "", [secret]),
        "a-root-of-the-whole-file-system": (["file:///"], "", [secret]),
    }


CASES = [
    "dot-dot",
    "percent-encoded-dot-dot",
    "outside-the-roots",
    "a-root-of-the-whole-file-system",
]


def _expected(case: str) -> tuple[type[rk.RecordkeeperError], str, int]:
    if case == "a-root-of-the-whole-file-system":
        return rk.InvalidResponse, "invalid_response", 1
    return rk.StorageRootNotAllowed, "storage_root_not_allowed", 6


@pytest.mark.parametrize("case", CASES)
def test_verify_reads_no_shard_outside_the_roots(
    fake: FakeService, tmp_path: Path, store: str, case: str
) -> None:
    roots, prefix, names = _outside_cases(tmp_path, store)[case]
    serve_version(fake, roots, shard_page(prefix, names))
    error, _, _ = _expected(case)
    client = client_for(fake)
    with pytest.raises(error):
        client.verify(NAME, deep=True)
    with pytest.raises(error):
        client.resolve(NAME).verify(deep=True)
    assert fake.requests("POST") == []  # nothing reported about local files


@pytest.mark.parametrize("case", CASES)
def test_cli_verify_reads_no_shard_outside_the_roots(
    fake: FakeService, tmp_path: Path, store: str, case: str
) -> None:
    roots, prefix, names = _outside_cases(tmp_path, store)[case]
    serve_version(fake, roots, shard_page(prefix, names))
    _, code, status = _expected(case)
    result = cli(fake, "verify", NAME, "--deep")
    assert result.returncode == status, result.stderr
    assert result.stderr.startswith("error: ") and f"[{code}]" in result.stderr
    assert fake.requests("POST") == []


# -- the writer writes only under a storage prefix inside the roots ----------------------------


def _stage_at(fake: FakeService, roots: list[str], prefix: str) -> None:
    fake.route("GET", "/info", Reply(body=info(roots)))
    staged = version(STAGED, prefix=prefix, state="staged")
    fake.route("POST", "/datasets/coco/versions", Reply(201, staged))
    fake.route("POST", f"/versions/{STAGED}/abandon", Reply(body={**staged, "state": "abandoned"}))


def _prefixes(tmp_path: Path, store: str) -> dict[str, str]:
    return {
        "outside": (tmp_path / "outside").as_uri() + f"/coco/{STAGED}/",
        "dot-dot": store + f"../outside/coco/{STAGED}/",
    }


@pytest.mark.parametrize("case", ["outside", "dot-dot"])
def test_the_writer_writes_nothing_under_a_prefix_outside_the_roots(
    fake: FakeService, tmp_path: Path, store: str, case: str
) -> None:
    _stage_at(fake, [store], _prefixes(tmp_path, store)[case])
    client = client_for(fake)
    with (
        pytest.raises(rk.StorageRootNotAllowed, match="storage prefix"),
        client.writer("coco") as writer,
    ):
        writer.write(b"record")
    assert not (tmp_path / "outside").exists()
    assert len(fake.requests("POST", f"/versions/{STAGED}/abandon")) == 1


def test_the_writer_keeps_to_the_root_it_was_given(
    fake: FakeService, tmp_path: Path, store: str
) -> None:
    """Inside an allowed root, but not under the root the caller chose."""
    other = tmp_path / "store" / "other"
    _stage_at(fake, [store], other.as_uri() + f"/coco/{STAGED}/")
    with (
        pytest.raises(rk.StorageRootNotAllowed, match="storage prefix"),
        client_for(fake).writer("coco", root=store + "mine") as writer,
    ):
        writer.write(b"record")
    assert not other.exists()


@pytest.mark.parametrize("case", ["outside", "dot-dot"])
def test_cli_publish_copies_nothing_under_a_prefix_outside_the_roots(
    fake: FakeService, tmp_path: Path, store: str, case: str
) -> None:
    source = tmp_path / "source"
    source.mkdir()
    write_tfrecord(source / "train-00000-of-00001.tfrecord", sample_examples(3))
    _stage_at(fake, [store], _prefixes(tmp_path, store)[case])
    result = cli(fake, "publish", str(source), "--name", "coco", "--copy")
    assert result.returncode == 6, result.stderr
    assert "[storage_root_not_allowed]" in result.stderr
    assert not (tmp_path / "outside").exists()


@pytest.mark.parametrize("answer", [["a", "list"], {"checkpoint": "no model"}, {"data": 5}])
def test_lineage_answers_of_the_wrong_shape(fake: FakeService, answer: Any) -> None:
    """Checkpoints, lineage, consumers: read through the same reading_answer."""
    fake.fallback = Reply(body=answer)
    client = client_for(fake)
    for call in (
        lambda: client.checkpoint("coco_detection/ckpt-1"),
        lambda: client.lineage("coco_detection/ckpt-1"),
        lambda: client.models(),
    ):
        with pytest.raises(rk.InvalidResponse):
            call()
    result = cli(fake, "lineage", "coco_detection/ckpt-1")
    assert result.returncode == 1, result.stderr
    assert "[invalid_response]" in result.stderr


# -- leakage answers of the wrong shape ---------------------------------------------------------


@pytest.mark.parametrize(
    "warning", [[], "overlap", {"pairs": [{"split": "test"}]}, {"pairs": "x", "max_rate": "a"}]
)
def test_a_commits_leakage_warning_of_the_wrong_shape(fake: FakeService, warning: Any) -> None:
    fake.route(
        "POST",
        f"/versions/{STAGED}/commit",
        Reply(body={**version(NAME), "leakage_warning": warning}),
    )
    with pytest.raises(rk.InvalidResponse, match="leakage warning"):
        client_for(fake).commit(STAGED)


@pytest.mark.parametrize("body", [[], {"mode": "sometimes"}, {"max_rate": 0}])
def test_a_leakage_policy_of_the_wrong_shape(fake: FakeService, body: Any) -> None:
    from recordkeeper.leakage import commit_check

    fake.route("GET", "/datasets/coco/leakage-policy", Reply(body=body))
    with pytest.raises(rk.InvalidResponse, match="leakage policy"):
        commit_check(client_for(fake).http, "coco", STAGED, lambda: [])


def test_an_older_service_without_policies_is_not_checked(fake: FakeService) -> None:
    from recordkeeper.leakage import commit_check

    def never() -> list[Any]:
        raise AssertionError("no policy, no check")

    assert commit_check(client_for(fake).http, "coco", STAGED, never) is None  # 404 not_found
