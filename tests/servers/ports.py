"""Ports and child-process helpers shared by the test-server launchers.

Everything here binds to / talks to ``127.0.0.1`` only.

* :func:`free_port` and :func:`free_port_with_twin` pick unused TCP ports (the latter for
  SeaweedFS, whose servers also listen on ``port + 10000`` for gRPC).
* :class:`ServerProcess` runs a server binary with its output in a log file, waits for it to
  become ready, stops it politely then forcefully, and is registered with an ``atexit`` backstop
  so that an interrupted session does not leave servers behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = [
    "LOCALHOST",
    "ServerProcess",
    "ServerStartError",
    "free_port",
    "free_port_with_twin",
    "http_ok",
    "port_is_free",
    "tcp_port_open",
]

LOCALHOST = "127.0.0.1"

#: Ports handed out during this process; never handed out twice even if nothing listens yet.
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


class ServerStartError(RuntimeError):
    """A test server could not be started; the message includes the tail of its log."""


def port_is_free(port: int, host: str = LOCALHOST) -> bool:
    """Return True if ``port`` can be bound on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = LOCALHOST) -> int:
    """Return a currently unused TCP port chosen by the kernel (never the same one twice)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        with _handed_out_lock:
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise ServerStartError("could not find a free TCP port on 127.0.0.1")


def free_port_with_twin(
    offset: int = 10000, low: int = 20000, high: int = 55535, host: str = LOCALHOST
) -> int:
    """Return a free port ``p`` in ``[low, high]`` whose twin ``p + offset`` is free too.

    SeaweedFS servers listen on ``port`` (HTTP) and ``port + 10000`` (gRPC); a port above 55535
    makes the twin invalid and the filer dies with "invalid port".
    """
    if high + offset > 65535:
        raise ValueError(f"high={high} + offset={offset} exceeds 65535")
    rng = random.Random()
    for _ in range(500):
        port = rng.randint(low, high)
        with _handed_out_lock:
            if port in _handed_out or port + offset in _handed_out:
                continue
            if port_is_free(port, host) and port_is_free(port + offset, host):
                _handed_out.update((port, port + offset))
                return port
    raise ServerStartError(f"could not find a free port pair (p, p+{offset}) below {high}")


def tcp_port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Return True if something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """Return True if a GET of ``url`` answers with a 2xx status."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 200 <= int(response.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


# --------------------------------------------------------------------------------------------
# child processes
# --------------------------------------------------------------------------------------------

_live: set[ServerProcess] = set()
_live_lock = threading.Lock()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """``preexec_fn``: ask Linux to SIGKILL the child if the test process dies (even SIGKILL)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _kill_leftovers() -> None:
    """``atexit`` backstop: kill every server process still running."""
    with _live_lock:
        leftovers = list(_live)
    for proc in leftovers:
        with contextlib.suppress(Exception):
            proc.stop(grace=2.0)


atexit.register(_kill_leftovers)


class ServerProcess:
    """A server binary running as a child process, its output captured in a log file.

    The child gets its own session (so a terminal Ctrl-C reaches pytest, which then runs the
    fixture finalizers, not the servers directly) and, on Linux, a parent-death signal so that it
    dies with the test process even if that is killed hard.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: int | str | None = None,
        group: int | str | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        """Start ``argv``; stdout and stderr go to ``log_path``.

        Args:
            name: human-readable name used in messages.
            argv: the command line.
            log_path: file receiving the combined output.
            env: environment of the child (default: inherit).
            cwd: working directory of the child.
            user, group: run the child as this user/group (needs root).
            stop_signal: signal that asks the server to shut down.
        """
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.stop_signal = stop_signal
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed in stop())
        preexec: Callable[[], None] | None = _die_with_parent if sys.platform == "linux" else None
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=str(cwd) if cwd is not None else None,
                start_new_session=True,
                preexec_fn=preexec,
                user=user,
                group=group,
                extra_groups=[] if user is not None else None,
            )
        except OSError as exc:
            self._log.close()
            raise ServerStartError(f"{name}: cannot execute {self.argv[0]}: {exc}") from exc
        with _live_lock:
            _live.add(self)

    @property
    def pid(self) -> int:
        """The child's process id."""
        return int(self.process.pid)

    def running(self) -> bool:
        """Return True while the child has not exited."""
        return self.process.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """Return the last ``lines`` lines of the server's log."""
        with contextlib.suppress(ValueError, OSError):  # closed once the server is stopped
            self._log.flush()
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"<log {self.log_path} unreadable: {exc}>"
        return "\n".join(text.splitlines()[-lines:])

    def fail(self, message: str) -> ServerStartError:
        """Stop the server and build an error whose message ends with the log tail."""
        self.stop(grace=2.0)
        return ServerStartError(
            f"{self.name}: {message}\n--- last lines of {self.log_path} ---\n{self.log_tail()}"
        )

    def wait_until(
        self, ready: Callable[[], bool], timeout: float, what: str, interval: float = 0.1
    ) -> float:
        """Poll ``ready()`` until it returns True; return the seconds waited.

        Raises:
            ServerStartError: the process exited, or ``timeout`` elapsed (the server is stopped
                and the error carries the tail of its log).
        """
        start = time.monotonic()
        deadline = start + timeout
        while True:
            if not self.running():
                raise self.fail(f"exited with code {self.process.returncode} before {what}")
            if ready():
                return time.monotonic() - start
            if time.monotonic() > deadline:
                raise self.fail(f"not ready after {timeout:.0f} s (waiting for {what})")
            time.sleep(interval)

    def stop(self, grace: float = 10.0) -> int | None:
        """Send the stop signal, wait up to ``grace`` seconds, then SIGKILL. Idempotent.

        Returns:
            The exit code (negative for a signal), or None if it could not be reaped.
        """
        try:
            if self.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    self.process.send_signal(self.stop_signal)
                try:
                    self.process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        self.process.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.process.wait(timeout=5)
            return self.process.returncode
        finally:
            with _live_lock:
                _live.discard(self)
            with contextlib.suppress(Exception):
                self._log.close()

    def __repr__(self) -> str:
        state = "running" if self.running() else f"exited {self.process.returncode}"
        return f"<ServerProcess {self.name} pid={self.pid} {state}>"
