"""Peers that stop reading, on our scheduler and Python's, the same cases
interleaved (py, go): what another client's round trip feels meanwhile,
whether every result is exact, and what the stopped peers find when they
are continued.

Cases, each on a fresh cluster of stock `distributed.Worker`s without
nannies (tests/stress/worker_host.py, PER_HOST to a process: SIGSTOP stops a
process), withholding off (worker-saturation inf: every task goes to a
worker at once) and worker-ttl 8 s:

  stop-before  STOPPED of WORKERS workers are SIGSTOPped just before a
               computation whose tasks carry 64 KiB each, so their sockets
               fill with the tasks sent to them; they are removed at the ttl
               and their tasks rerun elsewhere
  stop-during  the same workers SIGSTOPped in the middle of a computation
  client-stop  a client SIGSTOPped during a 1 GiB gather through the
               scheduler: the scheduler must drop its connection at the TCP
               timeout (distributed.comm.timeouts.tcp) and serve the others

Throughout, a probe client runs submit(inc).result() on a worker that is
never stopped (its own process), every 100 ms: its median before the fault
(idle) and its median, p90 and worst from the fault until the case settles.
Afterwards the stopped processes get SIGCONT: how many exit by themselves
(their workers closed, as distributed's do when the scheduler dropped them)
and how many workers registered again. For ours, the longest the engine's
lock was held (/metrics) during the fault.

    scripts/bench.sh --workloads faults --repetitions 3 --results DIR
"""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from procs import ROOT, Scheduler, python_env, record_failure, run_interleaved, scrape_metrics, stop, tail
from report import group_medians, runs_table, write_named

NAME = "faults"
CASES = ("stop-before", "stop-during", "client-stop")
DEFAULT_CASES = CASES
HOST_SCRIPT = ROOT / "tests" / "stress" / "worker_host.py"
CLIENT_SCRIPT = Path(__file__).resolve().parent / "faults_client.py"


@dataclass
class Scale:
    workers: int = 50  # computing workers; the probe's worker is one more
    stopped: int = 20
    per_host: int = 1  # workers per process: SIGSTOP stops a process
    tasks: int = 5000  # stop-before's computation
    during_tasks: int = 1500
    during_task_s: float = 0.2
    payload: int = 64 << 10
    ttl: str = "8s"  # the effective ttl is max(ttl, 10 heartbeat intervals): 20 s at 51 workers
    tcp_timeout: str = "30s"
    blocks: int = 8
    block_bytes: int = 128 << 20
    idle_s: float = 5.0
    probe_every: float = 0.1

    @classmethod
    def smoke(cls) -> "Scale":
        return cls(workers=10, stopped=4, per_host=2, tasks=600, during_tasks=200, blocks=4,
                   block_bytes=32 << 20, idle_s=2.0, tcp_timeout="15s")


def scheduler_env(scale: Scale) -> dict[str, str]:
    return {
        "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "inf",
        "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": scale.ttl,
        "DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP": scale.tcp_timeout,
    }


class Hosts:
    """worker_host.py processes, per_host workers each, named PREFIX-h-i;
    stopped by PID."""

    def __init__(self, tmp: Path, address: str):
        self.tmp, self.address = tmp, address
        self.procs: list[subprocess.Popen] = []

    def start(self, n: int, per_host: int, prefix: str, timeout: float = 300) -> list[subprocess.Popen]:
        started = []
        for first in range(0, n, per_host):
            size = min(per_host, n - first)
            h = len(self.procs)
            log = open(self.tmp / f"host-{prefix}-{h}.log", "wb")
            p = subprocess.Popen([sys.executable, str(HOST_SCRIPT), self.address, str(size), f"{prefix}{h}",
                                  "--memory-limit", "2GiB"],
                                 stdout=subprocess.PIPE, stderr=log, env=python_env())
            self.procs.append(p)
            started.append(p)
        for p in started:
            line = p.stdout.readline().decode(errors="replace").strip()
            if not line.startswith("ready"):
                raise RuntimeError(f"worker host {p.pid} said {line!r} (exit {p.poll()})")
        return started

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
                except ProcessLookupError:
                    pass
        for p in self.procs:
            stop(p, grace=30)


class Probe:
    """Another client's submit(inc).result() on one worker, every `every`
    seconds, on a thread of its own: (monotonic time, seconds) per call."""

    def __init__(self, address: str, worker: str, every: float):
        from distributed import Client

        self.client = Client(address, timeout=60)
        self.worker, self.every = worker, every
        self.samples: list[tuple[float, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)

    def _run(self) -> None:
        import faults_tasks

        i = 0
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                r = self.client.submit(faults_tasks.inc, i, workers=[self.worker], pure=False).result(timeout=120)
                if r != i + 1:
                    self.errors.append(f"probe {i}: {r} != {i + 1}")
            except Exception as e:  # noqa: BLE001 - counted as an error of the case
                self.errors.append(f"probe {i}: {type(e).__name__}: {e}")
            took = time.monotonic() - t0
            self.samples.append((t0, took))
            i += 1
            self._stop.wait(max(0.0, self.every - took))

    def start(self) -> "Probe":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(150)
        self.client.close(timeout=30)

    def window(self, start: float, end: float) -> list[float]:
        return [took for t, took in self.samples if start <= t < end]


class LockWatch:
    """Our scheduler's dask_scheduler_engine_lock_held_maximum_seconds,
    scraped every second (each scrape resets it): the largest seen."""

    def __init__(self, url: str):
        self.url, self.largest = url, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lockwatch", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            try:
                samples = scrape_metrics(self.url, timeout=5)
            except OSError:
                continue
            self.largest = max(self.largest, samples.get("dask_scheduler_engine_lock_held_maximum_seconds", 0.0))

    def start(self) -> "LockWatch":
        self._thread.start()
        return self

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(10)
        return self.largest


def scheduler_workers(client) -> dict:
    """The scheduler's workers now, by address: identity(n_workers=-1)
    itself, not Client.scheduler_info(), which returns the client's cached
    copy that its own 2 s update (n_workers=0: no workers) may replace in
    between."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def n_workers(client) -> int:
    return len(scheduler_workers(client))


def wait_until(pred, timeout: float, what: str, every: float = 0.25):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def signal_all(procs: list[subprocess.Popen], sig: int) -> None:
    for p in procs:
        p.send_signal(sig)


def stop_workers_case(case: str, client, hosts: Hosts, compute: list[subprocess.Popen], addrs: list[str],
                      scale: Scale, rec: dict, timeout: float) -> tuple[float, list[subprocess.Popen]]:
    """SIGSTOP the first hosts before or during the computation; returns when
    the computation is exact and the stopped workers are gone."""
    import faults_tasks
    from distributed import wait

    stopped = compute[: scale.stopped // scale.per_host]
    payload = b"x" * scale.payload
    total = n_workers(client)
    if case == "stop-before":
        t_fault = time.monotonic()
        signal_all(stopped, signal.SIGSTOP)
        n, secs = scale.tasks, 0.0
        futs = client.map(faults_tasks.carry, range(n), [payload] * n, [secs] * n, workers=addrs, pure=False)
    else:
        n, secs = scale.during_tasks, scale.during_task_s
        futs = client.map(faults_tasks.carry, range(n), [payload] * n, [secs] * n, workers=addrs, pure=False)
        wait_until(lambda: client.processing() and sum(map(len, client.processing().values())) > 0, 60,
                   "the computation to start")
        time.sleep(n * secs / scale.workers / 3)  # about a third of the way in
        t_fault = time.monotonic()
        signal_all(stopped, signal.SIGSTOP)
    wait(futs, timeout=timeout)
    got = sum(client.gather(futs))
    want = n * (n - 1) // 2 + n * scale.payload
    rec["exact"] = got == want
    if not rec["exact"]:
        raise RuntimeError(f"computation sum {got} != {want}")
    rec["computed_s"] = time.monotonic() - t_fault
    wait_until(lambda: n_workers(client) == total - scale.stopped, timeout, "the stopped workers' removal")
    rec["removed_s"] = time.monotonic() - t_fault
    del futs
    return t_fault, stopped


def revive(client, stopped: list[subprocess.Popen], rec: dict, before: int, settle: float = 20.0) -> None:
    """SIGCONT the stopped processes; how many exit by themselves within
    settle seconds, and how many workers registered again."""
    signal_all(stopped, signal.SIGCONT)
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline and any(p.poll() is None for p in stopped):
        time.sleep(0.25)
    rec["revived_exited"] = sum(p.poll() is not None for p in stopped)
    rec["revived_registered"] = n_workers(client) - before


def peer_connections(sched_pid: int, peer_pid: int) -> int:
    """Established TCP connections between the scheduler and the peer."""
    try:
        ports = {c.laddr.port for c in psutil.Process(peer_pid).net_connections("tcp") if c.raddr}
        return sum(1 for c in psutil.Process(sched_pid).net_connections("tcp")
                   if c.raddr and c.raddr.port in ports and c.status == psutil.CONN_ESTABLISHED)
    except psutil.Error:
        return 0


RECEIVING_BYTES = 256 << 10  # more than any message but the gather's reply leaves queued


def client_receiving(client_pid: int, sched_port: int) -> bool:
    """Whether one of the client's connections to the scheduler has more
    than RECEIVING_BYTES received and not yet read (/proc/net/tcp's
    rx_queue): the gather's reply is arriving."""
    try:
        ports = {c.laddr.port for c in psutil.Process(client_pid).net_connections("tcp")
                 if c.raddr and c.raddr.port == sched_port}
    except psutil.Error:
        return False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, queues = fields[1], fields[4]
            if int(local.rsplit(":", 1)[1], 16) in ports and int(queues.split(":")[1], 16) > RECEIVING_BYTES:
                return True
    return False


def client_stop_case(sched: Scheduler, tmp: Path, addrs: list[str], scale: Scale, rec: dict,
                     timeout: float) -> tuple[float, subprocess.Popen]:
    """A client SIGSTOPped during a gather through the scheduler; returns
    once the scheduler dropped the gather's connection (or timeout)."""
    log = open(tmp / "stopped-client.log", "wb")
    c = subprocess.Popen([sys.executable, str(CLIENT_SCRIPT), sched.address, str(scale.blocks),
                          str(scale.block_bytes), ",".join(addrs)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=python_env())
    rec["_client_pid"] = c.pid
    line = c.stdout.readline().decode().strip()
    if line != "ready":
        raise RuntimeError(f"the gathering client said {line!r} (exit {c.poll()})")
    sched_port = int(sched.address.rsplit(":", 1)[1])
    t_go = time.monotonic()
    c.stdin.write(b"go\n")
    c.stdin.flush()
    # Stop it once the reply is arriving, not after a fixed pause: on a
    # loaded machine the client may not have sent its request yet, and a
    # client stopped before that leaves its connection idle, which nothing
    # drops. The reply (far more than the sockets' buffers hold) then fills
    # the stopped client's socket.
    wait_until(lambda: client_receiving(c.pid, sched_port), 60, "the gather's reply to reach the client", every=0.005)
    rec["reply_after_s"] = time.monotonic() - t_go
    t_fault = time.monotonic()
    c.send_signal(signal.SIGSTOP)
    during = peer_connections(sched.proc.pid, c.pid)
    rec["client_connections"] = during
    try:
        wait_until(lambda: peer_connections(sched.proc.pid, c.pid) < during, timeout, "the gather's connection to drop")
        rec["client_dropped_s"] = time.monotonic() - t_fault
    except TimeoutError:
        rec["client_dropped_s"] = None  # held: the table says so
    return t_fault, c


def one_run(case: str, kind: str, tmp: Path, scale: Scale, timeout: float) -> dict:
    from distributed import Client

    rec = {"case": case, "scheduler": kind, "ok": False, **{f"scale_{k}": v for k, v in asdict(scale).items()}}
    sched = Scheduler(kind, scheduler_env(scale), tmp).start(60)
    hosts = Hosts(tmp, sched.address)
    probe = lock = client = stopped_client = None
    stopped: list[subprocess.Popen] = []
    try:
        compute = hosts.start(scale.workers, scale.per_host, "w")
        hosts.start(1, 1, "probe")
        client = Client(sched.address, timeout=60)
        info = scheduler_workers(client)
        probe_addr = next(a for a, w in info.items() if str(w["name"]).startswith("probe"))
        addrs = sorted(a for a in info if a != probe_addr)
        if kind.startswith("go"):
            port = client.scheduler_info()["services"].get("dashboard")
            lock = LockWatch(f"http://127.0.0.1:{port}/metrics").start() if port else None
        probe = Probe(sched.address, probe_addr, scale.probe_every).start()
        t0 = time.monotonic()
        time.sleep(scale.idle_s)
        idle = probe.window(t0, time.monotonic())
        base = n_workers(client)
        if case == "client-stop":
            t_fault, stopped_client = client_stop_case(sched, tmp, addrs, scale, rec, timeout)
        else:
            t_fault, stopped = stop_workers_case(case, client, hosts, compute, addrs, scale, rec, timeout)
        t_end = time.monotonic()
        rec["settled_s"] = t_end - t_fault
        fault = probe.window(t_fault, t_end)
        if lock is not None:
            rec["lock_held_max_ms"] = 1e3 * lock.stop()
            lock = None
        if stopped:
            revive(client, stopped, rec, n_workers(client))
        if stopped_client is not None:
            stopped_client.send_signal(signal.SIGCONT)
            out = stopped_client.stdout.readline().decode(errors="replace").strip()
            rec["client_outcome"] = out.split(":")[0] if out else f"exit {stopped_client.wait(60)}"
        probe.stop()
        rec["probe_errors"] = len(probe.errors)
        if probe.errors:
            raise RuntimeError(f"probe errors: {probe.errors[:3]}")
        rec.update(idle_median_ms=1e3 * statistics.median(idle), fault_median_ms=1e3 * statistics.median(fault),
                   fault_p90_ms=1e3 * statistics.quantiles(fault, n=10)[-1] if len(fault) > 1 else 1e3 * fault[0],
                   fault_max_ms=1e3 * max(fault), fault_probes=len(fault), base_workers=base)
        rec["median_ratio"] = rec["fault_median_ms"] / rec["idle_median_ms"]
        rec["ok"] = True
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        record_failure(rec, e, tmp.parent / "failures.log", f"{NAME} {case} {kind}",
                       f"--- scheduler\n{sched.logs()}")
    finally:
        if lock is not None:
            lock.stop()
        if probe is not None and probe._thread.is_alive():
            try:
                probe.stop()
            except Exception:  # noqa: BLE001 - teardown goes on
                pass
        if client is not None:
            try:
                client.close(timeout=30)
            except Exception:  # noqa: BLE001
                pass
        if stopped_client is not None:
            if stopped_client.poll() is None:
                stopped_client.send_signal(signal.SIGCONT)
            stop(stopped_client, grace=30)
        hosts.stop()
        sched.stop()
    rec.pop("_client_pid", None)
    return rec


def run_all(tmp: Path, cases: list[str], repetitions: int, smoke: bool, timeout: float,
            on_record=lambda results: None, schedulers: tuple[str, ...] = ("py", "go")) -> list[dict]:
    scale = Scale.smoke() if smoke else Scale()

    def describe(rec: dict) -> str:
        return (f"idle {rec['idle_median_ms']:6.1f} ms  fault median {rec['fault_median_ms']:6.1f} "
                f"p90 {rec['fault_p90_ms']:7.1f} worst {rec['fault_max_ms']:7.1f} ms  settled {rec['settled_s']:5.1f} s")

    return run_interleaved(tmp, NAME, list(cases), repetitions, lambda case, rep: schedulers,
                           lambda case, kind, d, prof: one_run(case, kind, d, scale, timeout), describe, on_record)


# ---- report ------------------------------------------------------------------

FIELDS = ("idle_median_ms", "fault_median_ms", "fault_p90_ms", "fault_max_ms", "median_ratio", "settled_s",
          "removed_s", "client_dropped_s", "lock_held_max_ms", "revived_exited", "revived_registered")

def cell(field: str, digits: int = 1):
    """A runs_table column: the record's field, formatted; – when absent."""
    def value(r: dict) -> str:
        v = r.get(field)
        if v is None:
            return "–"
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)
    return value


RUN_COLUMNS = [
    ("idle median ms", cell("idle_median_ms")), ("fault median ms", cell("fault_median_ms")),
    ("p90 ms", cell("fault_p90_ms")), ("worst ms", cell("fault_max_ms")), ("× idle", cell("median_ratio", 2)),
    ("settled s", cell("settled_s")), ("removed s", cell("removed_s")), ("dropped s", cell("client_dropped_s")),
    ("lock held max ms", cell("lock_held_max_ms")), ("revived: exited", cell("revived_exited")),
    ("re-registered", cell("revived_registered")), ("exact", cell("exact")),
    ("client after SIGCONT", cell("client_outcome")),
]


def markdown(results: list[dict], machine: dict) -> str:
    ok = [r for r in results if r["ok"]]
    scale = next((r for r in results), {})
    lines = [
        "# Peers that stop reading: another client's round trip, ours and Python's", "",
        f"`{machine.get('command', '')}`, {machine.get('started', '')}; {machine.get('machine', '')}", "",
        f"{scale.get('scale_workers')} workers ({scale.get('scale_per_host')} per process) and a probe worker, "
        f"no nannies, withholding off, worker-ttl {scale.get('scale_ttl')}, "
        f"distributed.comm.timeouts.tcp {scale.get('scale_tcp_timeout')}. stop-before/stop-during: "
        f"{scale.get('scale_stopped')} workers SIGSTOPped before / during a computation of tasks carrying "
        f"{(scale.get('scale_payload') or 0) >> 10} KiB each; client-stop: a client SIGSTOPped during a "
        f"{(scale.get('scale_blocks') or 0) * (scale.get('scale_block_bytes') or 0) >> 20} MiB gather. The probe: "
        "another client's `submit(inc).result()` on a worker never stopped, every 100 ms; idle is its median "
        "before the fault, the rest from the fault until the case settled (results exact, stopped workers removed, "
        "or the stopped client's gather connection dropped). Medians of the runs:", "",
        "| case | scheduler | runs | idle median ms | fault median ms | × idle | p90 ms | worst ms | settled s | "
        "removed / dropped s | lock held max ms | revived: exited, re-registered |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    med = group_medians(ok, ("case", "scheduler"), FIELDS)
    for (case, kind), m in sorted(med.items(), key=lambda kv: (CASES.index(kv[0][0]), kv[0][1] != "py")):
        runs = sum(1 for r in ok if r["case"] == case and r["scheduler"] == kind)
        gone = m.get("removed_s") if case != "client-stop" else m.get("client_dropped_s")

        def f(v, d=1):
            return "–" if v is None else f"{v:.{d}f}"

        revived = "–" if case == "client-stop" else f"{f(m.get('revived_exited'), 0)}, {f(m.get('revived_registered'), 0)}"
        lines.append(f"| {case} | {kind} | {runs} | {f(m['idle_median_ms'])} | {f(m['fault_median_ms'])} | "
                     f"{f(m['median_ratio'], 2)} | {f(m['fault_p90_ms'])} | {f(m['fault_max_ms'])} | "
                     f"{f(m['settled_s'])} | {f(gone)} | {f(m.get('lock_held_max_ms'))} | {revived} |")
    lines += runs_table(results, RUN_COLUMNS)
    bad = [r for r in results if not r["ok"]]
    if bad:
        lines += ["", "## Failed runs", ""] + [f"- {r['case']} {r['scheduler']} rep {r.get('repetition')}: "
                                               f"{r.get('error')}" for r in bad]
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    write_named(out, NAME, results, machine, markdown(results, machine))
