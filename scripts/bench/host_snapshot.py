"""What reading dask_scheduler.tasks costs at 100k tasks, and who waits.

    .venv/bin/python scripts/bench/host_snapshot.py [--tasks 100000] [--out FILE]

A Go scheduler (log level debug, for its "host snapshot" lines) with two
zero workers (cmd/dask-go-zero-worker: tasks finish on arrival) holds N
tasks in memory (client.map over N keys, persisted). Then, with the host
already started:

- run_on_scheduler(len(dask_scheduler.tasks)) five times: wall time of each
  call, and the scheduler's own figures per snapshot: "copied" (how long the
  engine's lock was held: State.DumpState) and "total" (copy, rows, encode);
- meanwhile another client runs submit().result() round trips in a loop:
  their median and worst latency while snapshots are being taken, against
  the same loop with no snapshot running.

Prints a JSON record and writes it to --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from cluster import GoScheduler, stop  # noqa: E402


def round_trips(address, stop_ev, out):
    from distributed import Client

    with Client(address, timeout=60) as c:
        i = 0
        while not stop_ev.is_set():
            t = time.perf_counter()
            c.submit(int, i, pure=False).result(timeout=60)  # zero workers answer 0
            out.append(time.perf_counter() - t)
            i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    subprocess.run(["go", "build", "-o", str(ROOT / "bin/dask-go-zero-worker"), "./cmd/dask-go-zero-worker"],
                   cwd=ROOT, check=True)
    from distributed import Client, wait

    tmp = Path(tempfile.mkdtemp(prefix="host-snapshot-"))
    sched = GoScheduler(tmp, "--log-level", "debug").start()
    zw = subprocess.Popen([str(ROOT / "bin/dask-go-zero-worker"), "--scheduler-file", str(sched.scheduler_file),
                           "--workers", "2", "--nthreads", "2"], stdout=open(tmp / "zw.log", "wb"),
                          stderr=subprocess.STDOUT)
    rec = {"tasks": a.tasks}
    try:
        with Client(sched.address, timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
            futs = c.map(int, range(a.tasks), key=[f"t-{i}" for i in range(a.tasks)])
            wait(futs, timeout=600)
            c.run_on_scheduler(lambda: 1)  # the host is up before anything is timed
            baseline: list[float] = []
            ev = threading.Event()
            t = threading.Thread(target=round_trips, args=(sched.address, ev, baseline))
            t.start()
            time.sleep(5)
            ev.set()
            t.join()
            during: list[float] = []
            ev = threading.Event()
            t = threading.Thread(target=round_trips, args=(sched.address, ev, during))
            t.start()
            calls = []
            for _ in range(5):
                s = time.perf_counter()
                n = c.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))
                calls.append(time.perf_counter() - s)
                assert n >= a.tasks, n
            ev.set()
            t.join()
        log = sched.logs()
        snaps = [json.loads(line) for line in log.splitlines() if '"host snapshot"' in line]
        rec.update({
            "len_tasks_call_s": [round(x, 3) for x in calls],
            # zerolog's durations are in milliseconds
            "snapshot_ms": [{"part": r["part"], "lock_held": r["copied"], "total": r["total"]} for r in snaps],
            "round_trip_ms_alone": {"median": round(1000 * statistics.median(baseline), 2),
                                    "max": round(1000 * max(baseline), 2), "n": len(baseline)},
            "round_trip_ms_during_snapshots": {"median": round(1000 * statistics.median(during), 2),
                                               "max": round(1000 * max(during), 2), "n": len(during)},
        })
    finally:
        stop(zw)
        sched.stop()
    print(json.dumps(rec, indent=1))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(rec, indent=1) + "\n")


if __name__ == "__main__":
    main()
