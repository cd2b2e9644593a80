"""The one DynamoDB table: messages (`message_storage`), sweep bookkeeping (`sweep_storage`), schedules."""

from __future__ import annotations

from hourglass.adapters.message_storage import MessageStorage
from hourglass.adapters.schedule_storage import ScheduleStorage
from hourglass.adapters.sweep_storage import SweepStorage


class Store(MessageStorage, SweepStorage, ScheduleStorage):
    """Both nouns over one table and one client, as the services and the local runtime use it."""
