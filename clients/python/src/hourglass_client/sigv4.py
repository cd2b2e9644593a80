"""AWS SigV4 signing of API requests (`auth="iam"`): botocore's signer and its standard credential chain.

botocore is imported only when IAM auth is chosen: `pip install 'hourglass-client[iam]'`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

SERVICE = "execute-api"
# https://<api id>.execute-api.<region>.amazonaws.com[.cn]/<stage>
_REGION_IN_HOST = re.compile(r"\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


def region_of(url: str) -> str | None:
    """The region an API Gateway URL names, or None (a custom domain, the local runtime)."""
    match = _REGION_IN_HOST.search(urlsplit(url).hostname or "")
    return match.group(1) if match else None


class SigV4Signer:
    """Signs each request (each retry again: a fresh `X-Amz-Date`) with the credential chain's current
    credentials: environment, profile, SSO, container or instance role, refreshed as botocore does."""

    def __init__(self, base_url: str, *, region: str | None = None, session: Any = None) -> None:
        try:
            import botocore.session
        except ImportError as exc:  # pragma: no cover - the SDK's own dependencies lack botocore
            raise ImportError("auth='iam' needs botocore: pip install 'hourglass-client[iam]'") from exc
        self.session = session or botocore.session.get_session()
        resolved = region or region_of(base_url) or self.session.get_config_variable("region")
        if not resolved:
            raise ValueError("region: give it, use an execute-api URL, or set AWS_REGION for auth='iam'")
        self.region: str = resolved
        self.credentials = self.session.get_credentials()
        if self.credentials is None:
            raise ValueError("auth='iam' found no AWS credentials in the standard chain (environment, profile, role)")

    def __call__(self, method: str, url: str, data: bytes | None, headers: Mapping[str, str]) -> dict[str, str]:
        """The headers to send: `headers` plus `X-Amz-Date`, `Authorization` (and the session token)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=data or b"", headers=dict(headers))
        SigV4Auth(self.credentials.get_frozen_credentials(), SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())
