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


@pytest.mark.parametrize("form", ["full", "compact"])
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
    repository = client.app.state.repository.lineage  # type: ignore[attr-defined]
    params = {"form": form}
    for ref in ("det/ckpt-1", "det/ckpt-2", "det/ckpt-5", "ft/ckpt-1"):
        model_name, checkpoint = ref.split("/")
        served = client.get(LINEAGE.format(model=model_name, checkpoint=checkpoint), params=params)
        body = repository.lineage(ref).to_json(compact=form == "compact")
        assert served.content == model.dump_json(model.validate_python(body), exclude_unset=True)
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
_SHOWN = {"deprecated_at", "deprecated_reason", "deleted_at", "deleted_reason"}
_REPOSITORY = Path(__file__).resolve().parents[2] / "service/recordkeeper_service/repository"


def _writes_shown_state(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(isinstance(t, ast.Attribute) and t.attr in _SHOWN for t in targets):
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
    }
    assert [(f, n) for f, n, bumps in writers if not bumps] == []
