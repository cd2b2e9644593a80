"""The embedded AWS emulator: a moto server on loopback, or one that is already running."""

from __future__ import annotations

import logging
import os
import socket
import warnings
from dataclasses import dataclass

from moto.server import ThreadedMotoServer

from devstack import moto_speed

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
    """Before starting moto in this process: quiet logs, and the SQS send fix of `moto_speed`."""
    quiet_emulator_logs()
    moto_speed.install()


def quiet_emulator_logs() -> None:
    """moto logs every request and warns on each resource type it skips; the runtime reports both."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    logging.getLogger("moto").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="moto")
    warnings.filterwarnings("ignore", message=".*moto's CloudFormation.*")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        return sock.connect_ex((host, port)) != 0


@dataclass
class Emulator:
    endpoint_url: str
    server: ThreadedMotoServer | None = None

    @classmethod
    def start(cls, port: int) -> Emulator:
        prepare_embedded_moto()
        if not port_is_free(port):
            raise RuntimeError(
                f"port {port} is in use: stop what runs there, set HOURGLASS_EMULATOR_PORT, "
                "or point AWS_ENDPOINT_URL at an emulator that is already running"
            )
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        return cls(endpoint_url=f"http://127.0.0.1:{port}", server=server)

    @classmethod
    def external(cls, endpoint_url: str) -> Emulator:
        return cls(endpoint_url=endpoint_url)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
