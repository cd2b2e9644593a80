"""The embedded emulator's own process: a moto server on loopback with the local runtime's fixes.

Run as `python -m devstack.moto_server PORT [SWITCH_INTERVAL]`; `devstack.emulator` starts it. With
HOURGLASS_EMULATOR_STATE naming a file, it starts from the state saved there and saves it on SIGTERM.
"""

from __future__ import annotations

import gc
import io
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
      10-15 s (growing with the data), which DynamoDB and SQS do not; they are made rare;
    - connections are kept alive (`keep_alive`), as AWS's endpoints keep them.
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
    keep_alive()


def keep_alive() -> None:
    """Werkzeug closes every connection after its response (http.server cannot drain a request body the app
    left unread before the next request line), so each request of the runtime was a new TCP connection and a
    new server thread: about as much work again as the request itself, on both sides, growing with the load
    (the clients' pools hold the connections, urllib3 opens one per request beyond them). A request whose body
    has a length (and no `Expect`) is read whole before the app sees it, so nothing of it is left on the
    connection, which stays open for the next; any other closes as before."""
    from werkzeug import serving

    handler: Any = serving.WSGIRequestHandler
    if getattr(handler.run_wsgi, "keeps_alive", False):
        return
    run_wsgi, send_header = handler.run_wsgi, handler.send_header

    def run_read_first(self: Any) -> None:
        framed = not any(name in self.headers for name in ("Transfer-Encoding", "Expect"))
        self.keep = framed and not self.close_connection
        if not self.keep:
            run_wsgi(self)
            return
        raw = self.rfile
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile = io.BytesIO(raw.read(length) if length else b"")
        try:
            run_wsgi(self)
        finally:
            self.rfile = raw

    def sending(self: Any, keyword: str, value: str) -> None:
        if keyword.lower() == "connection" and value.lower() == "close" and getattr(self, "keep", False):
            return
        send_header(self, keyword, value)

    run_read_first.keeps_alive = True  # type: ignore[attr-defined]
    handler.run_wsgi, handler.send_header = run_read_first, sending
    # A response goes out in several small writes; on a kept connection Nagle's algorithm would hold each one
    # after the first until the client's delayed acknowledgement (40 ms a request).
    handler.disable_nagle_algorithm = True


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
