"""Values of the wrong type given to any public ``Client`` method are refused with a typed
recordkeeper error (a stable code), never a ``TypeError``/``AttributeError`` from inside.

Every public method with required positional parameters is called with each bad value as its
first argument (the others a real version's name), against the service in-process.  Names and
references reach a request path through ``http.quote_segment`` and request bodies through
``HttpCore._send``: both refuse what they cannot send.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import recordkeeper as rk
from tests.apps import sqlite_app

pytest.importorskip("fastapi")

#: Methods that write files, train or need keyword-only arguments to mean anything.
SKIPPED = {"close", "convert", "derive", "publish", "stage", "tf_dataset", "writer"}
BAD_VALUES: list[Any] = [None, 123, ["x"], b"bytes", {"a": 1}, 1.5]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[rk.Client]:
    store = tmp_path / "store"
    store.mkdir()
    root = store.as_uri()
    with sqlite_app(tmp_path, storage_root=root, allowed_roots=[root]) as http:
        yield rk.Client(http_client=http)


def _methods(client: rk.Client) -> list[tuple[str, Any, int]]:
    found = []
    for name, method in inspect.getmembers(client, predicate=inspect.ismethod):
        if name.startswith("_") or name in SKIPPED:
            continue
        required = [
            p
            for p in inspect.signature(method).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if required:
            found.append((name, method, len(required)))
    return found


def test_wrong_types_are_refused_with_a_code(client: rk.Client, tmp_path: Path) -> None:
    with client.writer("coco", storage_options={}) as w:
        w.write(b"one record", split="train")
    name = w.version.name
    methods = _methods(client)
    assert len(methods) > 20, [m[0] for m in methods]  # the façade's calls are all reached
    crashed = []
    for method_name, method, required in methods:
        for bad in BAD_VALUES:
            try:
                answer = method(bad, *[name] * (required - 1))
                if inspect.isgenerator(answer):
                    list(answer)
            except rk.RecordkeeperError as exc:
                assert exc.code, (method_name, bad)
            except Exception as exc:  # the point: nothing else may escape
                crashed.append(f"{method_name}({bad!r}): {type(exc).__name__}: {exc}")
    assert crashed == []


def test_derivations_and_provenance_keywords_refuse_wrong_types(client: rk.Client) -> None:
    """``derive`` (skipped above) and the provenance keywords every writer takes (``parents``,
    ``sources``, ``params``, ``code``: shared by ``writer``, ``derive``, ``publish``
    and Beam through ``build_provenance``), and a derivation's changes: a wrong type is a typed
    error before anything is staged, never a ``TypeError``/``AttributeError`` from inside."""
    with client.writer("coco", storage_options={}, code=None) as w:
        w.write(b"one record", split="train")
    base = w.version.name
    staged_before = client.versions("coco", state="staged")
    bad_values = [*BAD_VALUES, 0, True, object(), "\x00", {1, 2}]
    crashed = []

    def attempt(what: str, call: Any, *args: Any, **kwargs: Any) -> None:
        try:
            call(*args, **kwargs)
        except rk.RecordkeeperError as exc:
            assert exc.code, what
        except Exception as exc:  # the point: nothing else may escape
            crashed.append(f"{what}: {type(exc).__name__}: {exc}")

    for bad in bad_values:
        attempt(f"derive({bad!r})", client.derive, bad)
        for keyword in ("parents", "sources", "params", "code"):
            options = {"code": None, keyword: bad}
            attempt(f"derive({keyword}={bad!r})", client.derive, base, **options)
            attempt(f"writer({keyword}={bad!r})", client.writer, "coco", **options)
        derivation = client.derive(base, code=None)
        attempt(f"add_files('train', {bad!r})", derivation.add_files, "train", bad)
        attempt(f"write(split={bad!r})", derivation.write, b"x", split=bad)
        attempt(f"writer.write(split={bad!r})", client.writer("coco", code=None).write, b"x", bad)
        derivation.abort()
    assert crashed == []
    assert client.versions("coco", state="staged") == staged_before  # nothing was staged


def test_impact_of_a_bad_request_is_invalid_request_not_a_checkpoint_error(
    client: rk.Client,
) -> None:
    for kwargs in ({}, {"version": "coco@v1", "source": "gs://raw/"}, {"source": "  "}):
        with pytest.raises(rk.InvalidRequest):
            client.impact(**kwargs)
    with pytest.raises(rk.InvalidRequest):
        client.impact(source=5)  # type: ignore[arg-type]
