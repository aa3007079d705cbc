"""A cluster dump of a 100k-task scheduler while another client works: does
writing the dump stall the other clients?

    scripts/bench.sh --workloads debug-dump [--repetitions 3] [--debug-dump-cases to-url,to-client]
                     [--debug-dump-schedulers go]

Each run: a fresh scheduler and one stock worker (2 threads, no nanny); a
client persists a 100,000-task graph whose 50,000 roots are restricted to
a worker that does not exist, so every task stays on the scheduler (in
no-worker or waiting) and the workers' own dump_state stays small: the
run measures the scheduler, not the workers' Python. Another client
process (scripts/bench/debug_dump_client.py) times submit(inc, i).result()
round trips one after another throughout. After 5 s of that (the idle
window) the first client dumps the cluster state, and the run goes on 3 s
after the dump returns. Cases:

- to-url: Client.dump_cluster_state(path, write_from_scheduler=True): the
  scheduler writes the gzipped msgpack file (dump_cluster_state_to_url);
- to-client: Client.dump_cluster_state(path): the scheduler sends the
  dump (get_cluster_state) and the client writes it.

Per run: the median round trip in the idle window and during the dump, and
their ratio (the claim: within 2x); the dump's duration; the Go
scheduler's own log of the dump (how long its engine's lock was held for
the copy, and how long encoding and writing took outside it, and the
bytes); and the dump read back with distributed's DumpArtefact (every task
there). Results: --results (default scripts/bench/results/debug-ops/),
debug-dump.json and debug-dump.md.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from procs import BENCH, Scheduler, Workers, python_env, record_failure, run_interleaved
from report import runs_table, write_named

NAME = "debug-dump"
CASES = {"to-url": True, "to-client": False}  # case -> write_from_scheduler
DEFAULT_CASES = tuple(CASES)
TASKS, SMOKE_TASKS = 100_000, 2_000
IDLE_S, AFTER_S = 5.0, 3.0
NOWHERE = "tcp://127.0.0.1:9"  # a worker that never joins


def persist_stuck_graph(client, n_tasks: int):
    """n_tasks tasks that stay on the scheduler: n/2 roots restricted to a
    worker that never joins (no-worker), n/2 tasks depending on them
    (waiting). Returns the persisted collection (keep it)."""
    import dask
    import dask.array as da

    with dask.annotate(workers=[NOWHERE], allow_other_workers=False):
        roots = da.ones(n_tasks // 2, chunks=1)
    stuck = client.persist(roots + 1, optimize_graph=False)
    while len(client.who_has()) < n_tasks:
        time.sleep(0.2)
    return stuck


def window_median(samples: list[list[float]], t0: float, t1: float) -> tuple[float | None, int]:
    """The median round trip of those that started in [t0, t1]."""
    inside = [d for start, d in samples if t0 <= start <= t1]
    return (statistics.median(inside) if inside else None), len(inside)


def dump_log(sched: Scheduler) -> dict:
    """The Go scheduler's log line of the dump: locked_ms, written_ms, bytes."""
    for line in sched.log_path.read_text(errors="replace").splitlines():
        if "cluster state dumped" in line or "cluster state sent" in line:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            return {k: rec[k] for k in ("locked_ms", "written_ms", "bytes", "tasks") if k in rec}
    return {}


def check_dump(path: Path, n_tasks: int) -> None:
    from distributed.cluster_dump import DumpArtefact

    dump = DumpArtefact.from_url(str(path))
    got = len(dump.scheduler_tasks_in_state())
    if got < n_tasks:
        raise RuntimeError(f"the dump holds {got} tasks, want {n_tasks}")


def one_run(case: str, kind: str, n_tasks: int, tmp: Path, timeout: float) -> dict:
    from distributed import Client

    rec = {"case": case, "scheduler": kind, "tasks": n_tasks, "ok": False}
    sched = Scheduler(kind, {}, tmp, log_level="info").launch()
    workers = Workers(tmp, sched.scheduler_file, 1, 2 * 2**30, nthreads=2, nanny=False).start()
    timer = None
    try:
        sched.wait_ready(60)
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as c:
            c.wait_for_workers(1, timeout=60)
            stuck = persist_stuck_graph(c, n_tasks)
            ready, stop, out = tmp / "ready", tmp / "stop", tmp / "samples.json"
            timer = subprocess.Popen(
                [sys.executable, str(BENCH / "debug_dump_client.py"), "--scheduler-file", str(sched.scheduler_file),
                 "--ready", str(ready), "--stop", str(stop), "--out", str(out)], env=python_env())
            deadline = time.monotonic() + 120
            while not ready.exists():
                if timer.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the timing client did not start (exit {timer.poll()})")
                time.sleep(0.1)
            idle0 = time.time()
            time.sleep(IDLE_S)
            idle1 = dump0 = time.time()
            path = tmp / "dump"
            c.dump_cluster_state(str(path), write_from_scheduler=CASES[case])
            dump1 = time.time()
            time.sleep(AFTER_S)
            stop.write_text("stop")
            timer.wait(timeout)
            got = json.loads(out.read_text())
            del stuck
        check_dump(tmp / "dump.msgpack.gz", n_tasks)
        idle, n_idle = window_median(got["samples"], idle0, idle1)
        during, n_during = window_median(got["samples"], dump0, dump1)
        rec.update(idle_median_s=idle, dump_median_s=during, n_idle=n_idle, n_dump=n_during,
                   ratio=(during / idle) if idle and during else None, dump_s=dump1 - dump0,
                   wrong=got["wrong"], **dump_log(sched))
        rec["ok"] = got["wrong"] == 0 and n_idle > 0 and n_during > 0
        if not rec["ok"]:
            rec["error"] = f"{got['wrong']} wrong results, {n_idle} idle and {n_during} dump round trips"
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        record_failure(rec, e, tmp.parent / "failures.log", f"{case} {kind}",
                       f"--- scheduler\n{sched.logs()}\n{workers.logs()}")
    finally:
        if timer is not None and timer.poll() is None:
            timer.kill()
            timer.wait(10)
        workers.stop()
        sched.stop()
    return rec


def run_all(tmp: Path, cases: list[str], repetitions: int, smoke: bool, timeout: float,
            on_record=lambda results: None, schedulers: tuple[str, ...] = ("go",)) -> list[dict]:
    """Interleaved: for each repetition, each case, each scheduler."""
    def describe(rec: dict) -> str:
        return (f"idle {rec['idle_median_s'] * 1e3:6.2f} ms, during the dump {rec['dump_median_s'] * 1e3:6.2f} ms "
                f"({rec['ratio']:.2f}x), dump {rec['dump_s']:.2f} s")

    return run_interleaved(
        tmp, NAME, cases, repetitions, lambda case, rep: schedulers,
        lambda case, kind, d, prof: one_run(case, kind, SMOKE_TASKS if smoke else TASKS, d, timeout),
        describe, on_record)


# ---- report ------------------------------------------------------------------

def markdown(results: list[dict], machine: dict) -> str:
    def ms(v):
        return "–" if v is None else f"{v * 1e3:.2f}"

    lines = [
        "# A cluster dump while another client works",
        "",
        f"Command: `{machine.get('command', '')}`  ",
        f"Machine: {machine.get('machine', '')}, Python {machine.get('python', '')}  ",
        f"Started: {machine.get('started', '')}; 1 stock worker x 2 threads, no nanny; "
        f"{results[0]['tasks'] if results else TASKS} tasks held on the scheduler; the other client's "
        "submit(inc, i).result() round trips timed one after another.",
        "",
        "Per case and scheduler: the median over runs of each run's median round trip in the idle "
        f"window ({IDLE_S:.0f} s before the dump) and while the dump was written, their ratio (the claim: "
        "within 2x), and the dump's duration.",
        "",
        "| case | scheduler | runs ok | idle median ms | during the dump ms | ratio (runs) | dump s | lock held ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["case"], r["scheduler"]), []).append(r)
    for (case, kind), runs in groups.items():
        ok = [r for r in runs if r["ok"]]

        def med(f):
            vals = [r[f] for r in ok if r.get(f) is not None]
            return statistics.median(vals) if vals else None

        ratios = ", ".join(f"{r['ratio']:.2f}" for r in ok if r.get("ratio") is not None)
        ratio, locked, dump_s = med("ratio"), med("locked_ms"), med("dump_s")
        lines.append(f"| {case} | {kind} | {len(ok)}/{len(runs)} | {ms(med('idle_median_s'))} | "
                     f"{ms(med('dump_median_s'))} | {'–' if ratio is None else f'{ratio:.2f}'} ({ratios}) | "
                     f"{'–' if dump_s is None else f'{dump_s:.2f}'} | {'–' if locked is None else f'{locked:.1f}'} |")
    lines += runs_table(results, [
        ("idle ms", lambda r: ms(r.get("idle_median_s"))),
        ("dump ms", lambda r: ms(r.get("dump_median_s"))),
        ("ratio", lambda r: "–" if r.get("ratio") is None else f"{r['ratio']:.2f}"),
        ("round trips idle/dump", lambda r: f"{r.get('n_idle', '–')}/{r.get('n_dump', '–')}"),
        ("dump s", lambda r: "–" if r.get("dump_s") is None else f"{r['dump_s']:.2f}"),
        ("lock held ms", lambda r: "–" if r.get("locked_ms") is None else f"{r['locked_ms']:.1f}"),
        ("written ms", lambda r: "–" if r.get("written_ms") is None else f"{r['written_ms']:.0f}"),
        ("MiB", lambda r: "–" if r.get("bytes") is None else f"{r['bytes'] / 2**20:.1f}"),
    ])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    slim = [{k: v for k, v in r.items() if k != "traceback"} for r in results]
    write_named(out, NAME, slim, machine, markdown(results, machine))
