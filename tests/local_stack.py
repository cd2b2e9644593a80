"""The local runtime on an embedded moto server, with the short timing end-to-end and client tests use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

from moto.server import ThreadedMotoServer

from devstack.config import RuntimeConfig
from devstack.emulator import free_port, port_is_free, prepare_embedded_moto
from devstack.runtime import Runtime


@contextmanager
def local_runtime(api_key: str, *, dispatcher_threads: int | None = None) -> Iterator[Runtime]:
    """Sweeps every second with a 4 s lookahead (1 s safety), private callbacks allowed, behind `api_key`."""
    prepare_embedded_moto()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    assert not port_is_free(port)
    config = RuntimeConfig(
        api_port=0,
        endpoint_url=f"http://127.0.0.1:{port}",
        sweep_interval=1.0,
        lookahead=4.0,
        handoff_safety=1.0,
        allow_private_callbacks=True,
        api_key=api_key,
    )
    if dispatcher_threads is not None:
        config = replace(config, dispatcher_threads=dispatcher_threads)
    runtime = Runtime(config).start()
    try:
        yield runtime
    finally:
        runtime.stop()
        server.stop()
