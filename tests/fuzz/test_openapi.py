"""Schemathesis over docs/openapi.yaml, in process: no input may cause a 5xx, and a 4xx changes nothing.
HOURGLASS_OPENAPI_FUZZ_EXAMPLES: examples per operation (20, as `make test` runs it; `make test-slow` runs 60)."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from tests.fuzz.conftest import QUEUE, Target

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"
CASES: dict[str, int] = {"cases": 0, "server_errors": 0}

AIM: list[Target] = []  # the target of the running test: the app below is fixed when the schema loads


def app(environ: dict[str, Any], start_response: Any) -> Any:
    return AIM[-1].wsgi(environ, start_response)


schema = schemathesis.openapi.from_path(str(SCHEMA))
schema.app = app
schema.config.generation.update(max_examples=int(os.environ.get("HOURGLASS_OPENAPI_FUZZ_EXAMPLES", "20")))
pytestmark = pytest.mark.long_form


@schema.hook
def map_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> dict[str, Any] | None:
    """Mostly aim at the queue and messages that exist, so validation past the lookups is reached."""
    if path_parameters is None:
        return None
    chosen = dict(path_parameters)
    if "queue" in chosen and random.random() < 0.8:
        chosen["queue"] = QUEUE
    return chosen


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_no_request_causes_a_server_error_or_a_change_when_refused(case: Any, target: Target) -> None:
    if "id" in (case.path_parameters or {}) and random.random() < 0.8:
        case.path_parameters["id"] = random.choice(target.message_ids)
    AIM.append(target)
    before = target.items()
    response = case.call()
    CASES["cases"] += 1
    CASES["server_errors"] += response.status_code >= 500
    case.validate_response(response, checks=[not_a_server_error])
    if 400 <= response.status_code < 500:
        assert target.items() == before, f"{case.method} {case.formatted_path} answered {response.status_code}"
