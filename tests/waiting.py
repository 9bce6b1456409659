"""Waiting for an event another process or thread makes happen: :func:`wait_for`.

A test that reads output produced asynchronously — a service's log line (written after the
response is sent), its metrics (counted after the response), a file another process writes, a
page a browser renders — must wait for the event, not read once: on a loaded machine (CI) the
event comes later than on a quiet one.  ``wait_for`` asks ``probe`` again and again, a few
milliseconds apart, until it answers something truthy and returns that; at the deadline it fails
with ``what`` and the last answer.  The deadline bounds a hang; it is not a timing assertion
(the test passes however late within it the event comes).

:func:`answering` and :func:`started` are probes for the commonest event: a service is up.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

__all__ = ["DEFAULT_TIMEOUT", "MAX_PAUSE", "answering", "started", "wait_for"]

T = TypeVar("T")

#: Seconds before giving up: generous, since it only bounds a failure.
DEFAULT_TIMEOUT = 60.0
#: The longest pause between two probes: how late after the event a wait may notice it.  (It
#: was 0.5 s: a service up after 0.3 s was seen at 0.62 s, one up after 3 s at up to 3.5 s.)
MAX_PAUSE = 0.1


def wait_for(
    probe: Callable[[], T],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    interval: float = 0.02,
    what: str = "the event",
) -> T:
    """``probe()``'s first truthy answer, asked until ``timeout`` seconds have passed.

    An exception from ``probe`` propagates at once (it is a failure, not "not yet").  At the
    deadline an ``AssertionError`` names ``what`` and the last answer.
    """
    deadline = time.monotonic() + timeout
    pause = interval
    while True:
        answer = probe()
        if answer:
            return answer
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s (last: {answer!r})")
        time.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE)  # quick for a fast event, ten probes a second at most


def answering(
    url: str,
    *,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> Callable[[], bool]:
    """A probe for :func:`wait_for`: true once ``GET url`` answers 200 (a connection refused or
    reset is "not yet"); fails at once, with the log, when ``process`` has exited."""

    def probe() -> bool:
        if process is not None and process.poll() is not None:
            output = log.read_text(errors="replace") if log is not None else ""
            raise AssertionError(f"the process exited ({process.returncode}):\n{output}")
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    return probe


def started(server: Any, thread: threading.Thread) -> Callable[[], bool]:
    """A probe for :func:`wait_for`: true once a ``uvicorn.Server`` run by ``thread`` has
    started; fails at once when the thread has ended."""

    def probe() -> bool:
        if server.started:
            return True
        if not thread.is_alive():
            raise AssertionError("uvicorn ended before it started")
        return False

    return probe
