"""Synthesize the CDK app and deploy the cloud assembly into an AWS emulator through CloudFormation.

Does what ``cdk bootstrap`` + ``cdk deploy`` would: a ``CDKToolkit`` stack with the asset bucket and the
bootstrap version parameter, asset upload, create/update stack, wait, return the outputs. Works against
moto_server, MiniStack and LocalStack; a later real ``cdk bootstrap`` upgrades that ``CDKToolkit`` stack.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

log = logging.getLogger(__name__)
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BOOTSTRAP_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
BOOTSTRAP_STACK = "CDKToolkit"
# The stand-in bootstrap's version: what the synthesized template's CheckBootstrapVersion rule accepts
# (>= 6), and older than any `cdk bootstrap` template, so that the CLI upgrades the stack in place.
BOOTSTRAP_VERSION = "6"
MAX_TEMPLATE_BODY = 51_200  # bytes; larger templates go through the asset bucket (TemplateURL)
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
_FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
_SUCCESS = {"CREATE_COMPLETE", "UPDATE_COMPLETE"}


class DeployError(RuntimeError):
    """The stack could not be created or updated."""


# --------------------------------------------------------------------------------------- synth


def synth(outdir: Path, context: Mapping[str, object] | None = None) -> Path:
    """Run ``python app.py`` like ``cdk synth`` would and return the cloud assembly directory.

    The ``context`` of cdk.json is applied first (as the CDK CLI does), then ``context``.
    """
    outdir = Path(outdir).resolve()
    outdir.mkdir(parents=True, exist_ok=True)
    merged: dict[str, object] = {}
    cdk_json = REPO_ROOT / "cdk.json"
    if cdk_json.is_file():
        merged.update(json.loads(cdk_json.read_text()).get("context", {}))
    merged.update(context or {})
    env = dict(os.environ)
    env["CDK_OUTDIR"] = str(outdir)
    env["CDK_CONTEXT_JSON"] = json.dumps(merged)
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0 or not (outdir / "manifest.json").is_file():
        raise DeployError(
            f"synth failed (exit {result.returncode})\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
        )
    return outdir


# -------------------------------------------------------------------------------------- deploy


def deploy(
    assembly: Path,
    *,
    endpoint_url: str,
    region: str = "us-east-1",
    stack_name: str = "Hourglass",
    timeout: float = 600.0,
) -> dict[str, str]:
    """Deploy the stack of ``assembly`` into the emulator at ``endpoint_url``; return its outputs."""
    assembly = Path(assembly)
    session = _session(region)

    def client(service: str) -> Any:
        return session.client(service, endpoint_url=endpoint_url, region_name=region)

    artifact = _stack_artifact(assembly, stack_name)
    props = artifact.get("properties", {})
    template_path = assembly / props.get("templateFile", f"{stack_name}.template.json")
    template_body = template_path.read_text()
    template = json.loads(template_body)

    account = client("sts").get_caller_identity()["Account"]
    placeholders = {
        "${AWS::AccountId}": account,
        "${AWS::Region}": region,
        "${AWS::Partition}": "aws",
    }

    if "BootstrapVersion" in template.get("Parameters", {}):
        parameter = props.get("bootstrapStackVersionSsmParameter", DEFAULT_BOOTSTRAP_PARAMETER)
        ensure_bootstrap(client("cloudformation"), client("s3"), parameter, account, region, timeout)

    s3 = client("s3")
    template_url = None
    for manifest in sorted(assembly.glob("*.assets.json")):
        uploaded = _publish_assets(s3, assembly, manifest, placeholders, region)
        template_url = uploaded.get(template_path.name, template_url)

    cfn = client("cloudformation")
    source: dict[str, str]
    if len(template_body.encode()) <= MAX_TEMPLATE_BODY or template_url is None:
        source = {"TemplateBody": template_body}
    else:
        source = {"TemplateURL": template_url}

    _create_or_update(cfn, stack_name, source)
    stack = _wait(cfn, stack_name, timeout)
    _warn_skipped(cfn, stack_name, template)
    _reconcile_tables(client("dynamodb"), cfn, stack_name, template)
    return {o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])}


def _session(region: str) -> boto3.Session:
    session = boto3.Session(region_name=region)
    if session.get_credentials() is None:
        session = boto3.Session(region_name=region, **_DUMMY_CREDENTIALS)
    return session


def _stack_artifact(assembly: Path, stack_name: str) -> dict[str, Any]:
    manifest = json.loads((assembly / "manifest.json").read_text())
    stacks = {
        artifact_id: artifact
        for artifact_id, artifact in manifest.get("artifacts", {}).items()
        if artifact.get("type") == "aws:cloudformation:stack"
    }
    for artifact_id, artifact in stacks.items():
        if stack_name in (artifact_id, artifact.get("properties", {}).get("stackName")):
            return artifact
    if len(stacks) == 1:
        return next(iter(stacks.values()))
    raise DeployError(f"no stack {stack_name!r} in {assembly} (found {sorted(stacks)})")


def _substitute(text: str, placeholders: Mapping[str, str]) -> str:
    for key, value in placeholders.items():
        text = text.replace(key, value)
    return text


def _publish_assets(
    s3: Any, assembly: Path, manifest: Path, placeholders: Mapping[str, str], region: str
) -> dict[str, str]:
    """Upload every file asset; return ``{source path: object URL}``."""
    assets = json.loads(manifest.read_text())
    if assets.get("dockerImages"):
        raise DeployError(f"{manifest.name}: Docker image assets are not supported")
    created: set[str] = set()
    urls: dict[str, str] = {}
    for asset_id, asset in assets.get("files", {}).items():
        source = asset["source"]
        if "path" not in source:
            raise DeployError(f"asset {asset_id}: only path sources are supported, got {source}")
        path = assembly / source["path"]
        packaging = source.get("packaging", "file")
        for destination in asset["destinations"].values():
            bucket = _substitute(destination["bucketName"], placeholders)
            key = _substitute(destination["objectKey"], placeholders)
            if bucket not in created:
                _ensure_bucket(s3, bucket, region)
                created.add(bucket)
            if not _object_exists(s3, bucket, key):  # keys are content hashes, like the CLI
                if packaging == "zip" and path.is_dir():
                    body = _zip_directory(path)
                elif packaging in ("zip", "file") and path.is_file():
                    body = path.read_bytes()
                else:
                    raise DeployError(f"asset {asset_id}: cannot package {path} as {packaging!r}")
                s3.put_object(Bucket=bucket, Key=key, Body=body)
            urls[source["path"]] = f"https://s3.{region}.amazonaws.com/{bucket}/{key}"
    return urls


def _ensure_bucket(s3: Any, bucket: str, region: str) -> None:
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**kwargs)
    except ClientError as error:
        if error.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise


def _object_exists(s3: Any, bucket: str, key: str) -> bool:
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def _walk_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file():
            yield path


def _zip_directory(root: Path) -> bytes:
    """Deterministic zip (sorted entries, fixed timestamps, file modes kept)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in _walk_files(root):
            info = zipfile.ZipInfo(path.relative_to(root).as_posix(), date_time=_FIXED_ZIP_TIME)
            info.external_attr = (path.stat().st_mode & 0o777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def bootstrap_template(parameter: str) -> dict[str, Any]:
    """The part of the CDK's bootstrap template a file-asset deploy needs, under the same logical IDs.

    The same IDs and names: a later `cdk bootstrap` updates this stack and keeps its bucket, where a
    bucket made by hand would fail the CLI's check that the bootstrap bucket name is free.
    """
    qualifier = parameter.strip("/").split("/")[1] if parameter.count("/") >= 3 else "hnb659fds"
    return {
        "Description": "Hourglass devstack: the CDK bootstrap's asset bucket and version (`cdk bootstrap` upgrades it)",
        "Resources": {
            "StagingBucket": {
                "Type": "AWS::S3::Bucket",
                "Properties": {
                    "BucketName": {"Fn::Sub": f"cdk-{qualifier}-assets-${{AWS::AccountId}}-${{AWS::Region}}"}
                },
                "UpdateReplacePolicy": "Retain",
                "DeletionPolicy": "Retain",
            },
            "CdkBootstrapVersion": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Type": "String", "Name": parameter, "Value": BOOTSTRAP_VERSION},
            },
        },
        "Outputs": {
            "BucketName": {"Value": {"Ref": "StagingBucket"}},
            "BootstrapVersion": {"Value": {"Fn::GetAtt": ["CdkBootstrapVersion", "Value"]}},
        },
    }


def ensure_bootstrap(cfn: Any, s3: Any, parameter: str, account: str, region: str, timeout: float) -> None:
    """A `CDKToolkit` stack unless one is there (from `cdk bootstrap` or an earlier run)."""
    existing = _describe(cfn, BOOTSTRAP_STACK)
    if existing is not None and existing["StackStatus"] in _SUCCESS:
        return
    qualifier = bootstrap_template(parameter)["Resources"]["StagingBucket"]["Properties"]["BucketName"]["Fn::Sub"]
    bucket = qualifier.replace("${AWS::AccountId}", account).replace("${AWS::Region}", region)
    if existing is None and _bucket_exists(s3, bucket):
        # Made by hand by an older devstack: keep using it (a CDKToolkit stack could not create it).
        log.warning(
            "%s exists outside any CDKToolkit stack; `cdk bootstrap` will refuse it until it is deleted", bucket
        )
        return
    _create_or_update(cfn, BOOTSTRAP_STACK, {"TemplateBody": json.dumps(bootstrap_template(parameter))})
    _wait(cfn, BOOTSTRAP_STACK, timeout)


def _bucket_exists(s3: Any, bucket: str) -> bool:
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as error:
        if error.response["Error"]["Code"] in ("404", "NoSuchBucket", "NotFound"):
            return False
        raise
    return True


def _describe(cfn: Any, stack_name: str) -> dict[str, Any] | None:
    try:
        stacks = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        if "does not exist" in str(error):
            return None
        raise
    live = [s for s in stacks if s["StackStatus"] != "DELETE_COMPLETE"]
    return live[0] if live else None


def _create_or_update(cfn: Any, stack_name: str, source: Mapping[str, str]) -> None:
    existing = _describe(cfn, stack_name)
    if existing is not None and existing["StackStatus"] == "ROLLBACK_COMPLETE":
        # A failed first creation cannot be updated; the CLI deletes and re-creates it.
        cfn.delete_stack(StackName=stack_name)
        deadline = time.monotonic() + 300
        while _describe(cfn, stack_name) is not None:
            if time.monotonic() > deadline:
                raise DeployError(f"stack {stack_name!r} in ROLLBACK_COMPLETE could not be deleted")
            time.sleep(0.5)
        existing = None
    try:
        if existing is None or existing["StackStatus"] == "REVIEW_IN_PROGRESS":
            cfn.create_stack(StackName=stack_name, Capabilities=CAPABILITIES, **source)
        else:
            cfn.update_stack(StackName=stack_name, Capabilities=CAPABILITIES, **source)
    except ClientError as error:
        if "No updates are to be performed" in str(error):
            return
        raise DeployError(f"deploying stack {stack_name!r} failed: {error}\n{_events(cfn, stack_name)}") from error


def _wait(cfn: Any, stack_name: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        stack = _describe(cfn, stack_name)
        if stack is None:
            raise DeployError(f"stack {stack_name!r} disappeared\n{_events(cfn, stack_name)}")
        status = stack["StackStatus"]
        if status in _SUCCESS:
            return stack
        if not status.endswith("_IN_PROGRESS"):
            reason = stack.get("StackStatusReason", "")
            raise DeployError(f"stack {stack_name!r} ended in {status} {reason}\n{_events(cfn, stack_name)}")
        if time.monotonic() > deadline:
            raise DeployError(f"stack {stack_name!r} still {status} after {timeout:.0f}s\n{_events(cfn, stack_name)}")
        time.sleep(0.5)


def _events(cfn: Any, stack_name: str, limit: int = 40) -> str:
    try:
        events = cfn.describe_stack_events(StackName=stack_name)["StackEvents"][:limit]
    except ClientError:
        return "(no stack events)"
    lines = [
        f"  {e.get('LogicalResourceId', '')} {e.get('ResourceType', '')} "
        f"{e.get('ResourceStatus', '')} {e.get('ResourceStatusReason', '')}".rstrip()
        for e in events
    ]
    return "stack events (newest first):\n" + "\n".join(lines)


def _physical_ids(cfn: Any, stack_name: str) -> dict[str, str]:
    """``{logical id: physical id}`` of the resources the emulator created."""
    ids: dict[str, str] = {}
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack_name):
        for summary in page["StackResourceSummaries"]:
            # moto lists resources it cannot create as entries without a logical id.
            if summary.get("LogicalResourceId") and summary.get("PhysicalResourceId"):
                ids[summary["LogicalResourceId"]] = summary["PhysicalResourceId"]
    return ids


def _warn_skipped(cfn: Any, stack_name: str, template: Mapping[str, Any]) -> None:
    """Log template resources the emulator's CloudFormation did not create."""
    created = _physical_ids(cfn, stack_name)
    skipped: dict[str, int] = {}
    for logical_id, resource in template.get("Resources", {}).items():
        if logical_id not in created and not _may_lack_physical_id(resource.get("Type", "")):
            skipped[resource.get("Type", "?")] = skipped.get(resource.get("Type", "?"), 0) + 1
    if not skipped:
        return
    covered = {kind: count for kind, count in skipped.items() if kind in STAND_INS}
    if covered:
        done = "".join(f"\n  - {STAND_INS[kind]} ({kind} x{count})" for kind, count in sorted(covered.items()))
        # At warning level so that it is printed (no handler is configured): it says what runs instead, a
        # line each (one line of them all ran to 700 characters).
        log.warning("stack %s: the local runtime stands in for what the emulator leaves out:%s", stack_name, done)
    missing = {kind: count for kind, count in skipped.items() if kind not in STAND_INS}
    if "AWS::DynamoDB::Table" in missing:
        # Nothing runs without it; moto's CloudFormation drops a table whose indexes an update changes.
        raise DeployError(
            f"stack {stack_name}: the emulator left the stack without its message table. Its CloudFormation cannot "
            "change a table's indexes in place (hourglass:order_due, hourglass:order_created or the capacity mode "
            "changed since the saved state was made): start empty with `make dev FRESH=1`, or start with the "
            "settings the saved state was made with."
        )
    if missing:
        kinds = ", ".join(f"{kind} x{count}" for kind, count in sorted(missing.items()))
        log.warning("stack %s: the emulator did not create, and nothing stands in for: %s", stack_name, kinds)


# What the local runtime does in place of the resources moto's CloudFormation leaves out, said as such, so
# that a first run does not read as a failure.
STAND_INS = {
    "AWS::ApiGateway::ApiKey": "the API checks x-api-key itself (HOURGLASS_API_KEY)",
    "AWS::ApiGateway::UsagePlan": "no usage plan: the local gateway has no throttling",
    "AWS::ApiGateway::UsagePlanKey": "the API key needs no usage plan",
    "AWS::CloudWatch::Alarm": "no alarms: metrics go to the log as EMF lines",
    "AWS::CloudWatch::Dashboard": "no dashboard: the console's charts read what the runtime has",
    "AWS::Events::Rule": "the runtime runs the sweeper on its own timer",
    "AWS::Scheduler::Schedule": "the runtime runs the sweeper on its own timer",
    "AWS::Lambda::EventSourceMapping": "the runtime's pollers feed the SQS queues to the handlers",
    "AWS::SNS::Subscription": "alarm e-mails are not sent",
    "AWS::Logs::LogGroup": "the handlers log to the runtime's output",
    "AWS::Logs::MetricFilter": "no metric filters: the handlers' metrics are EMF lines in the runtime's log",
    "AWS::ApiGateway::Stage": "the local gateway serves the API's routes itself, with no stage",
    "AWS::S3::BucketPolicy": "no bucket policy: the emulator does not check access to buckets",
}


def _may_lack_physical_id(resource_type: str) -> bool:
    # moto creates these but reports no physical id for them.
    return resource_type in {
        "AWS::ApiGateway::Deployment",
        "AWS::ApiGateway::Method",
        "AWS::Lambda::Permission",
    }


def _reconcile_tables(ddb: Any, cfn: Any, stack_name: str, template: Mapping[str, Any]) -> None:
    """Apply table settings some emulators' CloudFormation ignores (moto: TTL and PITR).

    Idempotent: on a CloudFormation that honours them (AWS, LocalStack) nothing is changed.
    """
    tables = {
        logical_id: resource.get("Properties", {})
        for logical_id, resource in template.get("Resources", {}).items()
        if resource.get("Type") == "AWS::DynamoDB::Table"
    }
    if not tables:
        return
    physical = _physical_ids(cfn, stack_name)
    for logical_id, properties in tables.items():
        name = physical.get(logical_id)
        if not name:
            continue
        ttl = properties.get("TimeToLiveSpecification") or {}
        if ttl.get("Enabled") and ttl.get("AttributeName"):
            current = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            if current.get("TimeToLiveStatus") in (None, "DISABLED", "DISABLING"):
                ddb.update_time_to_live(
                    TableName=name,
                    TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
                )
        pitr = properties.get("PointInTimeRecoverySpecification") or {}
        if pitr.get("PointInTimeRecoveryEnabled"):
            backups = ddb.describe_continuous_backups(TableName=name)["ContinuousBackupsDescription"]
            status = backups.get("PointInTimeRecoveryDescription", {}).get("PointInTimeRecoveryStatus")
            if status != "ENABLED":
                ddb.update_continuous_backups(
                    TableName=name,
                    PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
                )


# ----------------------------------------------------------------------------------------- cli


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoint-url", default=os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"))
    parser.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
    parser.add_argument("--stack-name", default="Hourglass")
    parser.add_argument("--outdir", type=Path, default=REPO_ROOT / "cdk.out")
    parser.add_argument("--assembly", type=Path, help="deploy an existing cloud assembly (skip synth)")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    context = dict(item.split("=", 1) for item in args.context)
    assembly = args.assembly or synth(args.outdir, context)
    outputs = deploy(assembly, endpoint_url=args.endpoint_url, region=args.region, stack_name=args.stack_name)
    print(json.dumps(outputs, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
