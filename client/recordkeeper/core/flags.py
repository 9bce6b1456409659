"""On/off settings written as text (environment variables): one parser for every spelling.

``1``, ``true``, ``yes``, ``on`` mean on and ``0``, ``false``, ``no``, ``off`` or nothing at
all mean off, in any case and with surrounding blanks ignored.  Anything else is refused with
:class:`~recordkeeper.core.errors.InvalidInput` naming the setting, rather than guessed.
"""

from __future__ import annotations

from recordkeeper.core.errors import InvalidInput

__all__ = ["FALSE_SPELLINGS", "TRUE_SPELLINGS", "parse_flag"]

TRUE_SPELLINGS = frozenset({"1", "true", "yes", "on"})
FALSE_SPELLINGS = frozenset({"", "0", "false", "no", "off"})


def parse_flag(name: str, value: str | None) -> bool:
    """Whether the setting ``name`` with text ``value`` (None: not set) is on."""
    text = (value or "").strip().lower()
    if text in TRUE_SPELLINGS:
        return True
    if text in FALSE_SPELLINGS:
        return False
    raise InvalidInput(
        f"{name}={value!r} is neither on ({', '.join(sorted(TRUE_SPELLINGS))}) nor off "
        f"({', '.join(sorted(FALSE_SPELLINGS - {''}))}, or unset)",
        setting=name,
    )
