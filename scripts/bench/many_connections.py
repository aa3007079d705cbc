"""Ten thousand connected workers held on our scheduler: fake workers
(bin/dask-go-zero-worker, several processes) register at once and stay
connected, heartbeating at the interval the scheduler dictates
(distributed's heartbeat_interval(n): 51 s at 10,000), for
--many-connections-hold seconds.

    scripts/bench.sh --workloads many-connections [--many-connections-workers 10000]
                     [--many-connections-hold 600] [--many-connections-procs 5]

Recorded: the time until the scheduler counts every worker; then, every
--many-connections-poll seconds, the scheduler's worker count (identity),
its CPU (Go process and helper) and RSS; the removals the log reports
("worker failed to heartbeat": check_worker_ttl's removals, and every
"worker stream closed"); at the end the idle CPU share over the hold and the
peak RSS, Go + helper. A run is ok when no worker was removed or lost and
every zero-worker process is still alive. Ours only: the Python scheduler
at this size is reported to break (distributed #3691).

The zero-worker processes share --many-connections-hb-conns heartbeat
connections each (see cmd/dask-go-zero-worker/heartbeat.go): three
sockets per worker on 127.0.0.1 do not fit in Linux's default ephemeral
port range at 10,000 workers. Each worker still has its own listener and
its own stream to the scheduler. The fd limit (RLIMIT_NOFILE) is raised
for the scheduler and the zero workers (this process is root here, or
scripts/bench.sh raised it); too low a limit stops the run with an error.
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import subprocess
import time
from pathlib import Path

from procs import ZERO_WORKER, Sampler, Scheduler, record_failure, stop, tail
from report import runs_table, write_named

NAME = "many-connections"
FD_LIMIT = 65536


def raise_fd_limit(need: int) -> int:
    """Raises this process's RLIMIT_NOFILE (children inherit it) to
    FD_LIMIT, the hard limit too if allowed; returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(need, FD_LIMIT)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft < need:
        raise RuntimeError(f"RLIMIT_NOFILE is {soft}, {need} needed: raise it (ulimit -n) as root")
    return soft


async def _count(address: str) -> int:
    from distributed.core import rpc

    async with rpc(address, timeout=60) as r:
        return int((await r.identity(n_workers=0))["n_workers"])


def worker_count(address: str) -> int:
    return asyncio.run(_count(address))


def log_removals(log: Path) -> tuple[int, int]:
    """(removals for missed heartbeats, worker streams closed) in the log."""
    text = log.read_text(errors="replace")
    return text.count("failed to heartbeat"), text.count("worker stream closed")


def one_run(n: int, procs_n: int, hold_s: float, poll_s: float, hb_conns: int, tmp: Path,
            profile: Path | None = None) -> dict:
    from distributed.versions import get_versions

    rec = {"case": f"{n} zero workers", "workers": n, "scheduler": "go", "hold_s": hold_s, "ok": False}
    rec["fd_limit"] = raise_fd_limit(n + 4096)  # the scheduler: a stream per worker, pooled conns, heartbeats
    sched = Scheduler("go", {}, tmp, profile=profile).start(60)
    sampler = Sampler([], sched.proc.pid, interval=0.5).start()
    versions = tmp / "versions.json"
    versions.write_text(json.dumps(get_versions()))
    per = [n // procs_n + (1 if p < n % procs_n else 0) for p in range(procs_n)]
    zeros: list[subprocess.Popen] = []
    try:
        t0 = time.perf_counter()
        for p, k in enumerate(per):
            with open(tmp / f"zero-{p}.log", "wb") as log:
                zeros.append(subprocess.Popen(
                    [str(ZERO_WORKER), "--scheduler", sched.address, "--workers", str(k), "--name", f"z{p}",
                     "--versions", str(versions), "--heartbeat-conns", str(hb_conns), "--log-level", "warn"],
                    stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 600
        while (count := worker_count(sched.address)) < n:
            dead = [z for z in zeros if z.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"{count} of {n} registered; zero worker exits {[z.returncode for z in dead]}: "
                                   f"{tail(tmp / 'zero-0.log', 1500)}")
            time.sleep(0.5)
        rec["register_s"] = time.perf_counter() - t0
        time.sleep(10)  # the registration storm's last replies settle

        own0, helper0 = sampler.scheduler_cpu()
        h0 = time.monotonic()
        timeline = []
        last = (own0, helper0, h0)
        while (now := time.monotonic()) - h0 < hold_s:
            time.sleep(min(poll_s, hold_s - (now - h0)))
            own, helper = sampler.scheduler_cpu()
            t = time.monotonic()
            missed, closed = log_removals(sched.log_path)
            point = {"t": round(t - h0, 1), "workers": worker_count(sched.address),
                     "cpu_pct": round(100 * (own + helper - last[0] - last[1]) / (t - last[2]), 3),
                     "rss_mib": round(sampler.total_rss[-1] / 2**20, 1), "missed_heartbeat_removals": missed,
                     "streams_closed": closed, "zero_procs_alive": sum(z.poll() is None for z in zeros)}
            timeline.append(point)
            last = (own, helper, t)
            print(f"    t={point['t']:6.0f} s  workers {point['workers']}  cpu {point['cpu_pct']:.2f} %  "
                  f"rss {point['rss_mib']:.0f} MiB  removed {missed}  closed {closed}", flush=True)
        own1, helper1 = sampler.scheduler_cpu()
        held = time.monotonic() - h0
        sampler.stop()
        missed, closed = log_removals(sched.log_path)
        rec.update(
            timeline=timeline, held_s=held,
            idle_cpu_pct=100 * (own1 - own0 + helper1 - helper0) / held,
            idle_go_pct=100 * (own1 - own0) / held, idle_helper_pct=100 * (helper1 - helper0) / held,
            min_workers=min(p["workers"] for p in timeline), final_workers=timeline[-1]["workers"],
            missed_heartbeat_removals=missed, streams_closed=closed,
            peak_rss_bytes=max(sampler.total_rss), scheduler_peak_rss_bytes=max(sampler.scheduler_rss),
            helper_peak_rss_bytes=max(sampler.helper_rss), final_rss_bytes=sampler.total_rss[-1],
            heartbeats_per_s=n / heartbeat_interval(n),
        )
        alive = sum(z.poll() is None for z in zeros)
        problems = []
        if missed or closed:
            problems.append(f"{missed} removals for missed heartbeats, {closed} worker streams closed")
        if rec["min_workers"] != n:
            problems.append(f"the worker count fell to {rec['min_workers']} of {n}")
        if alive != len(zeros):
            problems.append(f"{len(zeros) - alive} zero-worker processes exited")
        rec["ok"] = not problems
        if problems:
            rec["error"] = "; ".join(problems)
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        record_failure(rec, e, tmp.parent / "failures.log", f"{NAME} {n}", f"--- scheduler\n{sched.logs()}")
    finally:
        for z in zeros:
            if z.poll() is None:
                z.terminate()
        for z in zeros:
            stop(z, grace=60)
        if sampler._thread.is_alive():
            sampler.stop()
        sched.stop()
    return rec


def heartbeat_interval(n: int) -> float:
    from distributed.scheduler import heartbeat_interval as hb

    return hb(n)


def run_all(tmp: Path, n: int, procs_n: int, hold_s: float, poll_s: float, hb_conns: int, repetitions: int,
            on_record=lambda results: None, profile: Path | None = None) -> list[dict]:
    results = []
    for rep in range(repetitions):
        d = tmp / f"{NAME}-{rep}"
        d.mkdir(parents=True, exist_ok=True)
        rec = one_run(n, procs_n, hold_s, poll_s, hb_conns, d, profile / f"rep{rep}" if profile else None)
        rec["repetition"] = rep
        results.append(rec)
        on_record(results)
        print(f"  {NAME} {n} rep {rep}: " + (
            f"registered in {rec['register_s']:.1f} s, held {rec['held_s']:.0f} s, idle {rec['idle_cpu_pct']:.2f} %, "
            f"peak RSS {rec['peak_rss_bytes'] / 2**20:.0f} MiB" if rec["ok"] else f"FAILED {rec.get('error')}"),
            flush=True)
    return results


def markdown(results: list[dict], machine: dict) -> str:
    mib = 2**20

    def f(v, unit=1.0, d=1):
        return "–" if v is None else f"{v / unit:,.{d}f}"

    lines = ["# Ten thousand connected workers on our scheduler", "",
             f"Command: `{machine.get('command', '')}` (started {machine.get('started', '')})  ",
             f"Machine: {machine.get('machine', '')}  ",
             "Fake workers (bin/dask-go-zero-worker), each with its own listener and stream to the scheduler, "
             "heartbeating at the scheduler's heartbeat-interval; the scheduler's CPU and RSS are the Go process "
             "**plus** its helper (parts in brackets). See scripts/bench/many_connections.py.", "",
             "| workers | runs ok | register s | held s | heartbeats/s | idle CPU % (Go + helper) "
             "| peak RSS MiB (Go + helper) | RSS at end MiB | fewest workers seen | removed for missed heartbeats "
             "| streams closed |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if "held_s" not in r:
            lines.append(f"| {r['workers']:,} | 0/1 | {r.get('error')} |")
            continue
        lines.append(
            f"| {r['workers']:,} | {int(r['ok'])}/1 | {f(r['register_s'])} | {f(r['held_s'], 1, 0)} "
            f"| {f(r['heartbeats_per_s'])} | {f(r['idle_cpu_pct'], 1, 2)} ({f(r['idle_go_pct'], 1, 2)} + "
            f"{f(r['idle_helper_pct'], 1, 2)}) | {f(r['peak_rss_bytes'], mib, 0)} "
            f"({f(r['scheduler_peak_rss_bytes'], mib, 0)} + {f(r['helper_peak_rss_bytes'], mib, 0)}) "
            f"| {f(r['final_rss_bytes'], mib, 0)} | {r['min_workers']:,} | {r['missed_heartbeat_removals']} "
            f"| {r['streams_closed']} |")
    for r in results:
        if r.get("timeline"):
            lines += ["", f"Over time (repetition {r['repetition']}; CPU % over each interval):", "",
                      "| t s | workers | CPU % | RSS MiB | removed (missed heartbeats) | streams closed | zero procs alive |",
                      "|---:|---:|---:|---:|---:|---:|---:|"]
            lines += [f"| {p['t']:.0f} | {p['workers']:,} | {p['cpu_pct']:.2f} | {p['rss_mib']:.0f} "
                      f"| {p['missed_heartbeat_removals']} | {p['streams_closed']} | {p['zero_procs_alive']} |"
                      for p in r["timeline"]]
    cpus = [r["idle_cpu_pct"] for r in results if r.get("idle_cpu_pct") is not None]
    if len(cpus) > 1:
        lines += ["", f"Median idle CPU over the repetitions: {statistics.median(cpus):.2f} %"]
    lines += runs_table(results, [("register s", lambda r: f(r.get("register_s"), 1, 1))])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    write_named(out, NAME, results, machine, markdown(results, machine))
