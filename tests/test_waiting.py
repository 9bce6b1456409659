"""The shared wait of the tests (tests/waiting.py) and the log reader built on it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.integration._serve import ServeProcess
from tests.waiting import wait_for


def test_wait_for_returns_the_first_truthy_answer_of_a_later_event() -> None:
    seen: list[int] = []
    timer = threading.Timer(0.2, seen.append, args=[7])
    timer.start()
    try:
        assert wait_for(lambda: list(seen), timeout=30, what="the timer") == [7]
    finally:
        timer.cancel()


def test_wait_for_fails_at_its_deadline_naming_the_event() -> None:
    with pytest.raises(AssertionError, match=r"the log line did not happen within 0.1 s"):
        wait_for(lambda: [], timeout=0.1, what="the log line")


def test_an_error_in_the_probe_is_not_waited_out() -> None:
    def broken() -> bool:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        wait_for(broken, timeout=30)


def test_a_log_line_still_being_written_is_not_read(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    log.write_text('recordkeeper serving on x\n{"request_id": "a"}\n{"request_id": "b", "pa')
    served: Any = ServeProcess("http://127.0.0.1:1", log, {}, process=None)  # type: ignore[arg-type]
    assert served.log_lines() == [{"request_id": "a"}]
    with log.open("a") as out:
        out.write('th": "/"}\n')
    found = served.wait_for_log(lambda line: line.get("request_id") == "b")
    assert found == [{"request_id": "b", "path": "/"}]
