"""The dispatch of due timers: a batch (`batch`), each timer through its start gate (`start_gate`), its attempt
(`attempt`), and the attempt's outcome (`outcome`)."""

from hourglass.service.dispatch.batch import Dispatcher
from hourglass.service.dispatch.outcome import Result

__all__ = ["Dispatcher", "Result"]
