"""The Lambdas' code asset: the ``lambdas/`` directory plus the pure-Python packages the runtime lacks (tzdata).

Bundled locally (a copy, no Docker, no network); the asset hash is the bundle's content, so a new
tzdata release changes the deployed code.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

ASSET_EXCLUDES = ("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache", ".ruff_cache")
# Packages of requirements.txt the Lambda runtime does not carry (it has boto3); copied from this
# interpreter's installation, so the asset holds exactly the pinned versions the tests ran with.
BUNDLED_PACKAGES = ("tzdata",)


def package_dir(name: str) -> Path:
    """The installed directory of a top-level package; a clear error when it is missing."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the Lambda asset needs the {name!r} package: pip install -r requirements.txt")
    return Path(next(iter(spec.submodule_search_locations)))


def bundle(source: Path, output: Path, packages: tuple[str, ...] = BUNDLED_PACKAGES) -> None:
    """Copy `source` and each package (as a top-level directory) into `output`."""
    ignore = shutil.ignore_patterns(*ASSET_EXCLUDES)
    shutil.copytree(source, output, ignore=ignore, dirs_exist_ok=True)
    for name in packages:
        shutil.copytree(package_dir(name), output / name, ignore=ignore, dirs_exist_ok=True)


@jsii.implements(ILocalBundling)
class LocalCopy:
    """Local bundling that always succeeds, so the CDK never falls back to Docker."""

    def __init__(self, source: Path, packages: tuple[str, ...]) -> None:
        self.source = source
        self.packages = packages

    def try_bundle(self, output_dir: str, *_options: Any, **_kwargs: Any) -> bool:
        bundle(self.source, Path(output_dir), self.packages)
        return True


def code(source: Path, packages: tuple[str, ...] = BUNDLED_PACKAGES) -> lambda_.Code:
    """One code asset for every function: `source` with `packages` next to it."""
    return lambda_.Code.from_asset(
        str(source),
        exclude=list(ASSET_EXCLUDES),
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            # Never pulled: LocalCopy always bundles. The CDK requires an image to fall back to.
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.12"),
            local=LocalCopy(source, packages),
        ),
    )
