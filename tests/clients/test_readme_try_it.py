"""The README's "Try it" followed in order against the local runtime: every curl answers 2xx (the cancel
a 204), and the first message, delivered by then, answers 409 to a cancel as the README says."""

from __future__ import annotations

import re
import shlex
import uuid
from pathlib import Path
from typing import Any

from hourglass_client import Client

from devstack.api_call import call
from tests.clients.conftest import API_KEY, RawReceiver, eventually

README = Path(__file__).resolve().parents[2] / "README.md"
LOCAL = "http://127.0.0.1:8080"


def try_it_commands() -> list[list[str]]:
    """The curl commands of the README's first "Try it" block, each as its words (comments left out)."""
    section = README.read_text(encoding="utf-8").split("### Try it", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    commands: list[list[str]] = []
    pending = ""
    for line in block.splitlines():
        pending += line + "\n"
        if pending.count("'") % 2 or line.endswith("\\"):
            continue  # a quoted body or a command going on on the next line
        words = shlex.split(pending.replace("\\\n", " "), comments=True)
        pending = ""
        if words and words[0] == "curl":
            commands.append(words)
    return commands


def request(words: list[str]) -> tuple[str, str, Any]:
    """(method, path, body text) of a curl command."""
    method = words[words.index("-X") + 1] if "-X" in words else "GET"
    url = next(w for w in words if w.startswith(LOCAL))
    body = words[words.index("-d") + 1] if "-d" in words else None
    return method, url[len(LOCAL) :], body


def test_the_readme_try_it_runs_in_order(api_url: str, client: Client, receiver: RawReceiver) -> None:
    queue = f"readme-{uuid.uuid4().hex[:8]}"
    names: dict[str, str] = {}
    answered: list[tuple[str, str, int]] = []
    for words in try_it_commands():
        method, path, body = request(words)
        path = path.replace("/queues/orders", f"/queues/{queue}")
        for variable, message_id in names.items():
            path = path.replace(f"${variable}", message_id)
        text = (body or "").replace("http://127.0.0.1:9000/hook", receiver.url(f"/{queue}"))
        status, doc = call(api_url, method, path, raw=text.encode() if body else None, api_key=API_KEY)
        answered.append((method, re.sub(r"[0-9a-f]{32}", "<id>", path), status))
        if method == "POST" and path.endswith("/messages"):
            ids = [m["id"] for m in doc["messages"]]
            names = dict(zip(("FIRST", "NEW_YEAR", "NEVER_MIND"), ids, strict=True))
    assert [a for a in answered if not 200 <= a[2] < 300] == []
    assert answered[-1] == ("DELETE", f"/v1/queues/{queue}/messages/<id>", 204)
    first = names["FIRST"]
    eventually(lambda: client.get_message(queue, first).status == "delivered")
    assert call(api_url, "DELETE", f"/v1/queues/{queue}/messages/{first}", api_key=API_KEY)[0] == 409
