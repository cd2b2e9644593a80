"""The embedded emulator's own process: a moto server on loopback with the local runtime's fixes.

Run as `python -m devstack.moto_server PORT [SWITCH_INTERVAL]`; `devstack.emulator` starts it. With
HOURGLASS_EMULATOR_STATE naming a file, it starts from the state saved there and saves it on SIGTERM.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

# Many short requests from many threads: a shorter interpreter switch interval keeps one slow request
# (moto's Query walks the whole table) from holding up the rest.
SWITCH_INTERVAL = 0.0005
# SQS returns a delayed message to a waiting long poll as soon as it is visible; moto re-checks a
# waiting queue only on a send or after a whole second, so it is made to re-check this often.
LONG_POLL_RECHECK = 0.1
STATE_VARIABLE = "HOURGLASS_EMULATOR_STATE"


def speed_up() -> None:
    """Fixes for speed and fidelity, none for behaviour.

    - SQS sends and receives no longer count the whole queue per message (`devstack.moto_speed`);
    - the server lists its package directory (a listdir and ~170 isdir calls) under a global lock on
      every request; the list never changes while it runs, so it is computed once;
    - a long poll sees a delayed message within LONG_POLL_RECHECK of it becoming visible;
    - moto's many objects make full garbage collections pause every request for 0.1-0.3 s every
      10-15 s (growing with the data), which DynamoDB and SQS do not; they are made rare.
    """
    import moto.backends
    from moto.sqs import models as sqs

    from devstack.emulator import prepare_embedded_moto

    prepare_embedded_moto()
    modules = tuple(moto.backends.list_of_moto_modules())
    moto.backends.list_of_moto_modules = lambda: modules  # type: ignore[assignment]
    queue: Any = sqs.Queue
    wait = queue.wait_for_messages
    queue.wait_for_messages = lambda self, timeout: wait(self, min(timeout, LONG_POLL_RECHECK))
    gc.set_threshold(700, 10, 1000)


def main(argv: list[str]) -> int:
    port = int(argv[0])
    sys.setswitchinterval(float(argv[1]) if len(argv) > 1 else SWITCH_INTERVAL)
    speed_up()
    from moto.server import ThreadedMotoServer

    logging.disable(logging.WARNING)
    # Ctrl-C reaches the whole process group: the runtime stops first, then stops this with SIGTERM (and
    # the kernel does when the runtime dies), so a Ctrl-C must not end it half-way, before its state is saved.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    state = Path(os.environ[STATE_VARIABLE]) if os.environ.get(STATE_VARIABLE) else None
    if state is not None:
        from devstack import moto_state

        if state.exists():
            try:
                moto_state.load(state)
            except Exception:  # a state another moto wrote: kept aside, started empty
                from moto.moto_api._internal.models import moto_api_backend

                moto_api_backend.reset()
                state.replace(state.with_suffix(".unreadable"))

        def save_and_exit(*_: object) -> None:
            moto_state.save(state)
            os._exit(0)

        # The runtime sends SIGTERM once nothing of it calls here any more.
        signal.signal(signal.SIGTERM, save_and_exit)
        signal.signal(signal.SIGHUP, save_and_exit)  # its terminal closed
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
