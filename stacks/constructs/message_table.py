"""The DynamoDB table holding queues, messages, dedup records and sweeper state.

Owns the key schema, the sparse due index ``due`` and the TTL attribute (see docs/design.md).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct
from hourglass.contract import CREATED_INDEX, LIST_INDEX, TTL_ATTRIBUTE
from hourglass.contract import DUE_INDEX as DUE_INDEX_NAME


class MessageTable(Construct):
    """One on-demand table ``(pk, sk)`` with the sparse GSI ``due`` ``(sweep_pk, sweep_sk)`` and the list
    orders' ``list`` ``(list_pk, list_sk)`` and ``created`` ``(list_pk, created_at)``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        created_index: bool = True,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True,
            ),
            time_to_live_attribute=TTL_ATTRIBUTE,
            removal_policy=removal_policy,
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
        )
        # Lists in order (v1.2), keys only: each message's entry is written when it is stored and again
        # only when it is rescheduled (its status changes never touch them). Without `created_index`
        # (`hourglass:order_created` false) the table keeps `order=due` only, +1 write unit per message.
        orders = ((LIST_INDEX, "list_sk"), (CREATED_INDEX, "created_at"))
        for name, sort in orders if created_index else orders[:1]:
            kind = dynamodb.AttributeType.NUMBER if sort == "created_at" else dynamodb.AttributeType.STRING
            self.table.add_global_secondary_index(
                index_name=name,
                partition_key=dynamodb.Attribute(name="list_pk", type=dynamodb.AttributeType.STRING),
                sort_key=dynamodb.Attribute(name=sort, type=kind),
                projection_type=dynamodb.ProjectionType.KEYS_ONLY,
            )
