"""A queue's figures over time read back from CloudWatch (the EMF metrics of adapters/metrics.py)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hourglass.adapters import aws
from hourglass.adapters.metrics import NAMESPACE
from hourglass.core.charts import COUNTERS, PERCENTILES, Series, Window
from hourglass.errors import StoreError


class CloudWatchSeries:
    """One GetMetricData call per chart: each counter's Sum and lateness p50/p99 per period."""

    source = "cloudwatch"

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = aws.client("cloudwatch")
        return self._client

    def series(self, queue: str, win: Window) -> Series:
        queries = [_query(f"c{i}", name, "Sum", queue, win.period) for i, name in enumerate(COUNTERS)]
        queries += [_query(f"l{stat}", "LatenessMs", stat, queue, win.period) for stat in PERCENTILES]
        names = {f"c{i}": doc for i, doc in enumerate(COUNTERS.values())}
        names.update({f"l{stat}": doc for stat, doc in PERCENTILES.items()})
        found: Series = {doc: [None] * win.points for doc in names.values()}
        token: str | None = None
        try:
            while True:
                extra = {"NextToken": token} if token else {}
                answer = self.client.get_metric_data(
                    MetricDataQueries=queries, StartTime=win.start, EndTime=win.end, **extra
                )
                for result in answer.get("MetricDataResults", []):
                    column = found[names[result["Id"]]]
                    for at, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                        slot = int((at - win.start).total_seconds()) // win.period
                        if 0 <= slot < win.points:
                            column[slot] = value
                token = answer.get("NextToken")
                if not token:
                    return found
        except (BotoCoreError, ClientError) as exc:
            raise StoreError(f"CloudWatch GetMetricData failed: {exc}") from exc


def _query(query_id: str, metric: str, stat: str, queue: str, period: int) -> dict[str, Any]:
    dimensions = [{"Name": "Queue", "Value": queue}]
    metric_ref = {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": dimensions}
    return {"Id": query_id, "MetricStat": {"Metric": metric_ref, "Period": period, "Stat": stat}, "ReturnData": True}
