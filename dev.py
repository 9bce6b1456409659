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
#: An install of these extras also has these (``all`` includes ``server``): no second install.
COVERS = {"all,dev": {"server", "all,dev"}, "server": {"server"}}


def _say(message: str) -> None:
    print(f"[dev] {message}", flush=True)


def stamp(extras: str) -> Path:
    """The file recording that ``.[extras]`` was installed from these build inputs (the C
    extension is built at install time: a changed source must rebuild it too)."""
    build_inputs = (
        "pyproject.toml",
        "constraints.txt",
        "setup.py",
        "client/recordkeeper/_speedups.c",
    )
    build_files = b"".join((ROOT / name).read_bytes() for name in build_inputs)
    fingerprint = hashlib.sha256(build_files).hexdigest()[:16]
    return VENV / f".installed-{extras.replace(',', '+')}-{fingerprint}"


def _ensure_venv(extra: str) -> None:
    """Create the venv and install ``.[extra]`` (comma-separated extras) unless an identical
    install is recorded."""
    if sys.version_info < (3, 11):  # noqa: UP036 - dev.py may be run by an older python3
        sys.exit(f"recordkeeper needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        _say(f"creating {VENV.relative_to(ROOT)}/")
        venv.EnvBuilder(with_pip=True).create(VENV)
        subprocess.run([PYTHON, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    if any(stamp(done).exists() for done, covered in COVERS.items() if extra in covered):
        return
    _say(
        f"installing recordkeeper[{extra}] into .venv: a few minutes the first time (pip's "
        "progress follows; later runs skip this)"
    )
    # Not quiet: minutes without output look like a hang.
    # The known-good versions (constraints.txt): the same install every time, found at once.
    pip_install = [PYTHON, "-m", "pip", "install", "--progress-bar", "on"]
    subprocess.run(
        [*pip_install, "-c", "constraints.txt", "-e", f".[{extra}]"], cwd=ROOT, check=True
    )
    stamp(extra).touch()


def serve(args: list[str]) -> int:
    _ensure_venv(EXTRAS["serve"])
    command = [str(BIN / "recordkeeper"), "serve", *args]
    if os.name == "posix":
        # Become the server: Ctrl-C, a kill or a supervisor's stop reach it, not a parent
        # that would leave it running.
        os.execv(command[0], command)
    return subprocess.call(command)


#: How the suite spreads over the machine's cores (pytest-xdist): one worker per core, each
#: test file on one worker, so a file's module-scoped servers and apps start once.  Most of the
#: suite waits on real servers, TensorFlow and Chromium, not on one core.
PARALLEL = ["-n", "auto", "--dist", "loadfile"]


def _pytest_args(args: list[str]) -> list[str]:
    """``args``, spread over the cores unless they choose (``-n``, ``-p no:xdist``) or only
    collect."""
    chosen = any(
        a in ("-n", "--numprocesses", "--collect-only", "--co", "no:xdist")
        or a.startswith(("-n", "--numprocesses="))
        for a in args
    )
    return args if chosen else [*PARALLEL, *args]


def test(args: list[str]) -> int:
    _ensure_venv(EXTRAS["test"])
    code = subprocess.call([PYTHON, "-m", "pytest", *_pytest_args(args)], cwd=ROOT)
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
