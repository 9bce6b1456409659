"""What counts as a secret in text a version records, and how it is kept out: one rule for the
client (which strips or redacts what it captures) and the service (which refuses a URI that
still carries one, and redacts a command line).

A URL carries credentials in its *userinfo* (``https://user:password@host/``) and in query or
fragment parameters whose name says so: presigned and signed URLs (``X-Amz-Signature``,
``X-Amz-Credential``, ``X-Amz-Security-Token``, ``X-Goog-Signature``, CloudFront's
``Signature``), Azure SAS tokens (``sig``), OAuth tokens (``access_token``, ``#id_token=``),
API keys (``api_key``, ``apikey``) and passwords.  A command line carries them as option values
(``--token=…``, ``--password …``), ``NAME=value`` assignments (``AWS_SECRET_ACCESS_KEY=…``,
``db.password=…``), ``Authorization:`` header values and URLs anywhere in an argument
(``--db-url=postgresql://u:pw@host/db``).

An scp-like git remote (``git@github.com:org/repo.git``) names a login, not a secret, and is
kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import SplitResult, unquote_plus, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "is_secret_name",
    "redact_command",
    "redact_url_in",
    "redact_urls",
    "strip_credentials",
    "strip_userinfo",
    "url_credentials",
]

#: What a redacted value becomes.
REDACTED = "***"

#: A name (an option, a query parameter, a variable) whose value is a secret.
_SECRET_NAME = re.compile(
    r"token|secret|passw(?:or)?d|passphrase|credential|api[-_]?key|access[-_]?key"
    r"|private[-_]?key|signature|authorization",
    re.I,
)
#: Short names that are secrets only as a whole name (``sig`` is not ``design``).
_SECRET_WORDS = frozenset({"sig", "auth", "pwd", "pass"})
#: A URL inside a longer text: a scheme, ``://``, then anything up to a space or a quote.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")
#: ``NAME=value`` where NAME is a variable or a dotted setting (``db.password=…``).
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)=(.*)", re.S)
#: An HTTP authorization header given as an argument (``-H 'Authorization: Basic …'``).
_AUTH_HEADER = re.compile(r"\s*(?:proxy-)?authorization\s*:", re.I)
#: A bearer token anywhere in an argument (``curl -H "Authorization: Bearer …"`` as one).
_BEARER = re.compile(r"(\bbearer\s+)\S+", re.I)


def is_secret_name(name: str) -> bool:
    """True when a value named ``name`` (``--token``, ``X-Amz-Signature``, ``DB_PASSWORD``) is a
    secret."""
    bare = name.strip().lstrip("-").strip()
    return bool(_SECRET_NAME.search(bare)) or bare.lower() in _SECRET_WORDS


def _split(url: str) -> SplitResult | None:
    if "://" not in url:
        return None
    try:
        return urlsplit(url)
    except ValueError:
        return None


def _secret_parameters(part: str) -> list[str]:
    """The names of the secret ``name=value`` parameters of a query or fragment."""
    names = []
    for item in part.split("&"):
        name, eq, _ = item.partition("=")
        name = unquote_plus(name)
        if eq and is_secret_name(name):
            names.append(name)
    return names


def _without_secret_parameters(part: str) -> str:
    return "&".join(
        item
        for item in part.split("&")
        if not (item.partition("=")[1] and is_secret_name(unquote_plus(item.partition("=")[0])))
    )


def url_credentials(url: str) -> str | None:
    """What credentials ``url`` carries (``user:password@``, ``the parameter
    'X-Amz-Signature'``), or None."""
    if "://" not in url:
        return None
    parts = _split(url)
    if parts is None:
        return "a URL that does not parse, possibly user:password@"
    if "@" in parts.netloc:
        return "user:password@"
    for part in (parts.query, parts.fragment):
        names = _secret_parameters(part)
        if names:
            return f"the parameter {names[0][:60]!r}"
    return None


def strip_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (``https://tok@github.com/x`` → ``https://github.com/x``);
    query parameters are kept (:func:`strip_credentials` removes the secret ones too)."""
    parts = _split(url)
    if parts is None or "@" not in parts.netloc:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def strip_credentials(url: str) -> str:
    """``url`` without what :func:`url_credentials` finds: its userinfo and its secret query and
    fragment parameters (the others are kept, as written)."""
    url = strip_userinfo(url)
    parts = _split(url)
    if parts is None or url_credentials(url) is None:
        return url
    query = _without_secret_parameters(parts.query)
    fragment = _without_secret_parameters(parts.fragment)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, fragment))


def _redact_argument(arg: str) -> str:
    if _AUTH_HEADER.match(arg):
        return arg.partition(":")[0] + ": " + REDACTED
    assignment = _ASSIGNMENT.fullmatch(arg)
    if assignment is not None and is_secret_name(assignment.group(1)):
        return f"{assignment.group(1)}={REDACTED}"
    return redact_urls(_BEARER.sub(lambda m: m.group(1) + REDACTED, arg))


def redact_urls(text: str) -> str:
    """``text`` with the credentials of every URL in it stripped (:func:`strip_credentials`):
    for messages and arguments that may quote a URL."""
    return _URL.sub(lambda m: strip_credentials(m.group(0)), text) if "://" in text else text


def redact_url_in(text: str, url: str) -> str:
    """``text`` (a backend's error message about ``url``) with ``url``'s credentials taken out
    wherever it quotes them: in URLs (:func:`redact_urls`) and bare, as a backend that read the
    userinfo as part of a bucket name (``user:pw@bucket``) quotes it."""
    text = redact_urls(text)
    parts = _split(url)
    if parts is not None and "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        if userinfo:
            text = text.replace(userinfo, REDACTED)
    return text


def redact_command(argv: Sequence[str]) -> list[str]:
    """The command line ``argv`` with its secrets redacted (idempotent): the value of an option
    whose name looks like a secret (``--token=…`` → ``--token=***``; ``--password X`` →
    ``--password ***``), ``NAME=value`` assignments of such names, ``Authorization:`` header
    values, and the credentials of every URL in an argument (:func:`strip_credentials`)."""
    out: list[str] = []
    redact_next = False
    for arg in argv:
        if redact_next:
            out.append(REDACTED)
            redact_next = False
            continue
        name, eq, _ = arg.partition("=")
        if arg.startswith("-") and is_secret_name(name):
            if eq:
                out.append(f"{name}={REDACTED}")
            else:
                out.append(arg)
                redact_next = True
            continue
        out.append(_redact_argument(arg))
    return out
