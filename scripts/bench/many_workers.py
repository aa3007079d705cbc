"""Many stock workers on one scheduler, Go side by side with Python.

    scripts/bench.sh --workloads many-workers [--many-workers-sizes 2,100,500,1000]
                     [--repetitions 3] [--many-workers-idle 30] [--many-workers-map 20000]

Each run starts a fresh scheduler and stock `distributed.Worker`s hosted
50 to a process (tests/stress/worker_host.py, 1 thread each, no nanny: a
thousand `dask worker` processes do not fit on this machine), and a stock
Client in this process. It measures, in order:

    register   the hosts have imported distributed and wait; from the
               instant they are all told to start, until the scheduler
               reports every worker (client.wait_for_workers)
    idle       scheduler CPU over --many-workers-idle seconds with nothing
               to do but heartbeats: a share of one core, in %
    map        client.map(inc, range(M)) + gather (M = --many-workers-map):
               scheduler CPU per task and wall
    spread     2N tasks of 0.5 s (N workers): wall, and how many distinct
               workers ran one
    peak RSS   of the scheduler side over the whole run, sampled every 0.1 s

and, as scheduler "floor" (sizes above 2), the machine's floor for the
idle phase: msgfloor answering the same number of connections'
heartbeats at the same interval and nothing else (heartbeat_floor.py).

Every CPU and RSS figure of ours is the Go process plus its materializer
helper, each part shown. Runs are interleaved: for each repetition, each
size, py then go (ours only at 2 workers: the baseline of the target on
the map's CPU per task at 1,000, at most 1.2× ours at 2). Sizes run in the
order given; a long full run can be split into per-size invocations with
their own --results and merged with --many-workers-merge (the tables then
hold every run of every file).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import heartbeat_floor
from procs import ROOT, Sampler, Scheduler, python_env, record_failure, run_interleaved, stop
from report import group_medians, runs_table, write_named

NAME = "many-workers"
PER_HOST = 50
DEFAULT_SIZES = (2, 100, 500, 1000)
# sizes up to this run ours only: the 2-worker case is the baseline of the
# 1,000-worker target (map CPU per task <= 1.2x ours at 2 workers)
BASELINE_ONLY_GO = 2
SMOKE_SIZES = (2, 20)
HOST_SCRIPT = ROOT / "tests" / "stress" / "worker_host.py"


class Hosts:
    """worker_host.py processes holding n workers, PER_HOST each. Started
    with --go-on-stdin: start() returns once every host has imported
    distributed; go() releases them all at once. Stopped by PID."""

    def __init__(self, tmp: Path, address: str, n: int):
        self.tmp, self.address, self.n = tmp, address, n
        self.procs: list[subprocess.Popen] = []

    def start(self, timeout: float = 300) -> "Hosts":
        sizes = [min(PER_HOST, self.n - first) for first in range(0, self.n, PER_HOST)]
        for h, size in enumerate(sizes):
            log = open(self.tmp / f"host-{h}.log", "wb")
            self.procs.append(subprocess.Popen(
                [sys.executable, str(HOST_SCRIPT), self.address, str(size), f"mw{h}", "--go-on-stdin"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=python_env()))
        for h, p in enumerate(self.procs):
            self._expect(p, h, "imported", timeout)
        return self

    def go(self) -> None:
        for p in self.procs:
            p.stdin.write(b"go\n")
            p.stdin.flush()

    def wait_ready(self, timeout: float) -> None:
        for h, p in enumerate(self.procs):
            self._expect(p, h, "ready", timeout)

    def _expect(self, p: subprocess.Popen, h: int, word: str, timeout: float) -> None:
        # readline blocks; the host prints its word or dies (its log says why)
        line = p.stdout.readline().decode(errors="replace").strip()
        if not line.startswith(word):
            log = (self.tmp / f"host-{h}.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"host {h} said {line!r} instead of {word!r} (exit {p.poll()}); log: {log}")

    def stop(self) -> None:
        for p in self.procs:  # all at once: each closes its 50 workers concurrently
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            stop(p, grace=60)
        self.procs.clear()


def cpu_delta(sampler: Sampler, before: tuple[float, float]) -> tuple[float, float]:
    own, helper = sampler.scheduler_cpu()
    return own - before[0], max(0.0, helper - before[1])


def one_run(kind: str, n: int, tmp: Path, idle_s: float, map_n: int, timeout: float,
            profile: Path | None = None) -> dict:
    from distributed import Client

    import many_workers_tasks as tasks

    rec = {"case": f"{n} workers", "workers": n, "scheduler": kind, "map_tasks": map_n, "idle_s": idle_s, "ok": False}
    sched = Scheduler(kind, {}, tmp, profile=profile).start(60)
    sampler = Sampler([], sched.proc.pid).start()
    hosts = Hosts(tmp, sched.address, n)
    client = None
    try:
        client = Client(sched.address, timeout=60)
        hosts.start()
        before = sampler.scheduler_cpu()
        t0 = time.perf_counter()
        hosts.go()
        client.wait_for_workers(n, timeout=timeout)
        rec["register_s"] = time.perf_counter() - t0
        rec["register_cpu_s"], rec["register_helper_cpu_s"] = cpu_delta(sampler, before)
        hosts.wait_ready(timeout)
        time.sleep(2)  # the last registrations' replies and first heartbeats settle

        before = sampler.scheduler_cpu()
        time.sleep(idle_s)
        own, helper = cpu_delta(sampler, before)
        rec.update(idle_cpu_pct=100 * (own + helper) / idle_s, idle_go_pct=100 * own / idle_s,
                   idle_helper_pct=100 * helper / idle_s)
        sched.snapshot_heap()  # profiled Go only: heap.pprof.1, every worker connected and idle

        before = sampler.scheduler_cpu()
        t0 = time.perf_counter()
        futs = client.map(tasks.inc, range(map_n))
        total = sum(client.gather(futs))
        rec["map_wall_s"] = time.perf_counter() - t0
        own, helper = cpu_delta(sampler, before)
        del futs
        if total != map_n * (map_n + 1) // 2:
            raise RuntimeError(f"map: sum {total} != {map_n * (map_n + 1) // 2}")
        sched.snapshot_heap()  # heap.pprof.2: after the map
        rec.update(map_cpu_us_per_task=1e6 * (own + helper) / map_n, map_go_us_per_task=1e6 * own / map_n,
                   map_helper_us_per_task=1e6 * helper / map_n)
        time.sleep(1)  # the released keys leave before the next phase

        t0 = time.perf_counter()
        futs = client.map(tasks.sleep_where, [0.5] * (2 * n), pure=False)
        where = client.gather(futs)
        rec["spread_wall_s"] = time.perf_counter() - t0
        rec["spread_workers_used"] = len(set(where))
        del futs
        sampler.stop()
        rec.update(peak_rss_bytes=max(sampler.total_rss), scheduler_peak_rss_bytes=max(sampler.scheduler_rss),
                   helper_peak_rss_bytes=max(sampler.helper_rss))
        rec["ok"] = True
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        record_failure(rec, e, tmp.parent / "failures.log", f"{NAME} {kind} {n}", f"--- scheduler\n{sched.logs()}")
    finally:
        if client is not None:
            try:
                client.close(timeout=30)
            except Exception:  # noqa: BLE001 - teardown goes on regardless
                pass
        hosts.stop()
        if sampler._thread.is_alive():
            sampler.stop()
        sched.stop()
    return rec


def run_all(tmp: Path, sizes: list[int], repetitions: int, idle_s: float, map_n: int, timeout: float,
            on_record=lambda results: None, profile: Path | None = None,
            schedulers: tuple[str, ...] = ("py", "go", "floor")) -> list[dict]:
    def describe(rec: dict) -> str:
        if rec["scheduler"] == heartbeat_floor.KIND:
            return f"idle {rec['idle_cpu_pct']:5.2f} % ({rec['cpu_us_per_heartbeat']:.1f} µs per heartbeat)"
        return (f"register {rec['register_s']:6.1f} s  idle {rec['idle_cpu_pct']:5.2f} %  "
                f"map {rec['map_cpu_us_per_task']:6.1f} µs/task {rec['map_wall_s']:6.1f} s  "
                f"spread {rec['spread_wall_s']:5.1f} s on {rec['spread_workers_used']}  "
                f"peak RSS {rec['peak_rss_bytes'] / 2**20:5.0f} MiB")

    return run_interleaved(
        tmp, NAME, [str(n) for n in sizes], repetitions,
        lambda case, rep: tuple(k for k in schedulers if k == "go" or int(case) > BASELINE_ONLY_GO),
        lambda case, kind, d, prof: (heartbeat_floor.one_run(int(case), d, idle_s, timeout)
                                     if kind == heartbeat_floor.KIND
                                     else one_run(kind, int(case), d, idle_s, map_n, timeout, prof)),
        describe, on_record, profile)


# ---- report ------------------------------------------------------------------

FIELDS = ("register_s", "idle_cpu_pct", "idle_go_pct", "idle_helper_pct", "map_cpu_us_per_task",
          "map_go_us_per_task", "map_helper_us_per_task", "map_wall_s", "spread_wall_s", "spread_workers_used",
          "peak_rss_bytes", "scheduler_peak_rss_bytes", "helper_peak_rss_bytes",
          "idle_user_pct", "idle_sys_pct", "cpu_us_per_heartbeat", "map_tasks")


# the "Every run" table: header, field, unit, digits
RUN_COLUMNS = (
    ("register s", "register_s", 1, 2), ("idle %", "idle_cpu_pct", 1, 2), ("idle Go %", "idle_go_pct", 1, 2),
    ("map µs/task", "map_cpu_us_per_task", 1, 1), ("map Go µs/task", "map_go_us_per_task", 1, 1),
    ("map wall s", "map_wall_s", 1, 2), ("spread wall s", "spread_wall_s", 1, 2),
    ("workers used", "spread_workers_used", 1, 0), ("peak RSS MiB", "peak_rss_bytes", 2**20, 0),
    ("Go RSS MiB", "scheduler_peak_rss_bytes", 2**20, 0), ("helper RSS MiB", "helper_peak_rss_bytes", 2**20, 0),
)


def medians(results: list[dict]) -> dict[tuple[int, str], dict]:
    return group_medians(results, ("workers", "scheduler"), FIELDS)


def fmt(v, unit: float = 1.0, d: int = 1) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v / unit:,.{d}f}"


def targets(med: dict) -> list[str]:
    """The scale targets at the largest size (idle CPU, the map's CPU per task
    against ours at the smallest size and against Python's, peak RSS against
    Python's), against the measured figures."""
    sizes = sorted({n for n, _ in med})
    big, small = sizes[-1], sizes[0]
    go, py, go_small = med.get((big, "go")), med.get((big, "py")), med.get((small, "go"))
    if not go or go["ok"] == 0:
        return []
    out = ["", f"Targets at {big:,} workers (idle CPU, map CPU per task, peak RSS), medians:", ""]

    def line(what, ok, detail):
        out.append(f"- {what}: {'met' if ok else '**not met**'} ({detail})")

    line("idle CPU ≤ 0.5 %", go["idle_cpu_pct"] <= 0.5, f"{go['idle_cpu_pct']:.2f} %")
    floor = med.get((big, heartbeat_floor.KIND))
    if floor and floor.get("idle_cpu_pct"):
        out.append(f"  - the floor for the same heartbeats (heartbeat_floor.py, msgfloor answering {big:,} "
                   f"connections at distributed's heartbeat_interval): {floor['idle_cpu_pct']:.2f} % "
                   f"({floor['idle_user_pct']:.2f} user + {floor['idle_sys_pct']:.2f} sys, "
                   f"{floor['cpu_us_per_heartbeat']:.1f} µs per heartbeat); ours / floor = "
                   f"{go['idle_cpu_pct'] / floor['idle_cpu_pct']:.2f}")
    if small < big and go_small and go_small.get("map_cpu_us_per_task"):
        r = go["map_cpu_us_per_task"] / go_small["map_cpu_us_per_task"]
        line(f"map CPU per task ≤ 1.2× ours at {small} workers", r <= 1.2,
             f"{go['map_cpu_us_per_task']:.1f} / {go_small['map_cpu_us_per_task']:.1f} µs = {r:.2f}×")
        # the workers heartbeat through the map as they do idle: an estimate
        # of that share is the idle CPU share over the map's wall time
        beats = go["idle_cpu_pct"] / 100 * go["map_wall_s"] / go["map_tasks"] * 1e6 if go.get("map_tasks") else None
        if beats is not None:
            rest = go["map_cpu_us_per_task"] - beats
            out.append(f"  - of which heartbeats, estimated as the idle CPU share over the map's "
                       f"{go['map_wall_s']:.1f} s: {beats:.1f} µs per task; the rest, {rest:.1f} µs, is "
                       f"{rest / go_small['map_cpu_us_per_task']:.2f}× ours at {small} workers")
    if py and py.get("map_cpu_us_per_task"):
        r = go["map_cpu_us_per_task"] / py["map_cpu_us_per_task"]
        line("map CPU per task ≤ 0.15× Python's", r <= 0.15,
             f"{go['map_cpu_us_per_task']:.1f} / {py['map_cpu_us_per_task']:.1f} µs = {r:.2f}×")
        r = go["peak_rss_bytes"] / py["peak_rss_bytes"]
        line("scheduler-side peak RSS ≤ Python's", r <= 1.0,
             f"{go['peak_rss_bytes'] / 2**20:.0f} / {py['peak_rss_bytes'] / 2**20:.0f} MiB = {r:.2f}×")
    return out


def kind_rank(kind: str) -> int:
    """Python's scheduler first, the floor last, builds of ours between."""
    return 0 if kind == "py" else 2 if kind == heartbeat_floor.KIND else 1


def markdown(results: list[dict], machines: list[dict]) -> str:
    med = medians(results)
    mib = 2**20
    lines = ["# Many stock workers on one scheduler: Go + helper vs Python", ""]
    for m in machines:
        lines.append(f"Command: `{m.get('command', '')}` (started {m.get('started', '')})  ")
    lines += [
        f"Machine: {machines[0].get('machine', '') if machines else ''}  ",
        f"Stock `distributed.Worker`s, 1 thread, {PER_HOST} per process (tests/stress/worker_host.py), a stock "
        "Client in the benchmark's process; medians of the runs shown (interleaved py, go, go, py, ...: the order turns each repetition). "
        "Go's CPU and RSS are the Go process **plus** its helper (CPU summed over each phase, RSS summed at each "
        "0.1 s sample), the parts in brackets. Idle CPU is a share of one core over the idle window. "
        "See scripts/bench/many_workers.py for the phases.",
        "",
        "| workers | scheduler | runs ok | register s | idle CPU % (Go + helper) | map µs/task (Go + helper) "
        "| map wall s | spread wall s | workers used | peak RSS MiB (Go + helper) | map CPU × | RSS × |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    # every scheduler that ran, in the order of the runs (go:PATH builds
    # too); ratios are against Python's scheduler, or else the first build
    kinds = list(dict.fromkeys(k for _, k in sorted(med, key=lambda nk: kind_rank(nk[1]))))
    for n in sorted({n for n, _ in med}):
        base_kind = "py" if (n, "py") in med else next((k for k in kinds if (n, k) in med), None)
        for kind in kinds:
            m = med.get((n, kind))
            if m is None:
                continue
            py = med.get((n, base_kind)) if kind != base_kind else None
            if kind == heartbeat_floor.KIND:
                idle = (f"{fmt(m['idle_cpu_pct'], 1, 2)} ({fmt(m['idle_user_pct'], 1, 2)} user + "
                        f"{fmt(m['idle_sys_pct'], 1, 2)} sys)")
                per = rss = "–"
            elif kind.startswith("go"):
                idle = f"{fmt(m['idle_cpu_pct'], 1, 2)} ({fmt(m['idle_go_pct'], 1, 2)} + {fmt(m['idle_helper_pct'], 1, 2)})"
                per = (f"{fmt(m['map_cpu_us_per_task'])} ({fmt(m['map_go_us_per_task'])} + "
                       f"{fmt(m['map_helper_us_per_task'])})")
                rss = (f"{fmt(m['peak_rss_bytes'], mib, 0)} ({fmt(m['scheduler_peak_rss_bytes'], mib, 0)} + "
                       f"{fmt(m['helper_peak_rss_bytes'], mib, 0)})")
            else:
                idle, per, rss = fmt(m["idle_cpu_pct"], 1, 2), fmt(m["map_cpu_us_per_task"]), fmt(m["peak_rss_bytes"], mib, 0)

            def ratio(f):
                if not kind.startswith("go") or not py or not py.get(f) or m.get(f) is None:
                    return "–"
                return f"{m[f] / py[f]:.2f}"

            lines.append(f"| {n:,} | {kind} | {m['ok']}/{m['runs']} | {fmt(m['register_s'])} | {idle} | {per} "
                         f"| {fmt(m['map_wall_s'])} | {fmt(m['spread_wall_s'])} | {fmt(m['spread_workers_used'], 1, 0)} "
                         f"| {rss} | {ratio('map_cpu_us_per_task')} | {ratio('peak_rss_bytes')} |")
    lines += targets(med)
    lines += runs_table(results, [(h, lambda r, f=f, u=u, d=d: fmt(r.get(f), u, d)) for h, f, u, d in RUN_COLUMNS])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict, merge: list[Path] = ()) -> None:
    """NAME.json/.md in out; the runs of the --many-workers-merge files
    (earlier per-size invocations) come first in both."""
    machines, every = [], []
    for path in merge:
        data = json.loads(Path(path).read_text())
        machines.append(data["machine"])
        every += data["results"]
    write_named(out, NAME, every + results, {**machine, "merged": [str(p) for p in merge]},
                markdown(every + results, [*machines, machine]))
