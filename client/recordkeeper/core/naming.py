"""The ``rk1`` version naming convention: ``{dataset}_{YYYYMMDD}_v{N}[_{desc}]``.

Pure functions, no I/O; the service and the client share them.  Every version records the
convention that named it (:data:`CONVENTION`), so a later convention can coexist with old names.

``N`` is given when a version is *committed*, so content that turns out to duplicate an existing
version never takes a number.  Until then a version is addressed by its staged name,
``{dataset}_{YYYYMMDD}_staged{K}[_{desc}]`` (``K`` counts the dataset's stagings), which stays
a name of the version after its commit (:func:`format_staged_name`, :func:`parse_staged_name`).

>>> name = format_version_name("coco", datetime.date(2023, 10, 15), 3, "add_person")
>>> name
'coco_20231015_v3_add_person'
>>> parse_version_name(name).number
3
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

from recordkeeper.core.errors import (
    InvalidDate,
    InvalidDescription,
    InvalidName,
    InvalidVersionName,
)
from recordkeeper.core.limits import (
    MAX_DATASET_NAME_LENGTH,
    MAX_DESC_LENGTH,
    MAX_INT64,
    parse_decimal,
)

__all__ = [
    "CONVENTION",
    "MAX_DATASET_NAME_LENGTH",
    "MAX_DESC_LENGTH",
    "MAX_VERSION_NUMBER",
    "StagedName",
    "VersionName",
    "format_date",
    "format_staged_name",
    "format_version_name",
    "is_staged_name",
    "is_version_name_shaped",
    "parse_date",
    "parse_staged_name",
    "parse_version_name",
    "parse_version_number",
    "quoted",
    "slugify",
    "validate_dataset_name",
    "validate_desc",
]

CONVENTION = "rk1"
#: The highest version number (a 64-bit column).
MAX_VERSION_NUMBER = MAX_INT64

_DATASET_RE = re.compile(r"[a-z][a-z0-9_-]*")
# Digits are ASCII digits: ``\d`` would also match Arabic-Indic or full-width digits.
_EMBEDDED_VERSION_RE = re.compile(r"_[0-9]{8}_(?:v|staged)[0-9]+")
_DATE_RE = re.compile(r"[0-9]{8}")
_ISO_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DESC_RE = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_VERSION_RE = re.compile(
    r"(?P<dataset>[a-z][a-z0-9_-]*?)_(?P<date>[0-9]{8})_v(?P<number>[0-9]+)(?:_(?P<desc>.+))?"
)
_STAGED_RE = re.compile(
    r"(?P<dataset>[a-z][a-z0-9_-]*?)_(?P<date>[0-9]{8})_staged(?P<number>[0-9]+)(?:_(?P<desc>.+))?"
)


def quoted(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages about user input."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 5] + "...'"


@dataclass(frozen=True, order=True)
class VersionName:
    """A parsed ``rk1`` version name."""

    dataset: str
    date: datetime.date
    number: int
    desc: str | None = None

    def __str__(self) -> str:
        return format_version_name(self.dataset, self.date, self.number, self.desc)


@dataclass(frozen=True, order=True)
class StagedName:
    """A parsed staged name: ``coco_20231015_staged4_add_person`` (the dataset's 4th staging)."""

    dataset: str
    date: datetime.date
    stage: int
    desc: str | None = None

    def __str__(self) -> str:
        return format_staged_name(self.dataset, self.date, self.stage, self.desc)


def validate_dataset_name(name: str) -> str:
    """Return ``name`` if it is a valid dataset name, else raise :class:`InvalidName`.

    Lowercase letters, digits, ``_`` and ``-``; starts with a letter; at most 64 characters;
    must not contain the ``_YYYYMMDD_vN`` or ``_YYYYMMDD_stagedN`` patterns (they would make
    version names ambiguous).
    """
    if not isinstance(name, str) or not name:
        raise InvalidName("dataset name must be a non-empty string")
    if len(name) > MAX_DATASET_NAME_LENGTH:
        raise InvalidName(
            f"dataset name {quoted(name)} is {len(name)} characters long; "
            f"at most {MAX_DATASET_NAME_LENGTH} are allowed"
        )
    if not _DATASET_RE.fullmatch(name):
        raise InvalidName(
            f"dataset name {quoted(name)} is invalid: use lowercase letters, digits, '_' and '-', "
            "starting with a letter"
        )
    if _EMBEDDED_VERSION_RE.search(name):
        raise InvalidName(
            f"dataset name {quoted(name)} contains a '_YYYYMMDD_vN' version pattern (or "
            "'_YYYYMMDD_stagedN'); it would make version names ambiguous"
        )
    return name


def validate_desc(desc: str | None) -> str | None:
    """Return ``desc`` if it is ``None`` or a lowercase slug (``add_person``), else raise."""
    if desc is None:
        return None
    if not isinstance(desc, str) or not desc:
        raise InvalidDescription("desc must be a non-empty lowercase slug such as 'add_person'")
    if len(desc) > MAX_DESC_LENGTH:
        raise InvalidDescription(
            f"desc is {len(desc)} characters long; at most {MAX_DESC_LENGTH} are allowed"
        )
    if not _DESC_RE.fullmatch(desc):
        suggestion = slugify(desc)
        hint = f"; did you mean {quoted(suggestion)}?" if suggestion else ""
        raise InvalidDescription(
            f"desc {quoted(desc)} is not a lowercase slug "
            "(letters, digits, single '_' between words)" + hint
        )
    return desc


def slugify(text: str) -> str:
    """Turn free text into a desc slug: ``"Add person!"`` → ``"add_person"``."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return "_".join(words)[:MAX_DESC_LENGTH].strip("_")


def parse_date(text: str) -> datetime.date:
    """Parse ``YYYYMMDD`` (or ISO ``YYYY-MM-DD``) strictly; ``20231301`` is rejected."""
    if not isinstance(text, str):
        raise InvalidDate(f"date must be a string, got {type(text).__name__}")
    compact = text.replace("-", "") if _ISO_DATE_RE.fullmatch(text) else text
    if not _DATE_RE.fullmatch(compact):
        raise InvalidDate(f"date {quoted(text)} is not in YYYYMMDD form")
    try:
        return datetime.date(int(compact[:4]), int(compact[4:6]), int(compact[6:]))
    except ValueError as exc:
        raise InvalidDate(f"date {quoted(text)} is not a calendar date: {exc}") from None


def format_date(date: datetime.date) -> str:
    """``YYYYMMDD`` with four digits of year, whatever the year (``strftime('%Y')`` writes
    year 1 as ``1``, which no parser of these names would read back)."""
    return f"{date.year:04d}{date.month:02d}{date.day:02d}"


def format_version_name(
    dataset: str, date: datetime.date, number: int, desc: str | None = None
) -> str:
    """Format an ``rk1`` name after validating every part."""
    validate_dataset_name(dataset)
    validate_desc(desc)
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise InvalidVersionName(f"version number must be a positive integer, got {quoted(number)}")
    name = f"{dataset}_{format_date(date)}_v{number}"
    return f"{name}_{desc}" if desc else name


def parse_version_name(name: str) -> VersionName:
    """Parse an ``rk1`` version name, raising :class:`InvalidVersionName` with the reason."""
    if not isinstance(name, str):
        raise InvalidVersionName(f"version name must be a string, got {type(name).__name__}")
    match = _VERSION_RE.fullmatch(name)
    if match is None:
        raise InvalidVersionName(
            f"{quoted(name)} is not a version name of the form dataset_YYYYMMDD_vN[_desc] "
            "(e.g. coco_20231015_v3_add_person)"
        )
    try:
        dataset = validate_dataset_name(match["dataset"])
        date = parse_date(match["date"])
        desc = validate_desc(match["desc"])
    except (InvalidName, InvalidDate, InvalidDescription) as exc:
        raise InvalidVersionName(f"version name {quoted(name)}: {exc.detail}") from None
    digits = match["number"]
    if digits.startswith("0"):
        raise InvalidVersionName(
            f"version name {quoted(name)}: version number 'v{quoted(digits, 24)[1:-1]}' must be "
            "positive and have no leading zeros"
        )
    number = parse_version_number(digits)
    if number is None:
        raise InvalidVersionName(
            f"version name {quoted(name)}: version number ({len(digits)} digits) is above "
            f"the highest allowed, {MAX_VERSION_NUMBER}"
        )
    return VersionName(dataset=dataset, date=date, number=number, desc=desc)


def parse_version_number(digits: str) -> int | None:
    """The version number written as ASCII ``digits``, or None if it is not one (not ASCII
    decimal digits, or above :data:`MAX_VERSION_NUMBER`).  Bounded before conversion."""
    return parse_decimal(digits, maximum=MAX_VERSION_NUMBER)


def format_staged_name(
    dataset: str, date: datetime.date, stage: int, desc: str | None = None
) -> str:
    """Format a staged name (``coco_20231015_staged4_add_person``) after validating every part."""
    validate_dataset_name(dataset)
    validate_desc(desc)
    if not isinstance(stage, int) or isinstance(stage, bool) or stage < 1:
        raise InvalidVersionName(f"staging number must be a positive integer, got {quoted(stage)}")
    name = f"{dataset}_{format_date(date)}_staged{stage}"
    return f"{name}_{desc}" if desc else name


def is_version_name_shaped(text: object) -> bool:
    """True if ``text`` has the form of a version name (a part of it may still be invalid)."""
    return isinstance(text, str) and _VERSION_RE.fullmatch(text) is not None


def is_staged_name(text: object) -> bool:
    """True if ``text`` has the form of a staged name (it may still be invalid)."""
    return isinstance(text, str) and _STAGED_RE.fullmatch(text) is not None


def parse_staged_name(name: str) -> StagedName:
    """Parse a staged name, raising :class:`InvalidVersionName` with the reason."""
    match = _STAGED_RE.fullmatch(name) if isinstance(name, str) else None
    if match is None:
        raise InvalidVersionName(
            f"{quoted(name)} is not a staged name of the form dataset_YYYYMMDD_stagedK[_desc]"
        )
    try:
        dataset = validate_dataset_name(match["dataset"])
        date = parse_date(match["date"])
        desc = validate_desc(match["desc"])
    except (InvalidName, InvalidDate, InvalidDescription) as exc:
        raise InvalidVersionName(f"staged name {quoted(name)}: {exc.detail}") from None
    digits = match["number"]
    stage = parse_version_number(digits)
    if digits.startswith("0") or stage is None:
        raise InvalidVersionName(
            f"staged name {quoted(name)}: the staging number must be positive, without leading "
            f"zeros, at most {MAX_VERSION_NUMBER}"
        )
    return StagedName(dataset=dataset, date=date, stage=stage, desc=desc)
