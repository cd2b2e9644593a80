"""The local runtime (`python -m devstack`) as a child process the tests can start, kill -9 and restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack import api_call

REPO = Path(__file__).resolve().parents[2]


@dataclass
class LocalRuntime:
    endpoint_url: str
    api_port: int
    log_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    module: str = "devstack"
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def start(self, timeout: float = 180.0) -> LocalRuntime:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(["lambdas", "."]),
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "HOURGLASS_API_PORT": str(self.api_port),
            **self.env,
        }
        self.starts += 1
        log = (self.log_dir / f"runtime-{self.starts}.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", self.module], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"runtime exited with {self.process.returncode}: {self.output()[-3000:]}")
            if self.call("GET", "/health")[0] == 200:
                return self
            time.sleep(0.1)
        raise RuntimeError(f"runtime not ready after {timeout:.0f} s: {self.output()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind, like a host dying."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.log_dir.glob("runtime-*.log")))

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        try:
            return api_call.call(self.api, method, path, body, timeout=120)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            # no answer (or none in time): the caller cannot tell whether the request took effect
            return 0, None
