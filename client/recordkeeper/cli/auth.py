"""``recordkeeper login``, ``logout`` and ``profiles``: saved connection profiles.

A profile is a service URL and its token under a name (:mod:`recordkeeper.profiles`); the
global ``--profile NAME`` (or ``RECORDKEEPER_PROFILE``) picks one, ``default`` otherwise.
``login`` checks the token with the service (``GET /whoami``) before saving it.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from recordkeeper.cli.common import CliError, ExitCode, JsonOpt, connection, console, print_json
from recordkeeper.client import Client
from recordkeeper.core.endpoint import DEFAULT_URL
from recordkeeper.profiles import (
    Profile,
    delete_profile,
    load_profile,
    load_profiles,
    profile_name,
    profiles_path,
    save_profile,
)

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``login``, ``logout`` and ``profiles`` to the main app."""
    app.command()(login)
    app.command()(logout)
    app.command()(profiles)


def _masked(token: str | None) -> str | None:
    return None if not token else f"{token[:6]}…{token[-4:]}" if len(token) > 12 else "…"


def login(
    with_token: Annotated[
        bool,
        typer.Option("--with-token", help="read the token from standard input (for scripts)"),
    ] = False,
    no_token: Annotated[
        bool, typer.Option("--no-token", help="save the URL only (a service without auth)")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Save a profile: the service URL (--url) and a token, checked with the service first.

    The token comes from --token, --with-token (stdin), or a hidden prompt.  The profile is
    --profile (default: `default`); the file is written with mode 0600.
    """
    given = connection()
    name = profile_name(given["profile"])
    current = load_profile(name)
    url = given["url"] or (current.url if current else None) or DEFAULT_URL
    token = given["token"]
    if token is None and with_token:
        token = sys.stdin.readline().strip() or None
    if token is None and not no_token:
        token = typer.prompt(f"API token for {url}", hide_input=True).strip() or None
    with Client(url, token or "", profile=None) as client:
        who = client.http.api("GET", "/whoami")
    if token and not who.get("token"):
        raise CliError(
            f"{url} accepted the request but did not recognise a token (is auth off there?); "
            "save it with --no-token",
            "unauthorized",
            ExitCode.ERROR,
        )
    path = save_profile(Profile(name, client.url, token))
    if as_json:
        print_json(
            {
                "profile": name,
                "url": client.url,
                "name": who.get("name"),
                "scope": who.get("scope"),
                "path": str(path),
            }
        )
        return
    console().print(
        f"logged in to {client.url} as {who.get('name')} ({who.get('scope')}); profile "
        f"{name!r} saved in {path}",
        markup=False,
        highlight=False,
    )


def logout(as_json: JsonOpt = False) -> None:
    """Remove the profile (--profile, default: `default`) and its token from the file."""
    name = profile_name(connection()["profile"])
    removed = delete_profile(name)
    if as_json:
        print_json({"profile": name, "removed": removed, "path": str(profiles_path())})
    elif removed:
        console().print(f"profile {name!r} removed from {profiles_path()}", markup=False)
    if not removed:
        raise CliError(f"no profile {name!r} in {profiles_path()}", "not_found", ExitCode.NOT_FOUND)


def profiles(as_json: JsonOpt = False) -> None:
    """List the saved profiles (tokens masked) and which one is used now."""
    active = profile_name(connection()["profile"])
    saved = load_profiles()
    rows = [
        {"profile": p.name, "url": p.url, "token": _masked(p.token), "active": p.name == active}
        for p in saved
    ]
    if as_json:
        print_json({"path": str(profiles_path()), "profiles": rows})
        return
    out = console()
    if not rows:
        out.print(f"no profiles in {profiles_path()} (save one with `recordkeeper login`)")
        return
    for row in rows:
        mark = "*" if row["active"] else " "
        out.print(
            f"{mark} {row['profile']:<16} {row['url']}  token {row['token'] or '-'}",
            markup=False,
            highlight=False,
        )
