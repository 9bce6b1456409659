"""Progress bars with bytes/s for long work, shown only on a terminal.

:func:`byte_progress` yields an ``advance(nbytes)`` callable; off a TTY (CI logs, pipes) it is a
no-op so output stays clean.  ``rich`` is imported only when a bar is really shown.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any, Protocol

__all__ = ["ProgressLike", "ProgressReader", "byte_progress", "should_show"]


class ProgressLike(Protocol):
    """Anything with ``advance(nbytes)``; pass one to ``publish(progress=...)`` to observe."""

    def advance(self, nbytes: int) -> None: ...


def should_show(enabled: bool | None) -> bool:
    """``None`` means: only when stderr is a terminal."""
    if enabled is not None:
        return enabled
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def byte_progress(
    description: str,
    total: int | None,
    enabled: bool | ProgressLike | None = None,
) -> Iterator[Callable[[int], None]]:
    """A thread-safe ``advance(nbytes)`` callable drawing a bytes/s bar when enabled."""
    if enabled is not None and not isinstance(enabled, bool):
        observer = enabled
        yield observer.advance
        return
    if not should_show(enabled):
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    lock = threading.Lock()
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    ) as bar:
        task = bar.add_task(description, total=total)

        def advance(nbytes: int) -> None:
            with lock:
                bar.advance(task, nbytes)

        yield advance


class ProgressReader:
    """A binary reader over ``raw`` that reports every chunk it reads to ``advance``.

    ``count`` is the number of bytes read so far.  With ``sink``, every chunk is also written
    there (a copy made during the one read).  ``close`` closes ``raw``.
    """

    def __init__(
        self,
        raw: IO[bytes],
        advance: Callable[[int], None] | None = None,
        sink: IO[bytes] | None = None,
    ) -> None:
        self._raw = raw
        self._advance = advance
        self._sink = sink
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        if data:
            if self._sink is not None:
                self._sink.write(data)
            self.count += len(data)
            if self._advance is not None:
                self._advance(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer`` (with ``raw.readinto`` when it has one: no copy)."""
        readinto = getattr(self._raw, "readinto", None)
        if readinto is None:
            data = self.read(len(buffer))
            buffer[: len(data)] = data
            return len(data)
        n: int = readinto(buffer) or 0
        if n:
            if self._sink is not None:
                with memoryview(buffer) as view:
                    self._sink.write(view[:n])
            self.count += n
            if self._advance is not None:
                self._advance(n)
        return n

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self._raw.close()
