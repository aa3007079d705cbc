"""Start and stop a Go scheduler and stock `dask worker` processes for tests.

Every process is started here as a direct child, remembered by PID, and
stopped by that PID (SIGTERM, then SIGKILL after a grace period), also when
the test fails. Nothing else on the machine is touched.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
BINARY = Path(os.environ.get("DASK_GO_SCHEDULER_BINARY", ROOT / "bin" / "dask-go-scheduler"))
VENV_BIN = Path(sys.executable).parent
TESTS = Path(__file__).resolve().parent


def python_env(extra: dict | None = None) -> dict:
    """The environment for scheduler and workers: the test modules are
    importable there, as a user's own modules are in the same software
    environment (the graph and the tasks reference test functions)."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}:{env.get('PATH', '')}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(TESTS), env.get("PYTHONPATH", "")] if p)
    # The differential dask.order test rides on every test: each graph a Go
    # scheduler orders is also ordered by dask.order.order in its helper,
    # and every mismatch is logged (tallied by record_order_checks).
    env[ORDER_CHECK] = "True"
    if extra:
        env.update(extra)
    return env


ORDER_CHECK = "DASK_DISTRIBUTED__SCHEDULER__TASK_ORDERING_CHECK"
# Totals over the session of the Go schedulers' dask.order checks.
ORDER_CHECKS = {"graphs": 0, "tasks": 0, "mismatched": 0, "details": []}


def record_order_checks(log_text: str) -> int:
    """Add a Go scheduler log's dask.order check lines to ORDER_CHECKS;
    returns how many of its graphs mismatched."""
    bad = 0
    for line in log_text.splitlines():
        if "dask.order check:" not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        ORDER_CHECKS["graphs"] += 1
        ORDER_CHECKS["tasks"] += int(rec.get("tasks", 0))
        if "differ" in rec.get("message", ""):
            bad += 1
            ORDER_CHECKS["mismatched"] += 1
            ORDER_CHECKS["details"].append(line[:600])
    return bad


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_binary() -> Path:
    """Build bin/dask-go-scheduler if it is missing or older than the sources."""
    if "DASK_GO_SCHEDULER_BINARY" in os.environ:
        return BINARY
    newest = max(p.stat().st_mtime for p in ROOT.rglob("*.go") if ".venv" not in p.parts)
    if BINARY.exists() and BINARY.stat().st_mtime >= newest:
        return BINARY
    proc = subprocess.run(
        ["go", "build", "-o", str(BINARY), "./cmd/dask-go-scheduler"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"go build failed:\n{proc.stdout}\n{proc.stderr}")
    return BINARY


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop exactly this process: SIGTERM, wait, then SIGKILL."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def scheduler_workers(client) -> dict:
    """The scheduler's workers now, by address, as identity(n_workers=-1)
    answers. Not Client.scheduler_info(): it fetches the same, then returns
    the client's cached copy, which the client's own periodic update
    (identity with n_workers=0, so no workers) may replace in between; a
    check then sees every worker gone, or an awaited removal done."""
    return scheduler_identity(client)["workers"]


def scheduler_identity(client) -> dict:
    """The scheduler's whole identity now, with every worker: for a check
    that reads the workers together with other fields (n_workers,
    total_threads, id, address). Not Client.scheduler_info(), for the
    reason scheduler_workers gives: its copy may be the periodic update's,
    whose "workers" is empty while n_workers counts them all."""
    return client.sync(client.scheduler.identity, n_workers=-1)


def stock_scheduler_info(client, timeout: float = 10.0) -> dict:
    """Client.scheduler_info() itself, for a test of what a stock Client
    shows there, asked again while its copy lists no workers (the race
    scheduler_workers avoids; a stock client has no way around it). For a
    cluster that has workers."""
    return wait_for(lambda: (info := client.scheduler_info())["workers"] and info, timeout,
                    "Client.scheduler_info() to list the workers")


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: process {proc.pid} exited with {proc.returncode}")
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def logs_when(read, holds, timeout: float = 10.0) -> str:
    """The log once holds(log) is true, or as it stands after timeout (the
    caller's assertion then fails and shows it). The scheduler logs through a
    non-blocking sink that a goroutine drains every 25 ms, so a line lands a
    little after the event it records, later still on a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        text = read()
        if holds(text) or time.monotonic() >= deadline:
            return text
        time.sleep(0.05)


class GoScheduler:
    """The Go binary on 127.0.0.1 with a free port and a scheduler file;
    it runs in cwd when given (the test's own working directory if not)."""

    def __init__(self, tmp: Path, *args: str, env: dict | None = None, cwd: Path | None = None):
        self.tmp = Path(tmp)
        self.scheduler_file = self.tmp / "scheduler.json"
        self.log_path = self.tmp / "scheduler.log"
        self.args = list(args)
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.address = ""

    def command(self) -> list[str]:
        build_binary()
        return [str(BINARY), "--host", "127.0.0.1", "--port", "0",
                "--scheduler-file", str(self.scheduler_file), *self.args]

    def start(self, timeout: float = 30) -> "GoScheduler":
        command = self.command()
        env = python_env(self.env)
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            command,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.cwd,
        )

        def ready():
            try:
                return json.loads(self.scheduler_file.read_text())["address"]
            except (OSError, ValueError, KeyError):
                return None

        self.address = wait_for(ready, timeout, "scheduler file", self.proc)
        return self

    def logs(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def logs_when(self, holds, timeout: float = 10.0) -> str:
        return logs_when(self.logs, holds, timeout)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.log.close()
            self.proc = None
            record_order_checks(self.logs())

    def __enter__(self):
        # __exit__ does not run when __enter__ raises: a scheduler that
        # never becomes ready is stopped here
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


class PyScheduler(GoScheduler):
    """Stock `dask scheduler` (distributed's Python scheduler) on 127.0.0.1
    with a free port and a scheduler file: the reference a test compares
    the Go scheduler with, on the same calls."""

    def command(self) -> list[str]:
        return [str(VENV_BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(free_port()),
                "--no-dashboard", "--scheduler-file", str(self.scheduler_file), *self.args]


class Workers:
    """Stock `dask worker` processes (each with its nanny, as users run them)."""

    def __init__(self, tmp: Path):
        self.tmp = Path(tmp)
        self.procs: list[subprocess.Popen] = []

    def start(self, scheduler: str | None, name: str, *extra: str, nthreads: int = 1,
              env: dict | None = None, scheduler_file: Path | None = None) -> subprocess.Popen:
        """Start `dask worker` for scheduler (an address), or with
        --scheduler-file when scheduler_file is given."""
        log = open(self.tmp / f"worker-{name}.log", "wb")
        penv = python_env(env)
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "dask"), "worker",
                *(["--scheduler-file", str(scheduler_file)] if scheduler_file else [scheduler]),
                "--name", name,
                "--nthreads", str(nthreads),
                "--host", "127.0.0.1",
                "--no-dashboard",
                "--memory-limit", "2GiB",
                "--local-directory", str(self.tmp / f"dask-{name}"),
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=penv,
        )
        self.procs.append(proc)
        return proc

    def logs(self) -> str:
        out = []
        for p in sorted(self.tmp.glob("worker-*.log")):
            out.append(f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}")
        return "\n".join(out)

    def stop(self) -> None:
        for proc in self.procs:
            stop(proc, grace=15)
        self.procs.clear()


@contextmanager
def running_cluster(tmp: Path, start_workers, n_workers: int, env: dict | None = None,
                    join_timeout: float = 60, scheduler: Callable[..., GoScheduler] = GoScheduler):
    """A Go scheduler (or another kind: PyScheduler; or a partial of one
    with more arguments), with env added to its environment, and the stock
    workers start_workers(sched, workers) starts; yields the scheduler once
    all n_workers have joined (within join_timeout seconds), and stops every
    process on exit. The scheduler starts inside the try, so one that never
    writes its scheduler file is stopped too."""
    from distributed import Client

    sched = scheduler(tmp, env=env)
    workers = Workers(tmp)
    try:
        sched.start()
        start_workers(sched, workers)
        with Client(sched.address, timeout=30) as c:
            c.wait_for_workers(n_workers, timeout=join_timeout)
        yield sched
    finally:
        workers.stop()
        sched.stop()


@contextmanager
def two_worker_cluster(tmp: Path, nthreads: int = 1, scheduler: type[GoScheduler] = GoScheduler):
    """The Go scheduler (or PyScheduler, to compare with) and two stock
    workers, w0 and w1, with nthreads each: the cluster a test module shares
    when its tests need both workers but no configuration of their own.
    They join within 120 s: a worker's imports take tens of seconds on a
    loaded two-core machine."""

    def start(sched, workers):
        for name in ("w0", "w1"):
            workers.start(sched.address, name, nthreads=nthreads)

    with running_cluster(tmp, start, 2, join_timeout=120, scheduler=scheduler) as sched:
        yield sched
