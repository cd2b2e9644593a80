"""The local stand-in for API Gateway's IAM authorization (HOURGLASS_AUTH=iam): a request's SigV4 signature
recomputed by botocore with the emulator's credentials, over the body that arrived. It proves a request was
signed, correctly, by a holder of those credentials; it evaluates no IAM policy (every holder may call every
route)."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import botocore.session
from botocore.auth import SIGV4_TIMESTAMP, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

SERVICE = "execute-api"
# How far a signature's X-Amz-Date may be from now: API Gateway's 15 minutes.
MAX_SKEW = 900
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[a-z0-9-]+)/(?P<service>[a-z0-9-]+)"
    r"/aws4_request, ?SignedHeaders=(?P<signed>[a-z0-9;-]+), ?Signature=(?P<signature>[0-9a-f]{64})"
)
Refusal = tuple[int, str, str]


@dataclass(frozen=True)
class SigV4Check:
    credentials: ReadOnlyCredentials
    region: str

    @classmethod
    def of_emulator(cls, region: str) -> SigV4Check:
        """The credentials the runtime itself calls the emulator with (its dummy ones unless the
        environment gives others)."""
        found = botocore.session.get_session().get_credentials()
        if found is None:
            raise ValueError("HOURGLASS_AUTH=iam: no AWS credentials to check signatures against")
        return cls(found.get_frozen_credentials(), region)

    def __call__(self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes) -> Refusal | None:
        return self.refusal(method, raw_path, headers, body, datetime.now(UTC))

    def refusal(
        self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes, now: datetime
    ) -> Refusal | None:
        """Why the request is not signed by the emulator's credentials (403, as API Gateway), or None;
        `headers` in lower case, `raw_path` as received (query included)."""
        match = _AUTHORIZATION.fullmatch(headers.get("authorization", "").strip())
        if match is None:
            return 403, "forbidden", "Missing Authentication Token: sign the request with AWS SigV4"
        if not hmac.compare_digest(match["key"], self.credentials.access_key):
            return 403, "forbidden", "The security token included in the request is invalid"
        # A session token is checked when the client sends one: the secret key is what a signature proves, and
        # the documented credentials (testing/testing) come without one.
        token = headers.get("x-amz-security-token")
        if token is not None and not hmac.compare_digest(token, self.credentials.token or ""):
            return 403, "forbidden", "The security token included in the request is invalid"
        # botocore (like other signers) takes the payload hash from this header when it is there: the hash of
        # the body that arrived must be it, or a body replaced after signing would pass.
        claimed = headers.get("x-amz-content-sha256")
        if claimed is not None and claimed.lower() != hashlib.sha256(body).hexdigest():
            return 403, "forbidden", "x-amz-content-sha256 does not match the SHA-256 of the request body"
        stamp = headers.get("x-amz-date", "")
        try:
            signed_at = datetime.strptime(stamp, SIGV4_TIMESTAMP).replace(tzinfo=UTC)
        except ValueError:
            return 403, "forbidden", "X-Amz-Date: a signed request needs its time (YYYYMMDDTHHMMSSZ)"
        if abs((now - signed_at).total_seconds()) > MAX_SKEW or match["date"] != stamp[:8]:
            return 403, "forbidden", "Signature expired: X-Amz-Date is more than 15 minutes from now"
        signed = match["signed"].split(";")
        if "host" not in signed or match["service"] != SERVICE or match["region"] != self.region:
            return 403, "forbidden", f"the signature must cover the host header, for {SERVICE} in {self.region}"
        expected = self._signature(method, raw_path, headers, body, signed, stamp)
        if not hmac.compare_digest(expected, match["signature"]):
            return 403, "forbidden", "The request signature we calculated does not match the signature you provided"
        return None

    def _signature(
        self, method: str, raw_path: str, headers: Mapping[str, str], body: bytes, signed: list[str], stamp: str
    ) -> str:
        """botocore's signature of the request as received, over exactly the headers the caller signed."""
        request = AWSRequest(
            method=method,
            url=f"http://{headers.get('host', '')}{raw_path}",
            data=body,
            headers={name: headers.get(name, "") for name in signed},
        )
        request.context["timestamp"] = stamp
        signer = SigV4Auth(self.credentials, SERVICE, self.region)
        return str(signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request))
