"""The deployed mode's emulator: MiniStack on loopback, from its own venv, in a process group of its own.

MiniStack runs each Python Lambda in a subprocess of its own interpreter, so that venv
(`.venv-ministack`, requirements-ministack.txt) is also the Lambdas' runtime and carries their boto3.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from devstack.emulator import DUMMY_CREDENTIALS, came_up, cpu_ticks, die_with_parent, require_free_port

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-ministack"
HEALTH_PATH = "/_ministack/health"


class MiniStackMissing(RuntimeError):
    """The MiniStack venv is not installed."""


def python() -> Path:
    interpreter = VENV / "bin" / "python"
    if not interpreter.exists():
        raise MiniStackMissing(
            f"{interpreter} is missing: run `make tools` (or `python3 -m venv .venv-ministack && "
            ".venv-ministack/bin/pip install -r requirements-ministack.txt`)"
        )
    return interpreter


@dataclass
class MiniStack:
    endpoint_url: str
    process: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @classmethod
    def start(
        cls,
        port: int,
        *,
        region: str = "us-east-1",
        log_path: Path | None = None,
        timeout: float = 60.0,
        module: str = "ministack",
    ) -> MiniStack:
        """`module`: what `python -m` runs, MiniStack or a module of this checkout that wraps it (the load
        bench's request log, bench.ddb_recorder)."""
        require_free_port(port)
        env = {
            **os.environ,
            **DUMMY_CREDENTIALS,
            "GATEWAY_PORT": str(port),
            "BIND_HOST": "127.0.0.1",
            "MINISTACK_REGION": region,
            "AWS_DEFAULT_REGION": region,
            "LOG_LEVEL": os.environ.get("HOURGLASS_MINISTACK_LOG_LEVEL", "WARNING"),
        }
        # Not the project's venv: the Lambdas must import MiniStack's boto3, not the one of the caller.
        for name in ("VIRTUAL_ENV", "PYTHONPATH", "AWS_ENDPOINT_URL", "AWS_PROFILE"):
            env.pop(name, None)
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 (the child keeps it)
        # A group of its own: stop() ends MiniStack and the Lambda processes it forked in one signal.
        process = subprocess.Popen(
            [str(python()), "-m", module],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        if log_path:
            log.close()  # type: ignore[union-attr]
        emulator = cls(endpoint_url=f"http://127.0.0.1:{port}", process=process, log_path=log_path)
        emulator._wait_until_up(timeout)
        return emulator

    @property
    def embedded(self) -> bool:
        return self.process is not None

    def _wait_until_up(self, timeout: float) -> None:
        assert self.process is not None
        if came_up(self.process, self.endpoint_url + HEALTH_PATH, timeout):
            return
        self.stop()
        where = f" (log: {self.log_path})" if self.log_path else ""
        raise RuntimeError(f"MiniStack did not start on {self.endpoint_url}{where}")

    def cpu_seconds(self) -> float:
        """CPU time of MiniStack and its Lambda processes, the ones still running (Linux /proc)."""
        if self.process is None:
            return float("nan")
        total = sum(cpu_ticks(pid) or 0 for pid in _group_members(self.process.pid))
        return total / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        # Lambda processes that outlived their parent.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process = None


def _group_members(pgid: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members
