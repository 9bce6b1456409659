"""The code blocks of the Markdown documentation, and the directives that say how to run them.

A fenced block's language decides what the doc-test runner does with it:

- ``python``: executed; the blocks of one file share one namespace, in order;
- ``bash`` / ``sh`` / ``shell``: executed by ``bash -euo pipefail``;
- ``console``: the lines starting with ``$ `` are commands (a trailing ``\\`` continues one),
  executed like ``bash``; the other lines are the output a user sees, not checked;
- ``json`` / ``yaml``: parsed;
- ``text``: diagrams, output, grammars: not code, nothing to run.

A block without a language is refused: every block says what it is.

Directives are HTML comments, invisible on a rendered page:

- ``<!-- doctest: skip REASON -->`` right before a block: not run, and the reason says why;
- ``<!-- doctest: exit N -->`` right before a shell block: its last command exits with ``N``;
- ``<!-- doctest: raises NAME -->`` right before a Python block: it raises ``NAME`` (an
  exception class name, e.g. ``StaleLock``);
- ``<!-- doctest-setup: python`` … ``-->`` (or ``bash``): hidden code run at that point, for
  what a reader has already (example records, a file to publish);
- ``<!-- doctest: uses s3 gcs -->`` anywhere: the file needs those servers (``s3://ml-data`` and
  ``gs://bucket`` are created, and their credentials are in the environment).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

RUN_LANGUAGES = {"python", "bash", "sh", "shell", "console"}
PARSE_LANGUAGES = {"json", "yaml"}
TEXT_LANGUAGES = {"text"}
KNOWN_LANGUAGES = RUN_LANGUAGES | PARSE_LANGUAGES | TEXT_LANGUAGES

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*doctest:\s*(?P<verb>[a-z-]+)\s*(?P<arg>.*?)\s*-->\s*$")
_HIDDEN = re.compile(r"^\s*<!--\s*doctest-setup:\s*(?P<language>[a-z]+)\s*$")


@dataclass(frozen=True)
class Block:
    """One code block (or hidden setup block) of a Markdown file."""

    path: Path
    line: int  # 1-based line of the opening fence (or of the hidden block's comment)
    language: str
    code: str
    skip: str | None = None  # the reason, when the block is not run
    exit_code: int = 0
    raises: str | None = None
    hidden: bool = False

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


@dataclass(frozen=True)
class Document:
    """A Markdown file's blocks, in order, and the servers it asks for."""

    path: Path
    blocks: list[Block]
    uses: frozenset[str]


class DocumentError(ValueError):
    """A Markdown file the runner cannot take as written (unlabelled block, bad directive)."""


def parse(path: Path) -> Document:
    """Read ``path`` and return its blocks with their directives applied."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    uses: set[str] = set()
    pending: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index]
        hidden = _HIDDEN.match(line)
        if hidden:
            end = _find(lines, index + 1, lambda text: text.strip() == "-->", path, index)
            code = "\n".join(lines[index + 1 : end])
            blocks.append(Block(path, index + 1, hidden["language"], code, hidden=True))
            index = end + 1
            continue
        directive = _DIRECTIVE.match(line)
        if directive:
            verb, arg = directive["verb"], directive["arg"]
            if verb == "uses":
                uses.update(arg.replace(",", " ").split())
            elif verb in {"skip", "exit", "raises"}:
                if not arg:
                    raise DocumentError(
                        f"{path.name}:{index + 1}: `doctest: {verb}` needs an argument"
                    )
                pending[verb] = arg
            else:
                raise DocumentError(f"{path.name}:{index + 1}: unknown directive `{verb}`")
            index += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            marker = fence["fence"]
            language = fence["info"].strip().split(" ")[0].lower()
            end = _find(lines, index + 1, lambda text, m=marker: text.strip() == m, path, index)
            if language not in KNOWN_LANGUAGES:
                raise DocumentError(
                    f"{path.name}:{index + 1}: a code block must say what it is "
                    f"(one of {', '.join(sorted(KNOWN_LANGUAGES))}), not {language or 'nothing'!r}"
                )
            indent = len(fence["indent"])
            code = "\n".join(text[indent:] for text in lines[index + 1 : end])
            blocks.append(
                Block(
                    path,
                    index + 1,
                    language,
                    code,
                    skip=pending.get("skip"),
                    exit_code=int(pending.get("exit", "0")),
                    raises=pending.get("raises"),
                )
            )
            pending = {}
            index = end + 1
            continue
        if line.strip():
            pending = {}  # a directive applies to the block right after it
        index += 1
    return Document(path, blocks, frozenset(uses))


def console_commands(code: str) -> str:
    """A ``console`` block's commands (``$ `` lines, ``\\`` continuing them), as a script."""
    commands: list[str] = []
    continuing = False
    for line in code.splitlines():
        if continuing:
            commands[-1] += "\n" + line
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            continue
        continuing = line.rstrip().endswith("\\")
    return "\n".join(commands)


def _find(
    lines: list[str], start: int, is_end: Callable[[str], bool], path: Path, opened: int
) -> int:
    for index in range(start, len(lines)):
        if is_end(lines[index]):
            return index
    raise DocumentError(f"{path.name}:{opened + 1}: block is never closed")
