"""What the CLI writes: text from the server is shown as text, never read as Rich markup, and never
carries control characters or escape sequences to the terminal."""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.text import Text

# Escape sequences whole: CSI (`ESC [ ... final`), OSC and the other string commands (up to BEL or
# ST, or the end), and the short escapes (`ESC ( B`, `ESC c`, ...).
_SEQUENCE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|[ -/]*[0-~]?)")
# Every other control but tab and newline: C0, DEL and C1 (a terminal may take U+009B for `ESC [`).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """`text` without escape sequences or control characters (tabs and newlines stay)."""
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


def styled(*parts: str | tuple[str, str]) -> Text:
    """One line from parts, each plain text or (text, style); every part is cleaned."""
    return Text.assemble(*((clean(p), "") if isinstance(p, str) else (clean(p[0]), p[1]) for p in parts))


def json_line(doc: Any) -> str:
    """`doc` as one line of JSON for scripts: non-ASCII kept, DEL and C1 controls escaped (JSON
    escapes the C0 ones itself), so the line is safe on a terminal and decodes to the same value."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(doc, ensure_ascii=False))


class PlainConsole(Console):
    """A Console on which every string (printed, or a table cell) is plain, cleaned text."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(markup=False, emoji=False, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(clean(text), **{**kwargs, "markup": False, "emoji": False})
