"""One release number: lambdas/hourglass/version.py, read by the packaging metadata; the SDK's copy equal to it."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import hourglass_client
from hourglass.version import __version__
from setuptools.config.pyprojecttoml import read_configuration

ROOT = Path(__file__).resolve().parents[2]


def packaged_version(pyproject: Path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools calls [tool.setuptools] in pyproject.toml "beta"
        return str(read_configuration(pyproject)["project"]["version"])


def test_the_version_is_semver() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_the_project_metadata_reads_the_version_module() -> None:
    assert packaged_version(ROOT / "pyproject.toml") == __version__


def test_the_sdk_reports_the_servers_version() -> None:
    assert hourglass_client.__version__ == __version__


def test_the_sdk_package_metadata_reads_its_version_module() -> None:
    assert packaged_version(ROOT / "clients/python/pyproject.toml") == __version__


def test_the_changelog_has_a_section_for_the_version() -> None:
    assert f"## [{__version__}]" in (ROOT / "CHANGELOG.md").read_text()
