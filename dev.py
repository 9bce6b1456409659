#!/usr/bin/env python3
"""The two quickstart commands, needing nothing but Python 3.11+.

    python3 dev.py serve    # run the service on the embedded default (SQLite + local storage)
    python3 dev.py test     # install everything and run the whole test suite

Both create ``.venv/`` beside this file on first use and (re)install the project into it when
``pyproject.toml``, ``setup.py`` or the C extension's source changed.  Extra arguments go to the
underlying command (``python3 dev.py test -k naming``, ``python3 dev.py serve --port 9000``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")

#: The extras each command installs: the tests need every runtime extra (``all``) and the test
#: tooling with its servers (``dev``).
EXTRAS = {"serve": "server", "test": "all,dev"}


def _say(message: str) -> None:
    print(f"[dev] {message}", flush=True)


def _ensure_venv(extra: str) -> None:
    """Create the venv and install ``.[extra]`` (comma-separated extras) unless an identical
    install is recorded."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py may be run by an older python3
        sys.exit(f"recordkeeper needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        _say(f"creating {VENV.relative_to(ROOT)}/")
        venv.EnvBuilder(with_pip=True).create(VENV)
        subprocess.run([PYTHON, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    # The C extension is built at install time: a changed source must rebuild it too.
    build_inputs = ("pyproject.toml", "setup.py", "client/recordkeeper/_speedups.c")
    build_files = b"".join((ROOT / name).read_bytes() for name in build_inputs)
    fingerprint = hashlib.sha256(build_files).hexdigest()[:16]
    stamp = VENV / f".installed-{extra.replace(',', '+')}-{fingerprint}"
    if stamp.exists():
        return
    _say(f"installing recordkeeper[{extra}] into .venv (first run downloads dependencies)")
    subprocess.run(
        [PYTHON, "-m", "pip", "install", "-q", "-e", f".[{extra}]"], cwd=ROOT, check=True
    )
    stamp.touch()


def serve(args: list[str]) -> int:
    _ensure_venv(EXTRAS["serve"])
    return subprocess.call([BIN / "recordkeeper", "serve", *args])


def test(args: list[str]) -> int:
    _ensure_venv(EXTRAS["test"])
    code = subprocess.call([PYTHON, "-m", "pytest", *args], cwd=ROOT)
    if code == 5:
        _say("pytest collected no tests: that is a failure")
        return 1
    return code


def main(argv: list[str]) -> int:
    commands = {"serve": serve, "test": test}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
