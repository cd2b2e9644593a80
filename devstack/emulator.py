"""The embedded AWS emulator: a moto server on loopback in a process of its own, or one already running.

Its own process, so that the emulator does not share the runtime's interpreter lock: under load
(a bulk schedule while the runtime delivers) the two would otherwise take turns.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

from devstack import moto_atomic, moto_limits, moto_speed
from devstack.moto_server import STATE_VARIABLE

PR_SET_PDEATHSIG = 1

DUMMY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}


def use_dummy_credentials(region: str) -> None:
    """Emulators accept any credentials; never let a real profile leak into local runs."""
    for key, value in DUMMY_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    os.environ.setdefault("AWS_REGION", region)


def prepare_embedded_moto() -> None:
    """Before starting moto in this process: quiet logs, `moto_speed`, `moto_atomic` and `moto_limits`."""
    quiet_emulator_logs()
    moto_speed.install()
    moto_atomic.install()
    moto_limits.install()


def quiet_emulator_logs() -> None:
    """moto logs every request and warns on each resource type it skips; the runtime reports both."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    logging.getLogger("moto").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="moto")
    warnings.filterwarnings("ignore", message=".*moto's CloudFormation.*")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def require_free_port(port: int) -> None:
    if not port_is_free(port):
        raise RuntimeError(
            f"port {port} is in use: stop what runs there, set HOURGLASS_EMULATOR_PORT, "
            "or point AWS_ENDPOINT_URL at an emulator that is already running"
        )


def came_up(process: subprocess.Popen[bytes], url: str, timeout: float) -> bool:
    """Polls `url` until it answers (True), `process` exits or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def cpu_ticks(pid: int) -> int | None:
    """User + system clock ticks of one process (Linux /proc); None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[11]) + int(fields[12])


def die_with_parent() -> None:
    """In the child: a SIGKILLed runtime must not leave its emulator running (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Emulator:
    endpoint_url: str
    process: subprocess.Popen[bytes] | None = None
    state: Path | None = None

    @classmethod
    def start(cls, port: int, *, timeout: float = 60.0, state: Path | None = None) -> Emulator:
        """`state`: a file the emulator starts from (when it exists) and saves to when stopped."""
        require_free_port(port)
        command = [sys.executable, "-m", "devstack.moto_server", str(port)]
        env = {**os.environ, STATE_VARIABLE: str(state.resolve()) if state else ""}
        # moto reports its own internal races (a GSI query racing an update) on stderr; botocore retries them.
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent, env=env
        )
        emulator = cls(endpoint_url=f"http://127.0.0.1:{port}", process=process, state=state)
        emulator._wait_until_up(timeout)
        return emulator

    @classmethod
    def external(cls, endpoint_url: str) -> Emulator:
        return cls(endpoint_url=endpoint_url)

    @property
    def embedded(self) -> bool:
        return self.process is not None

    def _wait_until_up(self, timeout: float) -> None:
        assert self.process is not None
        if came_up(self.process, self.endpoint_url + "/moto-api/data.json", timeout):
            return
        self.stop()
        raise RuntimeError(f"the embedded moto server did not start on {self.endpoint_url}")

    def cpu_seconds(self) -> float:
        """CPU time the emulator's process has used (Linux /proc); NaN when it is not ours."""
        ticks = cpu_ticks(self.process.pid) if self.process is not None else None
        return float("nan") if ticks is None else ticks / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            # Saving a large state takes a while: a kill then would lose it.
            self.process.wait(120 if self.state else 10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
