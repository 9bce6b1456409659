"""Shell completion is on (issue 26, item 7): ``--show-completion`` prints the script and the
completion protocol answers commands and options, through the installed console script."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("recordkeeper")
    command = [exe] if exe else [sys.executable, "-m", "recordkeeper.cli"]
    return subprocess.run(
        command + args, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_show_completion_prints_a_script(shell: str) -> None:
    done = _run(["--show-completion", shell])
    assert done.returncode == 0, done.stderr
    assert "_RECORDKEEPER_COMPLETE" in done.stdout


def test_completion_answers_commands_and_options() -> None:
    done = _run(
        [], _RECORDKEEPER_COMPLETE="complete_bash", COMP_WORDS="recordkeeper he", COMP_CWORD="1"
    )
    assert done.returncode == 0, done.stderr
    assert "head" in done.stdout.split()
    done = _run(
        [],
        _RECORDKEEPER_COMPLETE="complete_bash",
        COMP_WORDS="recordkeeper head --sp",
        COMP_CWORD="2",
    )
    assert "--split" in done.stdout.split()
