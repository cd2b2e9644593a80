"""A moto server in a process of its own, so the emulator does not share the benchmark's interpreter lock."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request

# Many short requests from many threads: a shorter interpreter switch interval keeps one slow request
# (a query over the whole table) from holding up the rest.
SWITCH_INTERVAL = "0.0005"

# The local runtime's own moto fix (devstack.moto_speed: sends and receives no longer count the whole
# queue per message), and two more, for speed and fidelity:
# - its server lists its package directory (a listdir and ~170 isdir calls) under a global lock on
#   every request; the list never changes while it runs, so it is computed once;
# - a long poll only re-checks the queue when a message is sent to it or after a whole second, so a
#   delayed message that becomes visible waits up to 1 s; SQS returns it at once, so it re-checks
#   every 50 ms.
SERVE = (
    "import logging, sys, time\n"
    "from devstack.emulator import prepare_embedded_moto\n"
    "prepare_embedded_moto()\n"
    "import moto.backends\n"
    "modules = tuple(moto.backends.list_of_moto_modules())\n"
    "moto.backends.list_of_moto_modules = lambda: modules\n"
    "sys.setswitchinterval(float(sys.argv[2]))\n"
    "from moto.sqs import models as sqs\n"
    "wait = sqs.Queue.wait_for_messages\n"
    "sqs.Queue.wait_for_messages = lambda queue, timeout: wait(queue, min(timeout, 0.05))\n"
    "from moto.server import ThreadedMotoServer\n"
    "logging.getLogger('werkzeug').setLevel(logging.ERROR)\n"
    "logging.disable(logging.WARNING)\n"
    "server = ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False)\n"
    "server.start()\n"
    "while True:\n"
    "    time.sleep(3600)\n"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmulatorProcess:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        # moto reports its own internal races (a GSI query racing an update) on stderr; botocore retries them.
        switch = os.environ.get("BENCH_SWITCH", SWITCH_INTERVAL)
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(self.port), switch], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def start(self, timeout: float = 30.0) -> EmulatorProcess:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.endpoint_url + "/moto-api/data.json", timeout=2).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the moto server did not start")

    def cpu_seconds(self) -> float:
        """CPU time the emulator process has used (Linux /proc)."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
