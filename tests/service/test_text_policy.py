"""Behind the boundary: a checkpoint that could not be answered is never committed, and the
lineage repository bounds the text it stores (defence in depth for the request models' checks,
which tests/integration/test_text_policy.py covers over a socket)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from recordkeeper.core.errors import InvalidCheckpoint, InvalidRequest
from recordkeeper.core.limits import MAX_SAVED_MODEL_NAME_LENGTH, MAX_URI_LENGTH
from recordkeeper.core.roots import AllowedRoots
from recordkeeper_service.db import Database
from recordkeeper_service.repository import Repository
from recordkeeper_service.repository.lineage import CheckpointInput


@pytest.fixture
def repository(database_url: str, store: str) -> Iterator[Repository]:
    db = Database(database_url)
    yield Repository(db, allowed_roots=AllowedRoots.of([store]), storage_root=store)
    db.dispose()


def _nothing_registered(repository: Repository) -> None:
    assert repository.lineage.list_models().count == 0


@pytest.mark.parametrize(
    "spec",
    [
        CheckpointInput(uri="s3://m/\ud800"),
        CheckpointInput(saved_models=({"name": "clf", "uri": "s3://m/\udfff"},)),
        CheckpointInput(saved_models=({"name": "\ud800", "uri": "s3://m/x"},)),
        CheckpointInput(uri="s3://m/" + "x" * MAX_URI_LENGTH),
        CheckpointInput(
            saved_models=({"name": "n" * (MAX_SAVED_MODEL_NAME_LENGTH + 1), "uri": "u"},)
        ),
        CheckpointInput(saved_models=({"name": "", "uri": "s3://m/x"},)),
        CheckpointInput(uri="s3://m/a\x00"),
        CheckpointInput(saved_models=({"name": "c\x00", "uri": "s3://m/x"},)),
    ],
)
def test_checkpoint_text_is_checked_by_the_repository(
    repository: Repository, spec: CheckpointInput
) -> None:
    with pytest.raises(InvalidCheckpoint):
        repository.lineage.register("det", "ckpt-1", spec, actor="t")
    _nothing_registered(repository)


@pytest.mark.parametrize("metrics", [{"a": "\ud800"}, {"\udc00": 1}])
def test_a_checkpoint_that_cannot_be_answered_is_not_committed(
    repository: Repository, backend: str, metrics: dict[str, Any]
) -> None:
    # Free-form JSON reaching the repository with a lone surrogate (the request models refuse
    # it first): SQLite would store it, PostgreSQL refuses it; neither commits a row.
    error = InvalidRequest if backend == "sqlite" else Exception
    with pytest.raises(error):
        repository.lineage.register("det", "ckpt-1", CheckpointInput(metrics=metrics), actor="t")
    _nothing_registered(repository)
