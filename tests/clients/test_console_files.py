"""The console's files as the ingest handler serves them: a fixed list, same-origin CSP, no key."""

from __future__ import annotations

import re
from pathlib import Path

from hourglass import console


def test_index_is_html_with_a_same_origin_policy() -> None:
    page = console.serve("GET", "/console")
    assert page is not None and page["statusCode"] == 200
    assert page["headers"]["Content-Type"].startswith("text/html")
    assert "connect-src 'self'" in page["headers"]["Content-Security-Policy"]
    assert 'src="console/app.js"' in page["body"]


def test_only_the_listed_files_are_served() -> None:
    for path in ("/console/../settings.py", "/console/__init__.py", "/console/nope.js"):
        answer = console.serve("GET", path)
        assert answer is not None and answer["statusCode"] == 404, path


def test_a_trailing_slash_redirects_to_the_page() -> None:
    answer = console.serve("GET", "/console/")
    assert answer is not None and (answer["statusCode"], answer["headers"]["Location"]) == (301, "../console")


def test_other_paths_are_left_to_the_api() -> None:
    assert console.serve("GET", "/v1/queues/console") is None
    assert console.serve("GET", "/consoles") is None


def test_writes_to_the_console_are_refused() -> None:
    answer = console.serve("POST", "/console")
    assert answer is not None and answer["statusCode"] == 405


def test_the_consoles_checks_use_the_apis_bounds() -> None:
    from hourglass.core import circuit_breaker as circuit
    from hourglass.core import delivery_control as control
    from hourglass.core import validation

    script = (Path(console.__file__).parent / "app.js").read_text(encoding="utf-8")
    declared = re.search(r"const BOUNDS = \{(.*?)\n\};", script, re.S)
    assert declared is not None
    found = {
        name: (float(low), float(high), integer == "true")
        for name, low, high, integer in re.findall(
            r'"?([\w.]+)"?: \{ low: ([\d.]+), high: ([\d.]+), integer: (true|false) \}', declared.group(1)
        )
    }
    assert found == {
        "retry.max_attempts": (1, validation.MAX_ATTEMPTS, True),
        "retry.backoff_base": (0, 86400, False),
        "retry.backoff_max": (0, 30 * 86400, False),
        "rate_limit": (control.MIN_RATE, control.MAX_RATE, False),
        "max_concurrency": (control.MIN_CONCURRENCY, control.MAX_CONCURRENCY, True),
        "timeout": (control.MIN_TIMEOUT, control.MAX_TIMEOUT, False),
        "flow_control.key_rate_limit": (control.MIN_RATE, control.MAX_RATE, False),
        "flow_control.key_max_concurrency": (control.MIN_CONCURRENCY, control.MAX_CONCURRENCY, True),
        "circuit_breaker.failure_ratio": (circuit.MIN_RATIO, circuit.MAX_RATIO, False),
        "circuit_breaker.min_attempts": (circuit.MIN_ATTEMPTS, circuit.MAX_ATTEMPTS, True),
        "circuit_breaker.window": (circuit.MIN_WINDOW, circuit.MAX_WINDOW, True),
        "jitter": (0, validation.MAX_SCHEDULE_JITTER_S, True),
    }


def test_the_queue_forms_ordering_choices_are_the_apis() -> None:
    from hourglass.core import model

    page = (Path(console.__file__).parent / "index.html").read_text(encoding="utf-8")
    choices = re.search(r'<select id="qf-ordering-on-failure">(.*?)</select>', page, re.S)
    assert choices is not None
    assert set(re.findall(r'<option value="(\w+)">', choices.group(1))) == set(model.ON_FAILURE)
