"""The CLI's config file: named profiles (url, key, auth) in `~/.config/hourglass/config.toml`.

A profile is a table of its own (`[default]`, `[prod]`, ...); flags and the environment override it.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

FIELDS = ("url", "key", "auth")
AUTHS = ("api_key", "iam")


class ProfileError(ValueError):
    """The config file or the chosen profile cannot be used (its message says why and where)."""


@dataclass(frozen=True)
class Profile:
    url: str | None = None
    key: str | None = None
    auth: str | None = None


def config_path() -> Path:
    """HOURGLASS_CONFIG, else `$XDG_CONFIG_HOME/hourglass/config.toml` (`~/.config` by default)."""
    explicit = os.environ.get("HOURGLASS_CONFIG")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "hourglass" / "config.toml"


def load(name: str | None, path: Path | None = None) -> Profile:
    """Profile `name` (None: `default`, if there is one) of the config file; an empty profile when there
    is no file and none was asked for."""
    path = path or config_path()
    if not path.exists():
        if name is not None:
            raise ProfileError(f"profile {name!r}: there is no config file {path}")
        return Profile()
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{path}: {exc}") from exc
    table = doc.get(name or "default")
    if table is None:
        if name is None:
            return Profile()
        known = ", ".join(sorted(k for k, v in doc.items() if isinstance(v, dict))) or "none"
        raise ProfileError(f"{path}: no profile {name!r} (profiles: {known})")
    return _profile(path, name or "default", table)


def _profile(path: Path, name: str, table: object) -> Profile:
    if not isinstance(table, dict):
        raise ProfileError(f"{path}: [{name}] must be a table of {', '.join(FIELDS)}")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise ProfileError(f"{path}: [{name}] has unknown keys {', '.join(unknown)} (known: {', '.join(FIELDS)})")
    bad = [key for key in FIELDS if key in table and not isinstance(table[key], str)]
    if bad:
        raise ProfileError(f"{path}: [{name}] {', '.join(bad)} must be strings")
    if table.get("auth") not in (None, *AUTHS):
        raise ProfileError(f"{path}: [{name}] auth must be one of {', '.join(AUTHS)}")
    return Profile(table.get("url"), table.get("key"), table.get("auth"))
