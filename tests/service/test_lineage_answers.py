"""Kept upstream answers, on SQLite and PostgreSQL: rendered once per (checkpoint, lineage
epoch), ``ETag``/``304``, and every state change shows in the next answer.

The service keeps each rendered upstream answer keyed by the checkpoint and the lineage epoch
(``repository.lineage.epoch``), which every change of a state the answer shows bumps in its own
transaction.  These tests ask first (so the answer is kept), change something, and ask again.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service._helpers import API, error, publish
from tests.service.test_lineage import _history, ok, put

LINEAGE = API + "/models/{model}/checkpoints/{checkpoint}/lineage"


def lineage(client: TestClient, ref: str, **headers: str) -> Any:
    """GET the upstream answer of ``model/checkpoint`` or ``model@run/checkpoint``."""
    head, checkpoint = ref.split("/")
    model, _, run = head.partition("@")
    return client.get(
        LINEAGE.format(model=model, checkpoint=checkpoint),
        params={"run": run} if run else None,
        headers=headers,
    )


def lineage_in(client: TestClient, ref: str, form: str) -> Any:
    """GET the upstream answer of ``model/checkpoint`` in ``form``."""
    model, checkpoint = ref.split("/")
    return client.get(LINEAGE.format(model=model, checkpoint=checkpoint), params={"form": form})


def kept(client: TestClient) -> Any:
    """The app's kept rendered lineage answers."""
    return client.app.state.repository.lineage.rendered  # type: ignore[attr-defined]


def test_deprecating_a_version_shows_in_the_next_answer(client: TestClient) -> None:
    names = _history(client)
    before = lineage(client, "det/ckpt-4")
    assert {e["version"]: e["state"] for e in ok(before)["data"]}[names["v1"]] == "committed"
    assert kept(client).bytes > 0  # the answer is kept
    assert ok(lineage(client, "det/ckpt-4")) == before.json()  # and answered again as it was
    forced = client.post(
        f"{API}/versions/{names['v1']}/deprecate", json={"reason": "bad labels", "force": True}
    )
    assert ok(forced)["state"] == "deprecated"
    after = lineage(client, "det/ckpt-4")
    states = {(e["version"], e["role"]): e["state"] for e in ok(after)["data"]}
    assert states[(names["v1"], "train")] == states[(names["v1"], "eval")] == "deprecated"
    assert states[(names["v2"], "train")] == "committed"
    assert after.headers["ETag"] != before.headers["ETag"]
    # the tag of the answer before the change no longer matches
    stale = lineage(client, "det/ckpt-4", **{"If-None-Match": before.headers["ETag"]})
    assert stale.status_code == 200


def test_marking_a_checkpoint_deleted_shows_in_the_next_answer(client: TestClient) -> None:
    _history(client)
    below = ok(lineage(client, "det/ckpt-4"))
    own = ok(lineage(client, "det/ckpt-2"))
    assert {c["ref"]: c["state"] for c in below["chain"]}["det@r1/ckpt-2"] == "present"
    assert own["checkpoint"]["state"] == "present"
    route = f"{API}/models/det/checkpoints/ckpt-2/deletion"
    ok(client.put(route, json={"run": "r1", "reason": "max_to_keep"}))
    below = ok(lineage(client, "det/ckpt-4"))
    assert {c["ref"]: c["state"] for c in below["chain"]}["det@r1/ckpt-2"] == "deleted"
    segments = [s for e in below["data"] for s in e["segments"] if s["checkpoint"] == "ckpt-2"]
    assert segments and {s["state"] for s in segments} == {"deleted"}
    own = ok(lineage(client, "det@r1/ckpt-2"))
    assert own["checkpoint"]["state"] == "deleted"
    assert own["checkpoint"]["deleted_reason"] == "max_to_keep"
    assert own["chain"][0]["state"] == "deleted"


def _retention_deletes(client: TestClient, name: str, *, finish: bool = True) -> None:
    """Retention releases ``name`` (data checkpoints trained on: forced) and, with ``finish``,
    records its data deleted, as ``retention apply`` does over REST."""
    ok(
        client.put(
            f"{API}/retention/policies/coco",
            json={"keep_last": 1, "keep_trained": False, "keep_aliased": False},
        )
    )
    claimed = ok(
        client.post(f"{API}/retention/claims", json={"force": True, "reason": "bad labels"})
    )
    assert [c["name"] for c in claimed["data"]] == [name]
    if finish:
        ok(client.post(f"{API}/versions/{name}/retention-done", json={"objects": 4}))


def _data_states(answer: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """``version → (data_state, data_deleted_at set, data_deleted_reason)`` of a full answer."""
    return {
        e["version"]: (e["data_state"], e["data_deleted_at"] is not None, e["data_deleted_reason"])
        for e in answer["data"]
    }


def test_retention_deleting_data_shows_in_the_next_answer(client: TestClient) -> None:
    """Kept answers (both forms), then retention releases a version, then deletes its data:
    each step shows in the next answer of every lineage read naming the version."""
    names = _history(client)
    v1, v2 = names["v1"], names["v2"]
    compact = {"form": "compact"}
    route = LINEAGE.format(model="det", checkpoint="ckpt-4")
    before = lineage(client, "det/ckpt-4")
    assert _data_states(ok(before)) == {
        v1: ("stored", False, None),
        v2: ("stored", False, None),
    }
    packed = ok(client.get(route, params=compact))["compact"]["columns"]
    assert packed["data_state"] == ["stored"] * 3  # v1 train and eval, v2 train
    assert kept(client).bytes > 0  # both answers are kept

    _retention_deletes(client, v1, finish=False)
    releasing = ok(lineage(client, "det/ckpt-4"))
    assert _data_states(releasing)[v1] == ("deleting", False, "retention")

    ok(client.post(f"{API}/versions/{v1}/retention-done", json={"objects": 4}))
    after = lineage(client, "det/ckpt-4")
    body = ok(after)
    assert _data_states(body) == {v1: ("deleted", True, "retention"), v2: ("stored", False, None)}
    deleted_at = next(e["data_deleted_at"] for e in body["data"] if e["version"] == v1)
    version = ok(client.get(f"{API}/versions/{v1}"))
    assert deleted_at == version["data_deleted_at"]  # the Version object's own fields
    assert body["versions"] == [v1, v2]  # what trained it does not change
    assert after.headers["ETag"] != before.headers["ETag"]
    stale = lineage(client, "det/ckpt-4", **{"If-None-Match": before.headers["ETag"]})
    assert stale.status_code == 200 and stale.content == after.content
    columns = ok(client.get(route, params=compact))["compact"]["columns"]
    by_version = {
        (v, r): (d, at, why)
        for v, r, d, at, why in zip(
            columns["version"],
            columns["role"],
            columns["data_state"],
            columns["data_deleted_at"],
            columns["data_deleted_reason"],
            strict=True,
        )
    }
    assert (
        by_version[(v1, "train")]
        == by_version[(v1, "eval")]
        == ("deleted", deleted_at, "retention")
    )
    assert by_version[(v2, "train")] == ("stored", None, None)

    # the checkpoint's own segment (in the upstream answer and on its own)
    own = ok(lineage(client, "det/ckpt-1"))["checkpoint"]["data"]
    assert {(d["version"], d["data_state"], d["data_deleted_reason"]) for d in own} == {
        (v1, "deleted", "retention")
    }
    single = ok(client.get(f"{API}/models/det/checkpoints/ckpt-1"))["data"]
    assert {d["data_state"] for d in single} == {"deleted"}
    # downstream: the version consumers answer and a shard's
    consumers = ok(client.get(f"{API}/versions/{v1}/consumers"))
    assert consumers["versions"] == [
        {
            "name": v1,
            "content_digest": version["content_digest"],
            "state": "committed",
            "data_state": "deleted",
            "data_deleted_at": deleted_at,
            "data_deleted_reason": "retention",
        }
    ]
    assert consumers["count"] == 5  # every checkpoint below still answers
    uri = version["splits"]["train"]["shards"][0]["uri"]
    by_shard = ok(client.get(f"{API}/shards/consumers", params={"uri": uri}))
    assert [(v["name"], v["data_state"]) for v in by_shard["versions"]] == [(v1, "deleted")]
    # the graph's version nodes
    graph = ok(client.get(f"{API}/lineage/graph", params={"checkpoint": "det/ckpt-4"}))
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert nodes[f"version:{v1}"]["data_state"] == "deleted"
    assert nodes[f"version:{v1}"]["data_deleted_at"] == deleted_at
    assert nodes[f"version:{v1}"]["data_deleted_reason"] == "retention"
    assert nodes[f"version:{v2}"]["data_state"] == "stored"
    assert nodes[f"version:{v2}"]["data_deleted_reason"] is None


def test_etag_and_304(client: TestClient) -> None:
    _history(client)
    first = lineage(client, "det/ckpt-4")
    etag = first.headers["ETag"]
    assert etag.startswith('W/"') and first.headers["Cache-Control"] == "no-cache"
    # the same checkpoint named three ways: the same answer, the same tag
    assert lineage(client, "det@r1/ckpt-4").headers["ETag"] == etag
    assert lineage(client, "det@r1/ckpt-4").content == first.content
    for held in (etag, etag.removeprefix("W/"), f'W/"nope", {etag}', "*"):
        again = lineage(client, "det/ckpt-4", **{"If-None-Match": held})
        assert again.status_code == 304, held
        assert again.content == b"" and again.headers["ETag"] == etag
    assert lineage(client, "det/ckpt-4", **{"If-None-Match": 'W/"nope"'}).status_code == 200
    other = lineage(client, "det/ckpt-3")
    assert other.headers["ETag"] != etag
    assert lineage(client, "det/ckpt-3", **{"If-None-Match": etag}).status_code == 200
    # an unrelated write (a new checkpoint, a new version) keeps every tag
    ok(put(client, "det@r1/ckpt-5", parent="det@r1/ckpt-4"), 201)
    publish(client, "coco", content="c")
    assert lineage(client, "det/ckpt-4", **{"If-None-Match": etag}).status_code == 304


def test_errors_keep_their_codes_when_answers_are_kept(client: TestClient) -> None:
    v = publish(client, "coco")["name"]
    ok(put(client, "det/ckpt-1", uri="file:///ck/a/ckpt-1", data=[{"version": v}]), 201)
    first = lineage(client, "det/ckpt-1")
    ok(first)
    # a second run registers the same checkpoint name: the short reference is now ambiguous,
    # even for a client holding the answer it named before
    second = ok(put(client, "det/ckpt-1", uri="file:///ck/b/ckpt-1"), 201)
    body = error(
        lineage(client, "det/ckpt-1", **{"If-None-Match": first.headers["ETag"]}),
        409,
        "ambiguous_checkpoint",
    )
    assert second["ref"] in body["candidates"]
    error(lineage(client, "det/ckpt-1"), 409, "ambiguous_checkpoint")
    exact = ok(lineage(client, second["ref"]))
    assert exact["checkpoint"]["ref"] == second["ref"] and exact["versions"] == []
    error(lineage(client, "det/ckpt-9"), 404, "checkpoint_not_found")
    error(lineage(client, "nobody/ckpt-1"), 404, "checkpoint_not_found")
    error(lineage(client, "det@nope/ckpt-1"), 404, "checkpoint_not_found")
    error(lineage(client, "det@a b/ckpt-1"), 400, "invalid_checkpoint")


@pytest.mark.parametrize("form", ["full", "compact", "packed"])
def test_kept_answer_is_the_response_model_rendering(client: TestClient, form: str) -> None:
    """The route renders a record's JSON without building LineageOut: the bytes must be those
    of the model's own rendering, for every kind of answer (states, runs, parents, exports,
    metrics, several splits)."""
    from pydantic import TypeAdapter

    from recordkeeper_service.routes.lineage import LineageOut

    model = TypeAdapter(LineageOut)
    names = _history(client)
    ok(
        put(
            client,
            "det@r1/ckpt-5",
            parent="det@r1/ckpt-4",
            data=[{"version": names["v1"], "splits": ["train", "validation"]}],
            metrics={"loss": 0.1, "big": 1e16, "tiny": 1e-7, "nested": {"a": [1, 2.5, None]}},
            metadata={"note": "ünïcode ✓", "flag": True},
        ),
        201,
    )
    ok(client.put(f"{API}/models/det/checkpoints/ckpt-2/deletion", json={"run": "r1"}))
    client.post(f"{API}/versions/{names['v2']}/deprecate", json={"reason": "x", "force": True})
    _retention_deletes(client, names["v1"])  # data deleted: a time and a reason in the entries
    repository = client.app.state.repository.lineage  # type: ignore[attr-defined]
    params = {"form": form}
    for ref in ("det/ckpt-1", "det/ckpt-2", "det/ckpt-5", "ft/ckpt-1"):
        model_name, checkpoint = ref.split("/")
        served = client.get(LINEAGE.format(model=model_name, checkpoint=checkpoint), params=params)
        body = repository.answer_from(repository.lineage_head(ref)).to_json(form=form)
        assert served.content == model.dump_json(model.validate_python(body), exclude_unset=True)
        assert b'"retention"' in served.content, ref  # v1's data deleted: on every chain
        assert "created" not in ok(served)["checkpoint"]  # only in the answer to a PUT
        again = client.get(LINEAGE.format(model=model_name, checkpoint=checkpoint), params=params)
        assert again.content == served.content


def test_no_answers_are_kept_with_a_zero_budget(make_client: Callable[..., TestClient]) -> None:
    client = make_client(lineage_cache_bytes=0)
    names = _history(client)
    first = lineage(client, "det/ckpt-4")
    assert ok(first)["versions"] == [names["v1"], names["v2"]]
    assert kept(client).bytes == 0
    held = lineage(client, "det/ckpt-4", **{"If-None-Match": first.headers["ETag"]})
    assert held.status_code == 304


# -- every writer of a state a lineage answer shows bumps the epoch ---------------------------

#: Columns that change with the states lineage answers show: a version's deprecation, a
#: checkpoint's deletion (a state change without one of them would be a new kind of change).
_SHOWN = {
    "deprecated_at",
    "deprecated_reason",
    "deleted_at",
    "deleted_reason",
    "gc_claimed_at",  # a version's data released for deletion (data_state "deleting")
    "collected_at",  # … and deleted (data_state "deleted", data_deleted_at)
    "collected_reason",
}
#: Writers of those columns that never touch a version a checkpoint trained on: gc claims and
#: collects staged or abandoned versions only (never published ones, the only kind a
#: checkpoint can name), so no lineage answer shows what they change.
_UNSHOWN_WRITERS = {("gc.py", "claim"), ("gc.py", "mark_collected")}
_REPOSITORY = Path(__file__).resolve().parents[2] / "service/recordkeeper_service/repository"


def _writes_shown_state(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            # ``row.a, row.b = …`` assigns through a tuple
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            if any(isinstance(t, ast.Attribute) and t.attr in _SHOWN for t in flat):
                return True
        if (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr == "values"
            and any(k.arg in _SHOWN for k in sub.keywords)
        ):
            return True
    return False


def _calls(node: ast.AST, name: str) -> bool:
    return any(
        isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == name
        for sub in ast.walk(node)
    )


def test_every_writer_of_a_shown_state_bumps_the_epoch() -> None:
    writers = []
    for path in sorted(_REPOSITORY.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and _writes_shown_state(node):
                writers.append((path.name, node.name, _calls(node, "bump_epoch")))
    assert {(f, n) for f, n, _ in writers} >= {
        ("versions.py", "deprecate"),
        ("__init__.py", "mark_deleted"),
        ("retention.py", "claim"),
        ("retention.py", "mark_deleted"),
        *_UNSHOWN_WRITERS,
    }
    missing = [(f, n) for f, n, bumps in writers if not bumps and (f, n) not in _UNSHOWN_WRITERS]
    assert missing == []


def test_a_first_answer_walks_the_chain_once_and_reads_split_sizes_once(
    client: TestClient,
) -> None:
    """The answer's consumption (epochs per version) is built from the walk, which brings the
    segments' counts, and the version names the answer already read: one recursive walk per
    first answer, no second look-up of names or counts, and each version's records per split
    read once per process (a committed version's shards never change), with the facts of the
    versions not seen yet (one statement), so a second checkpoint over the same versions sends
    two statements: its head and its walk."""
    from sqlalchemy import event

    _history(client)
    repository = client.app.state.repository  # type: ignore[attr-defined]
    sent: list[str] = []
    engine = repository.lineage._db.engine

    def record(*args: Any) -> None:
        statement = " ".join(str(args[2]).split())
        if statement not in ("BEGIN", "COMMIT", "ROLLBACK"):  # SQLite's own transactions
            sent.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        ok(lineage(client, "det/ckpt-3"))
        walks = [s for s in sent if s.startswith("WITH RECURSIVE")]
        sums = [s for s in sent if "sum(shards.record_count)" in s]
        assert len(walks) == 1, walks
        assert len(sums) == 1, sums
        assert not [s for s in sent if s.startswith("SELECT versions.id, versions.name FROM")]
        assert not [s for s in sent if "FROM checkpoint_consumption" in s]  # in the walk
        # versions not seen yet: their facts and split sizes in one statement
        assert len(sent) == 3 and sent[2] == sums[0] and "versions.name" in sums[0], sent
        del sent[:]
        for form in ("full", "compact", "packed"):
            ok(lineage_in(client, "det/ckpt-2", form))  # the same versions: all held
            assert len(sent) == 2, sent
            assert sent[0].startswith("SELECT checkpoints.id"), sent  # the head and the epoch
            assert sent[1].startswith("WITH RECURSIVE"), sent
            del sent[:]
            ok(lineage_in(client, "det/ckpt-2", form))  # asked again: the head only
            assert len(sent) == 1 and sent[0].startswith("SELECT checkpoints.id"), sent
            del sent[:]
    finally:
        event.remove(engine, "before_cursor_execute", record)
