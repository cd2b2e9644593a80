"""The deployed mode: the real `cdk bootstrap` and `cdk deploy` into MiniStack, the Lambdas running there.

API Gateway (with its key), the SQS event source mapping and the EventBridge schedule are the
emulator's; nothing of the stack runs in this process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from devstack import deploy
from devstack.config import RuntimeConfig
from devstack.emulator import use_dummy_credentials
from devstack.ministack import MiniStack

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".hourglass"
CDK = ROOT / "node_modules" / ".bin" / "cdk"
STACK_NAME = "Hourglass"
BOOTSTRAP_STACK = "CDKToolkit"
# EventBridge schedules have minute granularity: the deployed sweeper runs every 60 s at best.
MIN_SWEEP_INTERVAL = 60
_API_URL = re.compile(r"^https?://(?P<id>[^.]+)\.execute-api\.[^/]+/(?P<stage>[^/]+)/?$")


class CdkError(RuntimeError):
    """A `cdk` command failed; the message carries the end of its output."""


def cdk_cli() -> Path:
    if not CDK.exists():
        raise CdkError(f"{CDK} is missing: run `make tools` (npm ci installs the pinned aws-cdk CLI locally)")
    return CDK


def local_api_url(api_url: str, endpoint_url: str) -> str:
    """The emulator's path-style address of a deployed REST API stage (MiniStack and LocalStack)."""
    match = _API_URL.match(api_url)
    if match is None:
        return api_url
    return f"{endpoint_url.rstrip('/')}/_aws/execute-api/{match['id']}/{match['stage']}"


def run_cdk(*args: str, endpoint_url: str, region: str, logdir: Path) -> str:
    """Run the pinned CDK CLI against the emulator at `endpoint_url`, as a user would against AWS."""
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint_url,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        # cdk.json's app is `python3 app.py`: the project's venv must come first.
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    env.pop("AWS_PROFILE", None)
    command = [str(cdk_cli()), *args, "--no-notices", "--ci"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    (logdir / f"cdk-{args[0]}.log").write_text(output)
    if result.returncode != 0:
        tail = "\n".join(output.splitlines()[-30:])
        raise CdkError(f"`cdk {' '.join(args)}` failed (exit {result.returncode}):\n{tail}")
    return output


@dataclass
class DeployedStack:
    config: RuntimeConfig
    emulator: MiniStack | None = None
    endpoint_url: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    api_key: str = ""
    api_url: str = ""
    assembly: Path | None = None
    # Seconds each start-up step took: emulator, bootstrap, deploy.
    timings: dict[str, float] = field(default_factory=dict)
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="hourglass-deploy-")))

    def start(self) -> DeployedStack:
        config = self.config
        if config.lookahead <= MIN_SWEEP_INTERVAL:
            raise ValueError(
                f"HOURGLASS_LOOKAHEAD={config.lookahead:g}: the deployed sweeper runs every "
                f"{MIN_SWEEP_INTERVAL} s (EventBridge), so the lookahead must be more than that"
            )
        use_dummy_credentials(config.region)
        started = time.monotonic()
        if config.endpoint_url:
            self.endpoint_url = config.endpoint_url
        else:
            CACHE.mkdir(exist_ok=True)
            log = CACHE / f"ministack-{config.emulator_port}.log"
            self.emulator = MiniStack.start(config.emulator_port, region=config.region, log_path=log)
            self.endpoint_url = self.emulator.endpoint_url
        self.timings["emulator"] = time.monotonic() - started
        try:
            self._deploy()
        except BaseException:
            self.stop()
            raise
        return self

    def _deploy(self) -> None:
        from devstack.runtime import cached_synth  # the in-process runtime's synth cache, shared

        config = self.config
        started = time.monotonic()
        # The synth (10-20 s of jsii start-up unless cached) runs while the CLI bootstraps.
        with ThreadPoolExecutor(max_workers=1) as pool:
            synth = pool.submit(cached_synth, self.cdk_context())
            account = self.client("sts").get_caller_identity()["Account"]
            if not self._bootstrapped():
                self.cdk("bootstrap", f"aws://{account}/{config.region}")
            self.timings["bootstrap + synth"] = time.monotonic() - started
            assembly = self.assembly = synth.result()
        started = time.monotonic()
        outputs_file = self.workdir / "outputs.json"
        self.cdk(
            "deploy",
            STACK_NAME,
            "--app",
            str(assembly),
            "--require-approval",
            "never",
            "--outputs-file",
            str(outputs_file),
        )
        self.outputs = json.loads(outputs_file.read_text())[STACK_NAME]
        template = json.loads((assembly / f"{STACK_NAME}.template.json").read_text())
        # MiniStack's CloudFormation ignores the table's TTL and PITR (and SSE); apply the first two.
        deploy._reconcile_tables(self.client("dynamodb"), self.client("cloudformation"), STACK_NAME, template)
        key = self.client("apigateway").get_api_key(apiKey=self.outputs["ApiKeyId"], includeValue=True)
        self.api_key = key["value"]
        self.api_url = local_api_url(self.outputs["ApiUrl"], self.endpoint_url)
        self.timings["deploy"] = time.monotonic() - started

    def cdk_context(self) -> dict[str, object]:
        context = self.config.cdk_context()
        context["hourglass:sweep_interval"] = max(MIN_SWEEP_INTERVAL, int(self.config.sweep_interval))
        # MiniStack 1.5 refuses an alarm on metric math ("Properties.Metrics (metric math) is not supported").
        context["hourglass:metric_math_alarms"] = False
        return context

    def _bootstrapped(self) -> bool:
        try:
            stacks = self.client("cloudformation").describe_stacks(StackName=BOOTSTRAP_STACK)["Stacks"]
        except ClientError:
            return False
        return any(s["StackStatus"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE") for s in stacks)

    def cdk(self, *args: str) -> str:
        return run_cdk(*args, endpoint_url=self.endpoint_url, region=self.config.region, logdir=self.workdir)

    def client(self, service: str) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint_url, region_name=self.config.region)

    @property
    def resources(self) -> list[tuple[str, str]]:
        """(type, status) of each resource of the deployed stack."""
        described = self.client("cloudformation").describe_stack_resources(StackName=STACK_NAME)
        return [(r["ResourceType"], r["ResourceStatus"]) for r in described["StackResources"]]

    def stop(self) -> None:
        if self.emulator is not None:
            self.emulator.stop()
            self.emulator = None
