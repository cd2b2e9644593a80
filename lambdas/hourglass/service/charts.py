"""`GET /v1/queues/{queue}/metrics`: a queue's deliveries, failures and lateness over the last hour or day."""

from __future__ import annotations

from typing import Any

from hourglass.core import charts
from hourglass.service.context import Context
from hourglass.service.queues import Queues


def chart(ctx: Context, queue: str, params: dict[str, str] | None) -> dict[str, Any]:
    """The figures of an existing queue (404 otherwise) per period of the range asked for."""
    Queues(ctx).get(queue)
    win = charts.window(params, ctx.clock())
    reader = ctx.metric_series
    return charts.chart_doc(queue, win, reader.series(queue, win), reader.source)
