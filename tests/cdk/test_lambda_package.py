"""The Lambdas' code asset carries the pinned tzdata package and resolves zones without the host's zone files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

import app as hourglass_app

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Template, Path]:
    """The app synthesized as the CDK CLI would (cdk.json context), and its Lambda code directory."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = cdk.App(outdir=str(outdir), context=json.loads((REPO_ROOT / "cdk.json").read_text())["context"])
    template = Template.from_stack(hourglass_app.build(app))
    app.synth()
    files = json.loads((outdir / "Hourglass.assets.json").read_text())["files"]
    code = [outdir / f["source"]["path"] for f in files.values() if (outdir / f["source"]["path"]).is_dir()]
    assert len(code) == 1, code
    return template, code[0]


def asset_dir(synthesized: tuple[Template, Path]) -> Path:
    return synthesized[1]


def test_every_function_runs_the_bundled_asset(synthesized: tuple[Template, Path]) -> None:
    template, directory = synthesized
    key = directory.name.removeprefix("asset.") + ".zip"
    functions = template.find_resources("AWS::Lambda::Function", {"Properties": {"Code": {"S3Key": key}}})
    assert len(functions) == 3


def test_the_asset_holds_the_code_and_the_zone_data(synthesized: tuple[Template, Path]) -> None:
    directory = asset_dir(synthesized)
    expected = ["hourglass/handlers/api.py", "tzdata/zones", "tzdata/zoneinfo/Europe/London", "tzdata/__init__.py"]
    assert [name for name in expected if not (directory / name).is_file()] == []


def test_the_asset_holds_nothing_else_of_the_venv(synthesized: tuple[Template, Path]) -> None:
    directory = asset_dir(synthesized)
    assert sorted(p.name for p in directory.iterdir()) == ["hourglass", "tzdata"]
    assert not [p for p in directory.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc"]
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
    assert size < 2_000_000, size


def test_the_bundled_tzdata_is_the_pinned_release(synthesized: tuple[Template, Path]) -> None:
    pin = re.search(r"^tzdata==(\S+)$", (REPO_ROOT / "requirements.txt").read_text(), re.MULTILINE)
    assert pin is not None
    bundled = re.search(r'^__version__ = "(.+)"$', (asset_dir(synthesized) / "tzdata/__init__.py").read_text(), re.M)
    assert bundled is not None and bundled.group(1) == pin.group(1)


RESOLVE = """
import sys, zoneinfo
from datetime import UTC, datetime
import tzdata
from hourglass.core import recurrence, validation, wallclock
assert not any("site-packages" in p for p in sys.path), sys.path
now = datetime(2026, 3, 27, 12, tzinfo=UTC)
request = validation.schedule_request({"cron": "0 9 * * MON-FRI", "timezone": "Europe/London", "body": "x"}, now)
print(tzdata.__file__)
print(recurrence.next_occurrence(request.recurrence, now, anchor=now).isoformat())
print(wallclock.resolve(datetime(2026, 7, 1, 9), wallclock.zone("Europe/London")).isoformat())
print(zoneinfo.ZoneInfo("Australia/Lord_Howe").utcoffset(datetime(2026, 1, 1)))
"""


def test_the_asset_resolves_zones_with_the_hosts_zone_data_hidden(
    synthesized: tuple[Template, Path], tmp_path: Path
) -> None:
    directory = asset_dir(synthesized)
    empty = tmp_path / "no-zoneinfo"
    empty.mkdir()
    # -S: no site-packages (the venv's tzdata); PYTHONTZPATH: no system zone files either.
    env = {"PYTHONPATH": str(directory), "PYTHONTZPATH": str(empty), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-S", "-c", RESOLVE], env=env, capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    origin, weekday_nine, london, lord_howe = result.stdout.split("\n")[:4]
    # Friday 09:00 GMT is past; Monday 30 March is the first weekday after the clocks go forward (BST).
    assert (Path(origin).parent.parent, weekday_nine, london, lord_howe) == (
        directory,
        "2026-03-30T08:00:00+00:00",
        "2026-07-01T08:00:00+00:00",
        "11:00:00",
    )
