"""Shared pytest fixtures: the Go scheduler binary, started for one test.

The binary is bin/dask-go-scheduler, built by scripts/setup.sh; if it is
missing it is built here, and a failed build fails the test loudly. Each
process is started as a direct child and stopped by its own PID at teardown,
also when the test fails.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster import ORDER_CHECKS, build_binary, logs_when, python_env, record_order_checks
from cluster import stop as stop_process  # noqa: F401 - test_wire imports it from here

ROOT = Path(__file__).resolve().parent.parent


def ensure_scheduler_binary() -> Path:
    """bin/dask-go-scheduler, rebuilt when older than the sources; a failed
    build fails the test loudly."""
    try:
        return build_binary()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@dataclass
class RunningScheduler:
    address: str
    proc: subprocess.Popen
    scheduler_file: Path
    log_path: Path

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace")

    def logs_when(self, holds, timeout: float = 10.0) -> str:
        return logs_when(self.logs, holds, timeout)


@pytest.fixture
def go_scheduler(tmp_path):
    """The Go scheduler on 127.0.0.1 with a free port (--port 0); yields a
    RunningScheduler whose address comes from the scheduler file."""
    binary = ensure_scheduler_binary()
    scheduler_file = tmp_path / "scheduler.json"
    log_path = tmp_path / "scheduler.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(binary), "--host", "127.0.0.1", "--port", "0",
             "--scheduler-file", str(scheduler_file), "--log-level", "debug"],
            stdout=log, stderr=subprocess.STDOUT, env=python_env(),
        )
    try:
        deadline = time.monotonic() + 30
        address = None
        while address is None:
            if proc.poll() is not None:
                pytest.fail(f"dask-go-scheduler exited with {proc.returncode}:\n"
                            f"{log_path.read_text(errors='replace')}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail("dask-go-scheduler wrote no scheduler file within 30 s", pytrace=False)
            try:
                address = json.loads(scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.05)
        yield RunningScheduler(address, proc, scheduler_file, log_path)
    finally:
        stop_process(proc)
        record_order_checks(log_path.read_text(errors="replace"))


def pytest_terminal_summary(terminalreporter):
    c = ORDER_CHECKS
    terminalreporter.write_line(
        f"dask.order differential: {c['graphs']} graphs ({c['tasks']} tasks) ordered by the Go scheduler were "
        f"checked against dask.order.order; {c['mismatched']} differed")
    for d in c["details"]:
        terminalreporter.write_line(f"  {d}")


def pytest_sessionfinish(session, exitstatus):
    # a mismatch fails the run even though the test that made the graph passed;
    # a full run that checked nothing means the check itself is broken
    full_run = session.testscollected > 20
    if ORDER_CHECKS["mismatched"] or (full_run and ORDER_CHECKS["graphs"] == 0):
        session.exitstatus = 1
