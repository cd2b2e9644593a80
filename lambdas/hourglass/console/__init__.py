"""The web console's static files, served at GET /console without an API key (its API calls carry one)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
FILES = {
    "/console": ("index.html", "text/html; charset=utf-8"),
    "/console/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/console/style.css": ("style.css", "text/css; charset=utf-8"),
}
# Same-origin only: the page talks to the API it came from, and no other page may frame it.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@cache
def _read(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def serve(method: str, path: str) -> dict[str, Any] | None:
    """The proxy response for a console path, or None when `path` is not the console's."""
    if path != "/console" and not path.startswith("/console/"):
        return None
    if path == "/console/":
        # Relative links in the page resolve against /console (behind a stage prefix too).
        return {"statusCode": 301, "headers": {"Location": "../console"}, "body": ""}
    found = FILES.get(path)
    if found is None or method not in ("GET", "HEAD"):
        status = 404 if found is None else 405
        return {"statusCode": status, "headers": {"Content-Type": "text/plain"}, "body": "not found"}
    name, content_type = found
    return {"statusCode": 200, "headers": {"Content-Type": content_type, **SECURITY_HEADERS}, "body": _read(name)}
