"""The next step after an API error: what to check, naming the setting (flag, variable or profile) it came from."""

from __future__ import annotations

from hourglass_client.errors import HourglassError, NotJson, TransportError, Unauthorized


def next_step(exc: HourglassError, *, url: str | None, url_source: str | None, key_source: str | None) -> str | None:
    """One line saying what to do about `exc`, or None when its own message says enough."""
    where = f"{url} (from {url_source or '--url'})"
    if isinstance(exc, TransportError):
        return (
            f"no answer from {where}: is the API running (`make dev` for the local one)? "
            f"Check the URL, or set another with --url, HOURGLASS_URL or a --profile"
        )
    if isinstance(exc, Unauthorized):
        given = f"the key from {key_source} was refused" if key_source else "no API key was given"
        return f"{given}: set HOURGLASS_API_KEY or pass --api-key (or `key` in a --profile)"
    if isinstance(exc.body, NotJson):
        return f"{where} answered with something other than the Hourglass API: is it the API's base URL?"
    return None
