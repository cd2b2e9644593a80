"""`python -m devstack.outputs cdk-outputs.json`: the deployed API's URL and key as shell exports.

Reads the file `cdk deploy --outputs-file` wrote and fetches the key's value (the AWS chain's
credentials); with AWS_ENDPOINT_URL set, the URL is the emulator's address of the same API stage.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import boto3
from hourglass import contract

from devstack.deployed import STACK_NAME, local_api_url


def exports(
    outputs_file: Path, stack: str = STACK_NAME, *, endpoint_url: str | None = None, client: Any = None
) -> dict[str, str]:
    outputs = json.loads(outputs_file.read_text())[stack]
    api_url = local_api_url(outputs["ApiUrl"], endpoint_url) if endpoint_url else outputs["ApiUrl"]
    found = {"API_URL": api_url.rstrip("/") + "/"}
    if contract.OUTPUT_API_KEY_ID in outputs:  # not under `-c hourglass:auth=iam`: callers sign instead
        apigateway = client or boto3.client("apigateway")
        key = apigateway.get_api_key(apiKey=outputs[contract.OUTPUT_API_KEY_ID], includeValue=True)
        found["API_KEY"] = key["value"]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("outputs_file", type=Path, help="the file of `cdk deploy --outputs-file`")
    parser.add_argument("--stack", default=STACK_NAME)
    args = parser.parse_args(argv)
    endpoint_url = os.environ.get("AWS_ENDPOINT_URL") or None
    for name, value in exports(args.outputs_file, args.stack, endpoint_url=endpoint_url).items():
        print(f"export {name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
