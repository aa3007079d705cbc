"""What every stress case measures, and where it records it.

The suite runs at two scales: `smoke` (the default, part of the normal test
command: a small slice of every case) and `full` (DASKGO_STRESS=full, run by
scripts/stress.sh). With DASKGO_STRESS_RESULTS=FILE each case appends its
row (runs, failures, lost or wrong results, RSS, goroutines, fds) to FILE as
one JSON line; scripts/stress.sh renders the table from it.

The scheduler's own state comes from identity's "daskgo" section
(scheduler/server/process.go), asked over a short-lived connection of its
own; RSS comes from /proc through psutil: the Go process and, apart, its
children (the materializer helper).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
import time
from dataclasses import asdict, dataclass, field

import psutil

SCALE = os.environ.get("DASKGO_STRESS", "smoke")
if SCALE not in ("smoke", "full"):
    raise RuntimeError(f"DASKGO_STRESS must be smoke or full, not {SCALE!r}")
FULL = SCALE == "full"
RESULTS = os.environ.get("DASKGO_STRESS_RESULTS", "")
MiB = 2**20


def scaled(smoke, full):
    return full if FULL else smoke


async def _identity(address: str) -> dict:
    from distributed.core import rpc

    async with rpc(address, timeout=30) as r:
        return await r.identity()


def process_stats(address: str) -> dict:
    """identity()["daskgo"] over a connection of its own (closed before
    returning, so it is not counted by the next call)."""
    return asyncio.run(_identity(address))["daskgo"]


def own_fds(stats: dict) -> int:
    """The scheduler's fds minus the connections it keeps pooled to live
    workers for reuse (distributed's ConnectionPool keeps them too; they
    are closed when the worker leaves)."""
    return int(stats["open_fds"]) - int(stats["pool_open"])


def accepted(pid: int, port: int) -> tuple[list[str], list[str]]:
    """The scheduler's accepted connections (local port == its port), as
    "peer state": those with a live peer, and those that dangle (the peer
    closed its end, CLOSE_WAIT, or no process holds the peer's end any
    more). A dangling connection is a leak; a live one is a peer's own
    pooling (a nanny keeps the connection it reported a dead worker over,
    as distributed's ConnectionPool does)."""
    mine = [c for c in psutil.Process(pid).net_connections(kind="tcp")
            if c.raddr and c.laddr.port == port]
    held = {(c.laddr.ip, c.laddr.port) for c in psutil.net_connections(kind="tcp")
            if c.pid and c.pid != pid and c.laddr}
    live, dangling = [], []
    for c in mine:
        gone = c.status == psutil.CONN_CLOSE_WAIT or (c.raddr.ip, c.raddr.port) not in held
        (dangling if gone else live).append(f"{c.raddr.ip}:{c.raddr.port} {c.status}")
    return live, dangling


def connections(pid: int, port: int) -> tuple[int, int]:
    """How many of the scheduler's accepted connections are live and how
    many dangle (accepted())."""
    live, dangling = accepted(pid, port)
    return len(live), len(dangling)


def profile_dir(pid: int) -> str | None:
    """The folder of the scheduler's --heap-profile path (tests/cluster.py's
    GoScheduler writes scheduler.log there too), or None without one."""
    args = psutil.Process(pid).cmdline()
    if "--heap-profile" not in args:
        return None
    return os.path.dirname(args[args.index("--heap-profile") + 1]) or "."


def goroutine_summary(pid: int, timeout: float = 10.0, limit: int = 40) -> str:
    """When the scheduler runs with --heap-profile PATH, asks it for its
    goroutines' stacks (SIGUSR1 writes PATH.N.goroutines) and returns the
    groups in a line each: how many, then the innermost frame and this
    module's frames. What a case that did not settle still runs is named in
    its failure, so a flake in CI can be read from CI's output alone."""
    folder = profile_dir(pid)
    if folder is None:
        return "(no --heap-profile: no goroutine dump)"
    before = set(os.listdir(folder))
    os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    path = ""
    while not path and time.monotonic() < deadline:
        time.sleep(0.2)
        new = [f for f in set(os.listdir(folder)) - before if f.endswith(".goroutines")]
        path = os.path.join(folder, new[0]) if new else ""
    if not path:
        return "(goroutine dump not written)"
    time.sleep(0.5)  # written after the heap profile, in one call
    groups = []
    with open(path, errors="replace") as f:
        text = f.read()
    for block in text.split("\n\n"):
        head = re.match(r"(\d+) @", block.lstrip().split("\n", 1)[0]) if block.strip() else None
        if not head:
            continue
        frames = re.findall(r"#\s+0x[0-9a-f]+\s+(\S+)\+0x[0-9a-f]+\s+(\S+)", block)
        names = [frames[0][0]] if frames else []
        names += [fn.rsplit("/", 1)[-1] + " " + loc.rsplit("/", 1)[-1]
                  for fn, loc in frames[1:] if fn.startswith("daskgo/")][:4]
        groups.append((int(head.group(1)), " < ".join(names)))
    groups.sort(key=lambda g: -g[0])
    lines = [f"{n}x {desc}" for n, desc in groups[:limit]]
    return f"goroutines ({os.path.basename(path)}): " + "; ".join(lines)


def log_lines_of(pid: int, peers: list[str], limit: int = 10) -> list[str]:
    """The scheduler's log lines naming any of peers ("ip:port state", as
    accepted() gives them), when its log is scheduler.log beside its
    --heap-profile (tests/cluster.py's GoScheduler writes it there)."""
    folder = profile_dir(pid)
    if folder is None or not peers:
        return []
    log = os.path.join(folder, "scheduler.log")
    wanted = [p.split(" ", 1)[0] + '"' for p in peers]  # the end of the "peer" field: no longer port matches
    try:
        with open(log, errors="replace") as f:
            return [line.strip()[:300] for line in f if any(w in line for w in wanted)][-limit:]
    except OSError:
        return []


def rss_parts(pid: int) -> tuple[int, int]:
    """RSS of the Go process and the sum over its children."""
    p = psutil.Process(pid)
    helper = 0
    for c in p.children(recursive=True):
        try:
            helper += c.memory_info().rss
        except psutil.Error:
            pass
    return p.memory_info().rss, helper


class RSSSampler:
    """Peak RSS of the scheduler and of its children, sampled every 0.2 s
    on a thread owned by the case (stopped in its finally)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.peak_go = self.peak_helper = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="rss-sampler")

    def _run(self):
        while not self._stop.is_set():
            try:
                go, helper = rss_parts(self.pid)
            except psutil.Error:
                return
            self.peak_go, self.peak_helper = max(self.peak_go, go), max(self.peak_helper, helper)
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)


@dataclass
class CaseResult:
    case: str
    scale: str = SCALE
    runs: int = 0
    failures: int = 0
    lost_or_wrong: int = 0
    peak_go_mib: float = 0.0
    peak_helper_mib: float = 0.0
    final_go_mib: float = 0.0
    final_helper_mib: float = 0.0
    goroutines_before: int = 0
    goroutines_after: int = 0
    fds_before: int = 0  # without the pooled scheduler->worker connections (pool_open)
    fds_after: int = 0
    connections_before: int = 0  # accepted connections with a live peer
    connections_after: int = 0
    dangling_after: int = 0  # accepted connections whose peer is gone: must be 0
    per_task_state_after: int = 0
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def fail(self, what: str) -> None:
        self.failures += 1
        self.notes.append(what)

    def write(self) -> None:
        if RESULTS:
            with open(RESULTS, "a") as f:
                f.write(json.dumps(asdict(self)) + "\n")


class Case:
    """One case against one scheduler: baseline before, the peak RSS while
    it runs, and after it, once goroutines and fds have settled: everything
    compared with the baseline. Use as a context manager around the load;
    call settle() after the load's own clients are closed."""

    def __init__(self, name: str, address: str, pid: int):
        self.address, self.pid = address, pid
        self.port = int(address.rsplit(":", 1)[1])
        self.result = CaseResult(name)
        self.sampler = RSSSampler(pid)
        self.t0 = 0.0
        self.before: dict = {}

    def __enter__(self) -> "Case":
        self.before = process_stats(self.address)
        self.result.goroutines_before = int(self.before["goroutines"])
        self.result.fds_before = own_fds(self.before)
        self.result.connections_before = connections(self.pid, self.port)[0]
        self.t0 = time.monotonic()
        self.sampler.__enter__()
        return self

    def __exit__(self, *exc):
        self.sampler.__exit__(*exc)

    def settle(self, slack: int = 2, timeout: float = 30.0) -> dict:
        """Waits until the scheduler holds no per-task state, no dangling
        connection, and no more goroutines and fds than before the case
        beyond what the peers' extra live connections explain (one fd and at
        most two goroutines each, plus slack: the probe's own connection),
        then records the final figures. The test asserts on the record."""
        r = self.result
        deadline = time.monotonic() + timeout
        while True:
            stats = process_stats(self.address)
            live, dangling = connections(self.pid, self.port)
            extra = max(0, live - r.connections_before)
            done = (dangling == 0 and int(stats["footprint"]["per_task"]) == 0
                    and int(stats["goroutines"]) <= r.goroutines_before + 2 * extra + slack
                    and own_fds(stats) <= r.fds_before + extra + slack)
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        go, helper = rss_parts(self.pid)
        r.goroutines_after, r.fds_after = int(stats["goroutines"]), own_fds(stats)
        r.connections_after, r.dangling_after = live, dangling
        r.per_task_state_after = int(stats["footprint"]["per_task"])
        r.final_go_mib, r.final_helper_mib = go / MiB, helper / MiB
        r.peak_go_mib = max(self.sampler.peak_go, go) / MiB
        r.peak_helper_mib = max(self.sampler.peak_helper, helper) / MiB
        r.wall_s = time.monotonic() - self.t0
        if not done:
            peers = accepted(self.pid, self.port)[1]
            r.fail(f"did not settle in {timeout}s: goroutines {r.goroutines_before}->{r.goroutines_after}, "
                   f"fds {r.fds_before}->{r.fds_after}, connections {r.connections_before}->{live} "
                   f"(+{dangling} dangling: {peers}), per-task state {stats['footprint']}; "
                   f"{goroutine_summary(self.pid)}; the log on those peers: {log_lines_of(self.pid, peers)}")
        return stats

    def check(self) -> None:
        """Writes the row, then fails the test if anything went wrong."""
        r = self.result
        r.write()
        assert r.runs > 0, f"{r.case}: no run happened"
        assert r.failures == 0 and r.lost_or_wrong == 0, (
            f"{r.case}: {r.failures} failures, {r.lost_or_wrong} lost or wrong results of {r.runs} runs: {r.notes}")


class WorkerHosts:
    """Processes of tests/stress/worker_host.py, each hosting many stock
    distributed.Workers; started as direct children and stopped by PID."""

    def __init__(self, tmp, env: dict):
        from cluster import python_env

        self.tmp, self.env = tmp, python_env(env)
        self.procs: list = []

    def start(self, address: str, n: int, prefix: str, *extra: str, timeout: float = 300):
        """Starts one host of n workers and waits for its "ready" line."""
        proc = self.launch(address, n, prefix, *extra)
        self.wait_ready(proc, prefix, timeout)
        return proc

    def launch(self, address: str, n: int, prefix: str, *extra: str):
        """Starts one host of n workers without waiting for it."""
        import subprocess
        import sys
        from pathlib import Path

        script = Path(__file__).resolve().parent / "worker_host.py"
        log = open(Path(self.tmp) / f"host-{prefix}.log", "wb")
        proc = subprocess.Popen([sys.executable, str(script), address, str(n), prefix, *extra],
                                stdout=subprocess.PIPE, stderr=log, env=self.env)
        self.procs.append(proc)
        return proc

    def wait_ready(self, proc, prefix: str, timeout: float = 300) -> None:
        """Waits for a launched host's "ready" line."""
        from pathlib import Path

        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()
            if line.startswith(b"ready"):
                return
        raise RuntimeError(f"worker host {prefix} not ready (exit {proc.poll()}, said {line!r}); "
                           f"log: {(Path(self.tmp) / f'host-{prefix}.log').read_text(errors='replace')[-2000:]}")

    def kill_all(self) -> None:
        """SIGKILLs every host at once: all their workers vanish without a word."""
        import signal

        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait(30)

    def stop(self) -> None:
        from cluster import stop

        for proc in self.procs:
            stop(proc, grace=30)
        self.procs.clear()
