"""The compact form of upstream answers (``GET …/lineage?form=compact``), on SQLite and
PostgreSQL: the same answer as the full form with its entries as columns, its own tag and kept
rendering; and the per-process facts of versions it is assembled from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from recordkeeper.core.lineage import Segment, entries_from_columns
from recordkeeper_service.repository.lineage.facts import VersionsShownCache
from recordkeeper_service.repository.lineage.queries import VersionFacts
from tests.service._helpers import API, error, publish
from tests.service.test_lineage import _history, ok, put
from tests.service.test_lineage_answers import kept, lineage


def compact(client: TestClient, ref: str, **headers: str) -> Any:
    head, checkpoint = ref.split("/")
    model, _, run = head.partition("@")
    params = {"form": "compact", **({"run": run} if run else {})}
    return client.get(
        f"{API}/models/{model}/checkpoints/{checkpoint}/lineage", params=params, headers=headers
    )


def expanded(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of a compact answer as the full form lists them."""
    links = [Segment.from_json(link) for link in answer["chain"]]
    return [e.to_json() for e in entries_from_columns(links, answer["compact"]["columns"])]


def _more_history(client: TestClient, names: dict[str, str]) -> None:
    """Segments using several splits of one version, and states that changed."""
    ok(
        put(
            client,
            "det@r1/ckpt-5",
            step=500,
            parent="det@r1/ckpt-4",
            data=[
                {"version": names["v1"], "splits": ["train", "validation"]},
                {"version": names["v2"], "role": "test", "splits": ["validation"]},
            ],
        ),
        201,
    )
    ok(client.put(f"{API}/models/det/checkpoints/ckpt-2/deletion", json={"run": "r1"}))
    forced = client.post(
        f"{API}/versions/{names['v1']}/deprecate", json={"reason": "bad labels", "force": True}
    )
    assert ok(forced)["state"] == "deprecated"


def test_compact_form_is_the_full_answer_as_columns(client: TestClient) -> None:
    names = _history(client)
    _more_history(client, names)
    for ref in ("det/ckpt-1", "det/ckpt-4", "det@r1/ckpt-5", "ft/ckpt-1", "det@r1/ckpt-2"):
        full = ok(lineage(client, ref))
        packed = ok(compact(client, ref))
        assert "compact" not in full and packed["data"] is None
        assert {k: packed[k] for k in ("checkpoint", "chain", "versions")} == {
            k: full[k] for k in ("checkpoint", "chain", "versions")
        }
        assert expanded(packed) == full["data"], ref
    five = ok(lineage(client, "det/ckpt-5"))["data"]
    both = next(e for e in five if e["version"] == names["v1"] and e["role"] == "train")
    assert both["splits"] == ["train", "validation"] and both["state"] == "deprecated"
    assert [(s["checkpoint"], s["splits"]) for s in both["segments"]] == [
        ("ckpt-1", ["train"]),
        ("ckpt-2", ["train"]),
        ("ckpt-3", ["train"]),
        ("ckpt-5", ["train", "validation"]),
    ]
    assert {s["state"] for s in both["segments"] if s["checkpoint"] == "ckpt-2"} == {"deleted"}
    columns = ok(compact(client, "det/ckpt-5"))["compact"]["columns"]
    pairs = list(zip(columns["version"], columns["role"], strict=True))
    train_v1 = pairs.index((names["v1"], "train"))
    assert columns["uses"][train_v1] == [
        4,
        "train",
        3,
        "train",
        2,
        "train",
        0,
        "train",
        0,
        "validation",
    ]


def test_each_form_has_its_own_tag_and_kept_answer(client: TestClient) -> None:
    _history(client)
    full, packed = lineage(client, "det/ckpt-4"), compact(client, "det/ckpt-4")
    assert full.headers["ETag"] != packed.headers["ETag"]
    assert packed.headers["ETag"].startswith('W/"')
    assert packed.headers["Cache-Control"] == "no-cache"
    assert len(packed.content) < len(full.content)
    held = compact(client, "det@r1/ckpt-4", **{"If-None-Match": packed.headers["ETag"]})
    assert held.status_code == 304 and held.headers["ETag"] == packed.headers["ETag"]
    # a tag of one form never answers for the other
    other_form = {"If-None-Match": packed.headers["ETag"]}
    assert lineage(client, "det/ckpt-4", **other_form).status_code == 200
    other_form = {"If-None-Match": full.headers["ETag"]}
    assert compact(client, "det/ckpt-4", **other_form).status_code == 200
    assert kept(client).bytes == len(full.content) + len(packed.content)  # both kept
    assert compact(client, "det/ckpt-4").content == packed.content


def test_unknown_form_and_errors(client: TestClient) -> None:
    _history(client)
    route = f"{API}/models/det/checkpoints/ckpt-4/lineage"
    error(client.get(route, params={"form": "columns"}), 422, "invalid_request")
    error(compact(client, "det/ckpt-9"), 404, "checkpoint_not_found")
    error(compact(client, "nobody/ckpt-1"), 404, "checkpoint_not_found")


def test_answers_do_not_depend_on_the_facts_kept(client: TestClient) -> None:
    names = _history(client)
    repository = client.app.state.repository.lineage  # type: ignore[attr-defined]
    first = repository.lineage("ft/ckpt-1").to_json(compact=True)
    assert len(repository.versions_shown) == 2  # v1 and v2, read once
    assert repository.lineage("ft/ckpt-1").to_json(compact=True) == first
    # a deprecation shows though the facts stay kept: the state is read with the walk
    client.post(f"{API}/versions/{names['v1']}/deprecate", json={"reason": "x", "force": True})
    after = repository.lineage("ft/ckpt-1").to_json(compact=True)["compact"]["columns"]
    states = dict(zip(after["version"], after["state"], strict=True))
    assert states == {names["v1"]: "deprecated", names["v2"]: "committed"}
    publish(client, "coco", content="c")  # an unrelated version: nothing to read for it
    assert len(repository.versions_shown) == 2


def _loader(
    loads: list[set[int]], state: str = "committed"
) -> Callable[[set[int]], dict[int, tuple[VersionFacts, str]]]:
    def load(ids: set[int]) -> dict[int, tuple[VersionFacts, str]]:
        loads.append(set(ids))
        return {i: (VersionFacts(f"ds_20231015_v{i}", "ds", i, None), state) for i in ids}

    return load


def test_versions_shown_cache_keeps_facts_and_states_of_one_epoch() -> None:
    loads: list[set[int]] = []
    cache = VersionsShownCache(max_versions=3)
    facts, states = cache.lookup([1, 2], 7, _loader(loads))
    assert facts[2] == VersionFacts("ds_20231015_v2", "ds", 2, None)
    assert states == {1: "committed", 2: "committed"} and loads == [{1, 2}]
    assert cache.lookup([2, 1], 7, _loader(loads))[1] == states and loads == [{1, 2}]
    # only 3 is read; the answer may be the kept mapping (every id asked, and others)
    facts = cache.lookup([2, 3], 7, _loader(loads))[0]
    assert {2, 3} <= set(facts) and facts[3].number == 3 and loads[-1] == {3}
    # a newer epoch: every state is read again (a version may have been deprecated)
    facts, states = cache.lookup([1, 2], 8, _loader(loads, "deprecated"))
    assert loads[-1] == {1, 2} and states == {1: "deprecated", 2: "deprecated"}
    # a request still at the older epoch reads for itself and keeps nothing
    assert cache.lookup([1], 7, _loader(loads))[1] == {1: "committed"} and loads[-1] == {1}
    assert cache.lookup([1, 2], 8, _loader(loads))[1] == states and loads[-1] == {1}
    # full: starts again with what it just read; more than it may keep: keeps none of it
    assert len(cache) == 2
    cache.lookup([4, 5], 8, _loader(loads))
    assert len(cache) == 2 and loads[-1] == {4, 5}
    cache.lookup(range(1, 7), 8, _loader(loads))
    assert len(cache) == 2 and loads[-1] == {1, 2, 3, 6}
    none = VersionsShownCache(max_versions=0)
    none.lookup([1], 8, _loader(loads))
    assert len(none) == 0


def test_states_read_for_an_older_epoch_are_not_kept_for_a_newer_one() -> None:
    """A request at epoch 7 reads states; before it keeps them, another request reads epoch 8
    (a deprecation committed in between): the older states must not be kept for 8."""
    loads: list[set[int]] = []
    cache = VersionsShownCache()

    def slow_load(ids: set[int]) -> dict[int, tuple[VersionFacts, str]]:
        cache.lookup(ids, 8, _loader(loads, "deprecated"))  # the other request, meanwhile
        return _loader(loads)(ids)

    assert cache.lookup([1], 7, slow_load)[1] == {1: "committed"}
    loads.clear()
    assert cache.lookup([1], 8, _loader(loads))[1] == {1: "deprecated"} and loads == []
