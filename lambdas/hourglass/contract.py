"""The deployment contract: environment variable names, table layout names, defaults and stack outputs.

The stack, the Lambda settings, the local runtime and the Spark jobs all build from this module (no boto3).
"""

from __future__ import annotations

# Environment variables of the Lambda functions (and overrides of the local runtime).
TABLE = "HOURGLASS_TABLE"
TIMER_QUEUE_URL = "HOURGLASS_TIMER_QUEUE_URL"
SHARDS = "HOURGLASS_SHARDS"
LOOKAHEAD = "HOURGLASS_LOOKAHEAD"
SWEEP_INTERVAL = "HOURGLASS_SWEEP_INTERVAL"
RETENTION_DAYS = "HOURGLASS_RETENTION_DAYS"
ALLOW_PRIVATE_CALLBACKS = "HOURGLASS_ALLOW_PRIVATE_CALLBACKS"
API_KEY = "HOURGLASS_API_KEY"
HANDOFF_SAFETY = "HOURGLASS_HANDOFF_SAFETY"
DELIVERY_LEASE = "HOURGLASS_DELIVERY_LEASE"
TIMER_HOLD = "HOURGLASS_TIMER_HOLD"
SWEEP_CAPACITY = "HOURGLASS_SWEEP_CAPACITY"
SWEEPER_FUNCTION = "HOURGLASS_SWEEPER_FUNCTION"
LOG_LEVEL = "HOURGLASS_LOG_LEVEL"
BODY_BUCKET = "HOURGLASS_BODY_BUCKET"
SQS_TARGETS = "HOURGLASS_SQS_TARGETS"
TIMER_DLQ_URL = "HOURGLASS_TIMER_DLQ_URL"
# Allowed AWS service targets per type (core.aws_targets), and the stack's name (its resources never are targets).
SERVICE_TARGETS = {
    "lambda": "HOURGLASS_LAMBDA_TARGETS",
    "sns": "HOURGLASS_SNS_TARGETS",
    "eventbridge": "HOURGLASS_EVENTBRIDGE_TARGETS",
    "stepfunctions": "HOURGLASS_STEPFUNCTIONS_TARGETS",
}
STACK_NAME = "HOURGLASS_STACK_NAME"

# How callers authenticate (stack setting `hourglass:auth`, the local runtime's HOURGLASS_AUTH): an API
# key, AWS SigV4 (API Gateway's IAM authorization), or both at once. API Gateway checks it; no function does.
AUTH_API_KEY, AUTH_IAM, AUTH_BOTH = "api_key", "iam", "both"
AUTH_MODES = (AUTH_API_KEY, AUTH_IAM, AUTH_BOTH)
# The crash switch (tests and benchmarks only): the phase of an attempt where its dispatcher dies.
CRASH_AT = "HOURGLASS_CRASH_AT"
CRASH_PHASES = ("received", "begun", "delivered")

# The table: its sparse due index and the TTL attribute.
DUE_INDEX = "due"
# Lists in order (v1.2), keys only: by the time each message was scheduled for, and by creation.
LIST_INDEX = "list"
CREATED_INDEX = "created"
# Each list order (`?order=`) and its index: the index's name, and the sort attribute of its keys with its
# DynamoDB type. The stack builds these, the message storage queries them.
LIST_ORDER_INDEXES = {"due": (LIST_INDEX, "list_sk", "S"), "created": (CREATED_INDEX, "created_at", "N")}
# "0" when the stack has no `created` index (CDK context `hourglass:order_created`): `order=created` is a 400.
ORDER_CREATED = "HOURGLASS_ORDER_CREATED"
# "0" when the stack has no `list` index (CDK context `hourglass:order_due`): `order=due` is a 400.
ORDER_DUE = "HOURGLASS_ORDER_DUE"
TTL_ATTRIBUTE = "expire_at"

# Defaults; rows keyed for another shard count or bucket width are never swept.
DEFAULT_SHARDS = 8
DEFAULT_BUCKET_SECONDS = 60
DEFAULT_LOOKAHEAD = 300
DEFAULT_HANDOFF_SAFETY = 30
DEFAULT_SWEEP_INTERVAL = 60
DEFAULT_RETENTION_DAYS = 7
# The attempt's bound for the default 15 s timeout (core.deadline.delivery_lease: 1 + 15 + 30 s): a
# message whose dispatcher died mid-attempt is taken over this soon after its begin.
DEFAULT_DELIVERY_LEASE = 46
# Seconds a running dispatcher keeps its timer records hidden ahead, renewed while it works.
DEFAULT_TIMER_HOLD = 30
DEFAULT_SWEEP_CAPACITY = 20_000

# Stack outputs.
OUTPUT_TABLE = "TableName"
OUTPUT_VERSION = "Version"
OUTPUT_TIMER_QUEUE_URL = "TimerQueueUrl"
OUTPUT_INGEST_FUNCTION = "IngestFunctionName"
OUTPUT_BODY_BUCKET = "BodyBucketName"
OUTPUT_SHARDS = "Shards"
OUTPUT_BUCKET_SECONDS = "BucketSeconds"
OUTPUT_LOOKAHEAD = "LookaheadSeconds"
OUTPUT_HANDOFF_SAFETY = "HandoffSafetySeconds"
OUTPUT_API_KEY_ID = "ApiKeyId"
OUTPUT_INVOKE_POLICY = "ApiInvokePolicyArn"
OUTPUT_EXECUTE_ARN = "ApiExecuteArn"
