"""GET /health names the release the server runs (contract v1.3, "Versions"), as its OpenAPI schema says."""

from __future__ import annotations

from hourglass.version import __version__

from tests.integration.conftest import Harness
from tests.integration.test_openapi import check


def test_health_reports_the_release(harness: Harness) -> None:
    assert harness.call("GET", "/health") == (200, {"status": "ok", "version": __version__})


def test_health_fits_its_openapi_schema(harness: Harness) -> None:
    status, doc = harness.call("GET", "/health")
    check("/health", "GET", status, doc)
