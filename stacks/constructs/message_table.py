"""The DynamoDB table holding queues, messages, dedup records and sweeper state.

Owns the key schema, the sparse due index ``due``, the TTL attribute and the capacity mode (see docs/design.md and
docs/capacity.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct
from hourglass.contract import DUE_INDEX as DUE_INDEX_NAME
from hourglass.contract import LIST_ORDER_INDEXES, TTL_ATTRIBUTE

ON_DEMAND = "on_demand"
PROVISIONED = "provisioned"
CAPACITY_MODES = (ON_DEMAND, PROVISIONED)
ATTRIBUTE_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}


@dataclass(frozen=True, kw_only=True)
class Capacity:
    """How the table and its indexes are billed (`hourglass:capacity`): on demand, per request; or provisioned,
    read and write capacity units that Application Auto Scaling keeps between `min_units` and `max_units`,
    tracking `target_percent` consumed (table and every index alike; docs/capacity.md says when each is cheaper)."""

    mode: str = ON_DEMAND
    min_units: int = 5
    max_units: int = 4000
    target_percent: int = 70
    # Warm throughput (`hourglass:warm_writes`, `hourglass:warm_reads`): units a second the table and its due index
    # serve at once, without first ramping from a new table's 4,000 writes (docs/capacity.md). 0: not set (AWS
    # charges once for raising it, so a stack asks for it only when a known peak needs it).
    warm_writes: int = 0
    warm_reads: int = 0

    def __post_init__(self) -> None:
        if self.mode not in CAPACITY_MODES:
            raise ValueError(f"capacity must be one of {', '.join(CAPACITY_MODES)}, got {self.mode!r}")
        if not 1 <= self.min_units <= self.max_units:
            raise ValueError(f"capacity needs 1 <= min <= max units, got {self.min_units} and {self.max_units}")
        if not 20 <= self.target_percent <= 90:
            raise ValueError(f"capacity target utilisation must be 20-90 %, got {self.target_percent}")

    @property
    def provisioned(self) -> bool:
        return self.mode == PROVISIONED

    @property
    def warm_throughput(self) -> dynamodb.WarmThroughput | None:
        if not (self.warm_writes or self.warm_reads):
            return None
        return dynamodb.WarmThroughput(
            write_units_per_second=self.warm_writes or None, read_units_per_second=self.warm_reads or None
        )


class MessageTable(Construct):
    """One table ``(pk, sk)`` with the sparse GSI ``due`` ``(sweep_pk, sweep_sk)`` and the list orders' ``list``
    ``(list_pk, list_sk)`` and ``created`` ``(list_pk, created_at)``; on demand, or provisioned with auto scaling."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        created_index: bool = True,
        due_list_index: bool = True,
        capacity: Capacity | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.capacity = capacity or Capacity()
        # Provisioned: the table and each index start at the minimum; auto scaling moves them from there.
        units = self.capacity.min_units if self.capacity.provisioned else None
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PROVISIONED if units else dynamodb.BillingMode.PAY_PER_REQUEST,
            read_capacity=units,
            write_capacity=units,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True,
            ),
            time_to_live_attribute=TTL_ATTRIBUTE,
            removal_policy=removal_policy,
            warm_throughput=self.capacity.warm_throughput,
        )
        # Keys + `version`, and a message's `flow_key` and `priority` (v1.2, set at create, so never
        # rewritten): the sweeper's lease (`claimed_until`) is not projected, so claiming a message
        # does not write the index.
        self.table.add_global_secondary_index(
            index_name=DUE_INDEX_NAME,
            partition_key=dynamodb.Attribute(name="sweep_pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sweep_sk", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=["version", "flow_key", "priority"],
            read_capacity=units,
            write_capacity=units,
            warm_throughput=self.capacity.warm_throughput,
        )
        # Lists in order (v1.2), keys only: each message's entry is written when it is stored and again
        # only when it is rescheduled (its status changes never touch them). Each costs one write unit per
        # message: `hourglass:order_due` / `hourglass:order_created` false leaves it out.
        kept = {"due": due_list_index, "created": created_index}
        orders = [(name, sort, kind) for order, (name, sort, kind) in LIST_ORDER_INDEXES.items() if kept[order]]
        for name, sort, kind in orders:
            self.table.add_global_secondary_index(
                index_name=name,
                partition_key=dynamodb.Attribute(name="list_pk", type=dynamodb.AttributeType.STRING),
                sort_key=dynamodb.Attribute(name=sort, type=ATTRIBUTE_TYPES[kind]),
                projection_type=dynamodb.ProjectionType.KEYS_ONLY,
                read_capacity=units,
                write_capacity=units,
            )
        if self.capacity.provisioned:
            self._auto_scale([DUE_INDEX_NAME, *(name for name, _, _ in orders)])

    def _auto_scale(self, indexes: list[str]) -> None:
        """Target tracking on reads and writes of the table and of every index."""
        bounds = {"min_capacity": self.capacity.min_units, "max_capacity": self.capacity.max_units}
        target = self.capacity.target_percent
        scalables = [self.table.auto_scale_read_capacity(**bounds), self.table.auto_scale_write_capacity(**bounds)]
        for name in indexes:
            scalables.append(self.table.auto_scale_global_secondary_index_read_capacity(name, **bounds))
            scalables.append(self.table.auto_scale_global_secondary_index_write_capacity(name, **bounds))
        for scalable in scalables:
            scalable.scale_on_utilization(target_utilization_percent=target)
