"""The local runtime on an embedded moto server, with the short timing end-to-end and client tests use.

An embedded moto server keeps its state in this process's moto backends, which every server (and
`mock_aws`) shares: `embedded_moto` empties them when its server stops, and `reset_moto` between modules.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from moto.server import ThreadedMotoServer

from devstack.config import RuntimeConfig
from devstack.emulator import prepare_embedded_moto
from devstack.runtime import Runtime

# Embedded servers running now: their state is their fixture's until they stop.
_RUNNING: list[ThreadedMotoServer] = []


def reset_moto() -> None:
    """Every in-process moto backend emptied (what `/moto-api/reset` does), unless a server still uses them."""
    if _RUNNING:
        return
    from moto.moto_api._internal.models import moto_api_backend

    moto_api_backend.reset()


@contextmanager
def embedded_moto() -> Iterator[str]:
    """A moto server on a free loopback port in this process: its endpoint URL; stopped, then emptied."""
    prepare_embedded_moto()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _RUNNING.append(server)
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        _RUNNING.remove(server)
        reset_moto()


def short_timing(endpoint: str, api_key: str) -> RuntimeConfig:
    """Sweeps every second with a 4 s lookahead (1 s safety), private callbacks allowed, behind `api_key`."""
    return RuntimeConfig(
        api_port=0,
        endpoint_url=endpoint,
        sweep_interval=1.0,
        lookahead=4.0,
        handoff_safety=1.0,
        allow_private_callbacks=True,
        api_key=api_key,
    )


@contextmanager
def local_runtime(api_key: str, *, dispatcher_threads: int | None = None) -> Iterator[Runtime]:
    """The runtime with `short_timing` on an embedded moto server; stopped, then the server."""
    with embedded_moto() as endpoint:
        config = short_timing(endpoint, api_key)
        if dispatcher_threads is not None:
            config = replace(config, dispatcher_threads=dispatcher_threads)
        runtime = Runtime(config)
        try:
            yield runtime.start()
        finally:
            runtime.stop()
