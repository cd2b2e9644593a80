"""Message bodies too large for a body item, kept in S3 (claim check): one object per body version."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hourglass.adapters import aws
from hourglass.adapters.items import body_text
from hourglass.core import formats
from hourglass.core.body_placement import KEEP_TAG
from hourglass.core.keys import body_object_key
from hourglass.errors import BodyStoreError

MISSING = ("NoSuchKey", "404", "NotFound")


class BodyStore:
    def __init__(self, bucket: str, client: Any = None) -> None:
        self.bucket = bucket
        self.client = client or aws.client("s3")

    def put(self, queue: str, message_id: str, version: int, body: Any, *, keep_days: int | None = None) -> str:
        """Writes the body (JSON text, UTF-8); returns its object key. `keep_days` tags it for the
        bucket's lifecycle rule of that many days (core.body_placement.keep_days)."""
        key = body_object_key(queue, message_id, version)
        tagging = {"Tagging": f"{KEEP_TAG}={keep_days}"} if keep_days is not None else {}
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body_text(body).encode("utf-8"),
                ContentType="application/json",
                Metadata={"fv": str(formats.FORMATS["body"])},
                **tagging,
            )
        except (ClientError, BotoCoreError) as exc:
            raise BodyStoreError(f"S3 PutObject failed: {exc}") from exc
        return key

    def get_text(self, queue: str, message_id: str, version: int) -> str | None:
        """The body's JSON text; None when there is no such object (removed, or never written)."""
        key = body_object_key(queue, message_id, version)
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=key)
            written = answer.get("Metadata", {}).get("fv")
            formats.check("body", None if written is None else int(written))
            return str(answer["Body"].read().decode("utf-8"))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in MISSING:
                return None
            raise BodyStoreError(f"S3 GetObject failed: {exc}") from exc
        except BotoCoreError as exc:
            raise BodyStoreError(f"S3 GetObject failed: {exc}") from exc

    def delete(self, queue: str, message_id: str, version: int) -> None:
        """Removes the body; removing one that is already gone is not an error."""
        try:
            self.client.delete_object(Bucket=self.bucket, Key=body_object_key(queue, message_id, version))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in MISSING:
                raise BodyStoreError(f"S3 DeleteObject failed: {exc}") from exc
        except BotoCoreError as exc:
            raise BodyStoreError(f"S3 DeleteObject failed: {exc}") from exc

    def kept_days(self, queue: str, message_id: str, version: int) -> int | None:
        """The body's lifecycle tag value; None when it has none or is gone."""
        key = body_object_key(queue, message_id, version)
        try:
            tags = self.client.get_object_tagging(Bucket=self.bucket, Key=key).get("TagSet", [])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in MISSING:
                return None
            raise BodyStoreError(f"S3 GetObjectTagging failed: {exc}") from exc
        found = [t["Value"] for t in tags if t.get("Key") == KEEP_TAG]
        return int(found[0]) if found and found[0].isdigit() else None

    def keep(self, queue: str, message_id: str, version: int, days: int) -> None:
        """Moves the body to the lifecycle rule of `days` days (a retry or reschedule past its expiry)."""
        key = body_object_key(queue, message_id, version)
        try:
            self.client.put_object_tagging(
                Bucket=self.bucket, Key=key, Tagging={"TagSet": [{"Key": KEEP_TAG, "Value": str(days)}]}
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in MISSING:
                raise BodyStoreError(f"S3 PutObjectTagging failed: {exc}") from exc
