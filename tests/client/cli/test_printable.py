"""What the CLI prints from the registry cannot drive the user's terminal: anyone with a write
token writes notes, commands and reasons, and an ESC sequence there could clear the screen,
retitle the window or hide what was printed.  Every string the console renders shows such
characters as escapes (``recordkeeper.cli.common.printable``)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import recordkeeper as rk
from recordkeeper import cli
from recordkeeper.cli.common import printable
from tests.client import _lineage_app

app_http = _lineage_app.app_http
switch = _lineage_app.switch
client = _lineage_app.client
runner = _lineage_app.runner

pytest.importorskip("fastapi")

HOSTILE = "fine\x1b[2J\x1b]0;owned\x07\rcover\u202eevil"


def test_printable_escapes_what_a_terminal_acts_on() -> None:
    assert printable(HOSTILE) == "fine\\x1b[2J\\x1b]0;owned\\x07\\rcover\\u202eevil"
    assert printable("tab\tand\nnewline, [bold]markup[/], ü, 日本") == (
        "tab\tand\nnewline, [bold]markup[/], ü, 日本"
    )


def test_show_and_log_print_a_hostile_note_as_escapes(runner: CliRunner, client: rk.Client) -> None:
    with client.writer("coco", desc="notes", note=HOSTILE) as w:
        w.write(b"a record")
    for command in (["show", w.version.name], ["log", "coco"]):
        shown = runner.invoke(cli.app, command)
        assert shown.exit_code == 0, shown.output
        assert "\x1b" not in shown.output and "\r" not in shown.output
        assert "\u202e" not in shown.output
    assert "\\x1b[2J" in runner.invoke(cli.app, ["show", w.version.name]).output
