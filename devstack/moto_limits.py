"""Makes the embedded moto refuse what AWS refuses, so local runs and tests meet AWS's limits.

moto 5.2 already refuses DynamoDB items over 405,000 bytes (AWS: 400 KB, 409,600 bytes; moto is a
little stricter) and transactions of more than 100 items. Its SQS size check counts characters where
SQS counts UTF-8 bytes: a body of 200,000 "é" (400,000 bytes) passed a 256 KiB queue. The patch
counts bytes, against the queue's MaximumMessageSize, as SQS does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from moto.sqs import models as sqs
from moto.sqs.exceptions import InvalidParameterValue


def _utf8_size(message_body: str) -> int:
    return len(message_body.encode("utf-8", "surrogatepass"))


def _sized_in_bytes(send: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(send)
    def send_message(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
        limit = int(self.get_queue(queue_name).maximum_message_size)
        if _utf8_size(message_body) > limit:
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
            )
        return send(self, queue_name, message_body, *args, **kwargs)

    send_message.__dict__["sized_in_bytes"] = True
    return send_message


def install() -> None:
    """Idempotent: the methods are wrapped once per process."""
    backend: Any = sqs.SQSBackend
    if not getattr(backend.send_message, "sized_in_bytes", False):
        backend.send_message = _sized_in_bytes(backend.send_message)
