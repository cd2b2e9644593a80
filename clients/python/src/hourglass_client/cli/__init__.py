"""The `hourglass` command: queues, messages, schedules, flow keys, bulk operations and `tail`, over the SDK.

Config: a profile of `~/.config/hourglass/config.toml` (`--profile`, HOURGLASS_PROFILE), overridden by
HOURGLASS_URL / HOURGLASS_API_KEY / HOURGLASS_AUTH and by --url / --api-key / --auth (iam signs requests with
AWS SigV4 from the standard credential chain). `--output table|json|jsonl` in every command.

`root` is the top command; each other module is one command group (or the message commands).
"""

from __future__ import annotations

from hourglass_client.cli import keys, messages, operations, queues, schedules, tail
from hourglass_client.cli.root import main

for _command in (
    queues.queues,
    *messages.COMMANDS,
    schedules.schedules,
    keys.keys,
    operations.operations,
    operations.purge,
    tail.tail,
):
    main.add_command(_command)

__all__ = ["main"]
