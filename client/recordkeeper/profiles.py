"""Connection profiles: a service URL and its token per name, kept in a file only you can read.

``recordkeeper login`` writes them (like ``gh auth login``); every client made without a URL or
token (CLI and Python) reads them.  The file is INI (:mod:`configparser`), one section per
profile::

    [default]
    url = https://recordkeeper.example.com
    token = rk_...

It lives at ``$RECORDKEEPER_CONFIG`` if set, else ``$XDG_CONFIG_HOME/recordkeeper/profiles.ini``
(``~/.config/recordkeeper/profiles.ini``), and is written with mode 0600 in a 0700 directory;
a file others can read is still read, with a :class:`ProfileFileWarning`.  The profile used is
``--profile`` (CLI), ``RECORDKEEPER_PROFILE``, else ``default``.

Precedence, per setting: an explicit argument (``--url``/``--token``, ``Client(url, token)``),
then ``RECORDKEEPER_URL``/``RECORDKEEPER_TOKEN``, then the profile.  A profile's token is only
used with its own URL: a URL given another way never receives it.
"""

from __future__ import annotations

import configparser
import os
import stat
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_PROFILE",
    "Profile",
    "ProfileFileWarning",
    "delete_profile",
    "load_profile",
    "load_profiles",
    "profile_name",
    "profiles_path",
    "save_profile",
]

DEFAULT_PROFILE = "default"


class ProfileFileWarning(UserWarning):
    """The profile file can be read by other users (its tokens are secrets)."""


@dataclass(frozen=True)
class Profile:
    name: str
    url: str
    token: str | None = None


def profiles_path() -> Path:
    """Where the profiles are kept (``RECORDKEEPER_CONFIG``, else the XDG config directory)."""
    explicit = os.environ.get("RECORDKEEPER_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "recordkeeper" / "profiles.ini"


def profile_name(name: str | None = None) -> str:
    """``name``, else ``RECORDKEEPER_PROFILE``, else ``default``."""
    return name or os.environ.get("RECORDKEEPER_PROFILE") or DEFAULT_PROFILE


def _read(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return parser
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        warnings.warn(
            ProfileFileWarning(
                f"{path} can be read by other users (mode {stat.S_IMODE(mode):o}); its tokens are "
                f"secrets: chmod 600 {path}"
            ),
            stacklevel=3,
        )
    parser.read(path, encoding="utf-8")
    return parser


def load_profiles() -> list[Profile]:
    """Every saved profile, by name."""
    parser = _read(profiles_path())
    return [
        Profile(name, parser[name].get("url", ""), parser[name].get("token") or None)
        for name in sorted(parser.sections())
        if parser[name].get("url")
    ]


def load_profile(name: str | None = None) -> Profile | None:
    """The profile ``name`` (see :func:`profile_name`), or None when it was never saved."""
    wanted = profile_name(name)
    for profile in load_profiles():
        if profile.name == wanted:
            return profile
    return None


def _write(path: Path, parser: configparser.ConfigParser) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".profiles.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            parser.write(fh)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)


def save_profile(profile: Profile) -> Path:
    """Add or replace ``profile``; the file is written atomically with mode 0600."""
    path = profiles_path()
    parser = _read(path)
    parser[profile.name] = {
        "url": profile.url,
        **({"token": profile.token} if profile.token else {}),
    }
    _write(path, parser)
    return path


def delete_profile(name: str | None = None) -> bool:
    """Remove the profile ``name``; False when there was none."""
    path = profiles_path()
    parser = _read(path)
    wanted = profile_name(name)
    if not parser.remove_section(wanted):
        return False
    _write(path, parser)
    return True
