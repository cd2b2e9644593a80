"""A queue's settings (contract v1 to v1.3), declared once: `put_queue`'s arguments, the `Queue`
model's fields and the CLI's `queues put` flags all derive from `QueueSettings` below."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

from hourglass_client.windows import WINDOW_HELP, parse_window


class RetryDoc(TypedDict, total=False):
    """`retry`: attempt n that fails waits min(backoff_max, backoff_base * 2**(n-1)) seconds."""

    max_attempts: int
    backoff_base: float
    backoff_max: float


class FlowControlDoc(TypedDict, total=False):
    """`flow_control` (v1.2): the limits of each `flow_key` separately."""

    key_rate_limit: float
    key_max_concurrency: int


class BreakerDoc(TypedDict, total=False):
    """`circuit_breaker` (v1.2): see `breaker`."""

    failure_ratio: float
    min_attempts: int
    window: int


class OrderingDoc(TypedDict, total=False):
    """`ordering` (v1.3): within each flow key, one message at a time in due order; `on_failure` `continue`
    (the default) or `hold` (the key waits after a failure until it is redelivered, cancelled or released)."""

    by: str
    on_failure: str


ORDERING_HELP = (
    "deliver each flow key's messages one at a time, in due order: flow_key, or flow_key,hold to hold a key "
    "after a failure until it is released (flow_key,continue: go on with the next, the default)"
)


def ordering(on_failure: str | None = None, *, by: str = "flow_key") -> OrderingDoc:
    """A queue's `ordering`: one message at a time per flow key, in due order; `on_failure="hold"` holds a key
    whose message failed until it is redelivered, cancelled or released (`release_key`)."""
    doc: OrderingDoc = {"by": by}
    if on_failure is not None:
        doc["on_failure"] = on_failure
    return doc


def parse_ordering(spec: str) -> OrderingDoc:
    """`flow_key`, `flow_key,hold`, `flow_key,continue` or a JSON object; the server checks the values."""
    if spec.lstrip().startswith("{"):
        return _json_object(spec)  # type: ignore[return-value]
    parts = [part.strip() for part in spec.split(",")]
    if len(parts) > 2 or not parts[0]:
        raise ValueError("give flow_key, flow_key,hold or flow_key,continue")
    return ordering(parts[1] if len(parts) == 2 else None, by=parts[0])


def breaker(failure_ratio: float, min_attempts: int, window: int) -> BreakerDoc:
    """A queue's `circuit_breaker`: it pauses itself once `min_attempts` attempts ended within `window` seconds
    and at least `failure_ratio` of them failed or were retried."""
    return {"failure_ratio": failure_ratio, "min_attempts": min_attempts, "window": window}


def parse_breaker(spec: str) -> BreakerDoc:
    """`RATIO,MIN_ATTEMPTS,WINDOW`, such as `0.5,20,300`, or a JSON object; the server checks the ranges."""
    if spec.lstrip().startswith("{"):
        return _json_object(spec)  # type: ignore[return-value]
    try:
        ratio, attempts, seconds = (part.strip() for part in spec.split(","))
        return breaker(float(ratio), int(attempts), int(seconds))
    except ValueError as exc:
        raise ValueError("give RATIO,MIN_ATTEMPTS,WINDOW such as 0.5,20,300") from exc


def parse_destination(spec: str) -> dict[str, Any]:
    """`sqs:QUEUE_URL`, `http:URL` (or a bare http(s) URL), or a JSON target object."""
    if spec.lstrip().startswith("{"):
        return _json_object(spec)
    kind, _, where = spec.partition(":")
    if kind == "sqs" and where:
        return {"type": "sqs", "queue_url": where}
    if kind == "http" and where and not where.startswith("//"):
        return {"type": "http", "url": where}
    if kind in ("http", "https"):
        return {"type": "http", "url": spec}
    raise ValueError("give sqs:QUEUE_URL, http:URL or a JSON target object")


def _json_object(text: str) -> dict[str, Any]:
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError("give a JSON object")
    return doc


@dataclass(frozen=True)
class Flag:
    """One CLI flag of a setting: `--NAME VALUE` sets the setting (or its `key` inside it) to `kind(VALUE)`."""

    name: str
    kind: Callable[[str], Any]
    help: str
    metavar: str
    key: str | None = None  # the field inside a document setting (`retry.max_attempts`)


def _about(help: str, *flags: Flag) -> dict[str, Any]:
    """A setting's help and CLI flags (its default is None: the server's default)."""
    return {"help": help, "flags": flags}


SECONDS = "SECONDS"


@dataclass(frozen=True, kw_only=True)
class QueueSettings:
    """Every setting of `PUT /v1/queues/{queue}`; None leaves it to the server's default."""

    default_delay: float | None = field(
        default=None,
        metadata=_about(
            "delay in seconds of messages that give neither delay nor deliver_at (default 0)",
            Flag("default-delay", float, "seconds for messages without delay or deliver_at [default 0]", SECONDS),
        ),
    )
    max_delay: float | None = field(
        default=None,
        metadata=_about(
            "largest delay accepted, in seconds (default one year)",
            Flag("max-delay", float, "largest accepted delay, in seconds [default 31536000, one year]", SECONDS),
        ),
    )
    ttl: float | None = field(
        default=None,
        metadata=_about(
            "seconds from creation after which a message expires (None: never)",
            Flag("ttl", float, "a message expires this many seconds after its creation [default: never]", SECONDS),
        ),
    )
    target: Mapping[str, Any] | None = field(
        default=None, metadata=_about("where messages go; build one with `targets`")
    )
    retry: RetryDoc | None = field(
        default=None,
        metadata=_about(
            "{max_attempts, backoff_base, backoff_max}",
            Flag("max-attempts", int, "attempts in all before a message fails [default 5]", "N", "max_attempts"),
            Flag(
                "backoff-base",
                float,
                "wait after the first failed attempt, doubling each time [default 1]",
                SECONDS,
                "backoff_base",
            ),
            Flag("backoff-max", float, "longest wait between attempts [default 3600]", SECONDS, "backoff_max"),
        ),
    )
    signing_secret: str | None = field(
        default=None,
        metadata=_about(
            "HMAC secret that signs HTTP callbacks (never returned)",
            Flag("signing-secret", str, "HMAC secret that signs HTTP callbacks (never shown again)", "SECRET"),
        ),
    )
    signing_secret_next: str | None = field(
        default=None,
        metadata=_about(
            "the secret a rotation moves to (both sign while it is set)",
            Flag("signing-secret-next", str, "the secret a rotation moves to (both sign while it is set)", "SECRET"),
        ),
    )
    rate_limit: float | None = field(
        default=None,
        metadata=_about(
            "attempts started per second, 0.1-10000 (None: unlimited)",
            Flag(
                "rate-limit",
                float,
                "attempts started per second over the queue, 0.1-10000 [default: unlimited]",
                "PER_SECOND",
            ),
        ),
    )
    max_concurrency: int | None = field(
        default=None,
        metadata=_about(
            "attempts in flight at once, 1-1000 (None: unlimited)",
            Flag("max-concurrency", int, "attempts in flight at once, 1-1000 [default: unlimited]", "N"),
        ),
    )
    timeout: float | None = field(
        default=None,
        metadata=_about(
            "seconds one HTTP attempt may take, 1-120 (default 15)",
            Flag("timeout", float, "seconds one HTTP attempt may take, 1-120 [default 15]", SECONDS),
        ),
    )
    failure_destination: Mapping[str, Any] | None = field(
        default=None,
        metadata=_about(
            "where a failed or expired message is announced: an sqs or http target",
            Flag(
                "failure-destination",
                parse_destination,
                "where failed and expired messages are announced: sqs:QUEUE_URL, http:URL or a JSON target",
                "WHERE",
            ),
        ),
    )
    window: Mapping[str, Any] | None = field(
        default=None,
        metadata=_about(
            "delivery window {timezone, days, from, to, exclude_dates}; build one with `window`",
            Flag(
                "window",
                parse_window,
                WINDOW_HELP,
                "SPEC",
            ),
        ),
    )
    circuit_breaker: BreakerDoc | None = field(
        default=None,
        metadata=_about(
            "{failure_ratio, min_attempts, window}; see `breaker`",
            Flag(
                "breaker",
                parse_breaker,
                "circuit breaker: pause the queue once MIN_ATTEMPTS attempts ended within WINDOW seconds and RATIO "
                "(0-1) of them failed, such as 0.5,20,300",
                "RATIO,MIN_ATTEMPTS,WINDOW",
            ),
        ),
    )
    flow_control: FlowControlDoc | None = field(
        default=None,
        metadata=_about(
            "{key_rate_limit, key_max_concurrency}: the limits of each flow_key",
            Flag(
                "key-rate-limit",
                float,
                "attempts started per second for each flow key, 0.1-10000 [default: unlimited]",
                "PER_SECOND",
                "key_rate_limit",
            ),
            Flag(
                "key-max-concurrency",
                int,
                "attempts in flight at once for each flow key, 1-1000 [default: unlimited]",
                "N",
                "key_max_concurrency",
            ),
        ),
    )

    ordering: OrderingDoc | None = field(
        default=None,
        metadata=_about(
            "{by: flow_key, on_failure: continue|hold}: each flow key's messages one at a time, in due order; "
            "see `ordering`",
            Flag("ordering", parse_ordering, ORDERING_HELP, "flow_key[,hold]"),
        ),
    )

    def settings_doc(self) -> dict[str, Any]:
        """The PUT body: the settings given, documents copied."""
        doc: dict[str, Any] = {}
        for name in setting_names():
            value = getattr(self, name)
            if value is not None:
                doc[name] = dict(value) if isinstance(value, Mapping) else value
        return doc


@dataclass(frozen=True, kw_only=True)
class QueuePut(QueueSettings):
    """`put_queue`'s keyword arguments: every setting, and `settings`, a raw document merged last (for
    fields this SDK does not know yet)."""

    settings: Mapping[str, Any] | None = None

    def doc(self) -> dict[str, Any]:
        return {**self.settings_doc(), **(self.settings or {})}


def setting_names() -> Iterator[str]:
    return (f.name for f in fields(QueueSettings))


def settings_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a queue document, as `QueueSettings` keyword arguments."""
    return {name: doc.get(name) for name in setting_names()}


def flags() -> Iterator[tuple[str, Flag]]:
    """(setting, flag) for every CLI flag of every setting, in declaration order."""
    for f in fields(QueueSettings):
        for flag in f.metadata["flags"]:
            yield f.name, flag
