"""The reference grammar: one way to name a dataset version everywhere.

==============================================  =====================================
reference                                       means
==============================================  =====================================
``coco_20231015_v3_add_person``                 that exact version
``coco_20231015_v3``                            that version (desc omitted)
``coco@v3``, ``coco@3``                         version 3 of coco
``coco@latest``, ``coco@prod``                  an alias, resolved when asked
``coco@sha256:9f2c4e1a7b3d``                    by content digest (12 to 64 hex digits)
``coco@records:sha256:5e0c41d2a9b7``            the newest committed version with exactly
                                                these records (records digest, 12 to 64 hex
                                                digits; docs/record-identity.md)
``coco_20231015_staged4_add_person``            a version by its staged name (any state)
==============================================  =====================================
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from recordkeeper.core.digests import DIGEST_PREFIX, MIN_DIGEST_PREFIX, is_hex
from recordkeeper.core.errors import InvalidAlias, InvalidName, InvalidReference, InvalidVersionName
from recordkeeper.core.lifecycle import PUBLISHED_STATES
from recordkeeper.core.limits import MAX_REFERENCE_LENGTH
from recordkeeper.core.naming import (
    MAX_VERSION_NUMBER,
    StagedName,
    VersionName,
    is_staged_name,
    is_version_name_shaped,
    parse_staged_name,
    parse_version_name,
    parse_version_number,
    quoted,
    validate_dataset_name,
)

__all__ = [
    "LATEST",
    "MIN_DIGEST_PREFIX",
    "PUBLISHED_STATES",
    "RECORDS_PREFIX",
    "RefKind",
    "Reference",
    "parse_reference",
    "validate_alias_name",
]

LATEST = "latest"
#: The selector of a reference by records digest: ``coco@records:sha256:<hex>``.
RECORDS_PREFIX = "records:"
_ALIAS_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_NUMBER_RE = re.compile(r"v?([0-9]+)")


class RefKind(enum.StrEnum):
    NAME = "name"
    NUMBER = "number"
    ALIAS = "alias"
    DIGEST = "digest"
    STAGED = "staged"
    RECORDS = "records"


@dataclass(frozen=True)
class Reference:
    """A parsed reference.  ``str(ref)`` gives back its canonical spelling."""

    dataset: str
    kind: RefKind
    number: int | None = None
    alias: str | None = None
    digest_prefix: str | None = None
    name: VersionName | None = None
    staged: StagedName | None = None
    #: Hex digits (12 to 64) of the records digest a ``RECORDS`` reference names.
    records_prefix: str | None = None

    def __str__(self) -> str:
        if self.kind is RefKind.NAME:
            return str(self.name)
        if self.kind is RefKind.STAGED:
            return str(self.staged)
        if self.kind is RefKind.NUMBER:
            return f"{self.dataset}@v{self.number}"
        if self.kind is RefKind.ALIAS:
            return f"{self.dataset}@{self.alias}"
        if self.kind is RefKind.RECORDS:
            return f"{self.dataset}@{RECORDS_PREFIX}{DIGEST_PREFIX}{self.records_prefix}"
        return f"{self.dataset}@{DIGEST_PREFIX}{self.digest_prefix}"

    @property
    def is_pinned(self) -> bool:
        """True when the reference can never point at different content: not an alias, and
        not a records digest (a later version with the same records, resharded, is picked)."""
        return self.kind is not RefKind.ALIAS and self.kind is not RefKind.RECORDS


def validate_alias_name(alias: str) -> str:
    """Return ``alias`` if usable as an alias name (``prod``, ``golden``), else raise."""
    if not isinstance(alias, str) or not _ALIAS_RE.fullmatch(alias):
        raise InvalidAlias(
            f"alias {quoted(alias)} is invalid: use lowercase letters, digits, '_' and '-', "
            "starting with a letter, at most 64 characters"
        )
    if _NUMBER_RE.fullmatch(alias) or alias == "sha256":
        raise InvalidAlias(f"alias {quoted(alias)} would be read as a version number or digest")
    return alias


def _not_a_version_name(text: str, error: InvalidVersionName) -> str:
    """Why ``text`` (no ``@``, not a staged name) names no version, in one sentence: a bare
    dataset name gets the reference to use, a malformed version name the part that is wrong."""
    if is_version_name_shaped(text):
        return error.detail  # "version name 'coco_20231301_v3': date ... is not a calendar date"
    try:
        validate_dataset_name(text)
    except InvalidName:
        return (
            f"{quoted(text)} is neither a version name (dataset_YYYYMMDD_vN[_desc], e.g. "
            "coco_20231015_v3) nor a reference of the form dataset@selector (e.g. coco@latest)"
        )
    return (
        f"{quoted(text)} is neither a version name nor a reference; to name its newest version "
        f"use {quoted(text + '@' + LATEST)} (or {text}@vN, {text}@<alias>)"
    )


def _digest_hex(text: str, digest: str) -> str:
    """The hex digits of a digest selector (12 to 64, lowercase), else the reason."""
    if not is_hex(digest):
        raise InvalidReference(
            f"reference {quoted(text)}: digest must be lowercase hex, got {quoted(digest)}"
        )
    if not MIN_DIGEST_PREFIX <= len(digest) <= 64:
        raise InvalidReference(
            f"reference {quoted(text)}: a digest needs {MIN_DIGEST_PREFIX} to 64 hex digits, "
            f"got {len(digest)}"
        )
    return digest


def parse_reference(text: str) -> Reference:
    """Parse any reference form, raising :class:`InvalidReference` with a precise reason."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidReference("reference must be a non-empty string such as 'coco@latest'")
    text = text.strip()
    if len(text) > MAX_REFERENCE_LENGTH:
        raise InvalidReference(
            f"reference {quoted(text)} is {len(text)} characters long; "
            f"at most {MAX_REFERENCE_LENGTH} are allowed"
        )
    if "@" not in text and is_staged_name(text):
        try:
            staged = parse_staged_name(text)
        except InvalidVersionName as exc:
            raise InvalidReference(exc.detail) from None
        return Reference(dataset=staged.dataset, kind=RefKind.STAGED, staged=staged)
    if "@" not in text:
        try:
            name = parse_version_name(text)
        except InvalidVersionName as exc:
            raise InvalidReference(_not_a_version_name(text, exc)) from None
        return Reference(dataset=name.dataset, kind=RefKind.NAME, number=name.number, name=name)

    dataset, _, selector = text.partition("@")
    try:
        validate_dataset_name(dataset)
    except InvalidName as exc:
        raise InvalidReference(f"reference {quoted(text)}: {exc.detail}") from None
    if not selector:
        raise InvalidReference(
            f"reference {quoted(text)} has nothing after '@'; "
            "use vN, latest, an alias, sha256:<hex> or records:sha256:<hex>"
        )
    if selector.startswith(RECORDS_PREFIX):
        digest = selector.removeprefix(RECORDS_PREFIX)
        if not digest.startswith(DIGEST_PREFIX):
            raise InvalidReference(
                f"reference {quoted(text)}: a records digest is written "
                f"{RECORDS_PREFIX}{DIGEST_PREFIX}<hex> (as `recordkeeper index` prints it)"
            )
        hexes = _digest_hex(text, digest.removeprefix(DIGEST_PREFIX))
        return Reference(dataset=dataset, kind=RefKind.RECORDS, records_prefix=hexes)
    if selector.startswith(DIGEST_PREFIX):
        digest = _digest_hex(text, selector.removeprefix(DIGEST_PREFIX))
        return Reference(dataset=dataset, kind=RefKind.DIGEST, digest_prefix=digest)
    number = _NUMBER_RE.fullmatch(selector)
    if number:
        value = parse_version_number(number[1])
        if value is None:
            raise InvalidReference(
                f"reference {quoted(text)}: version number ({len(number[1])} digits) is above "
                f"the highest allowed, {MAX_VERSION_NUMBER}"
            )
        if value < 1:
            raise InvalidReference(f"reference {quoted(text)}: version numbers start at 1")
        if number[1].startswith("0"):  # as in names: v1 has one spelling
            raise InvalidReference(
                f"reference {quoted(text)}: a version number has no leading zeros "
                f"(write {dataset}@v{value})"
            )
        return Reference(dataset=dataset, kind=RefKind.NUMBER, number=value)
    try:
        alias = validate_alias_name(selector)
    except InvalidAlias as exc:
        raise InvalidReference(f"reference {quoted(text)}: {exc.detail}") from None
    return Reference(dataset=dataset, kind=RefKind.ALIAS, alias=alias)
