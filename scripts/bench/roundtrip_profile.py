"""One round trip, stage by stage, with timestamps from every side: where
the time of `client.submit(inc, i).result()` goes, on the Go scheduler and on
the Python one.

    .venv/bin/python scripts/bench/roundtrip_profile.py [--schedulers py,go] [--round-trips 200]

Each scheduler gets a fresh cluster (2 stock workers x 2 threads, no nanny)
whose client and workers import roundtrip_trace.py, which records every
message they read or write; the Python scheduler preloads it too, the Go
scheduler logs the same records at --log-level trace. All clocks are this
machine's wall clock. For each round trip the stages are found by the
task's key and the time between consecutive events is attributed:

    client submit -> update-graph written       client
    update-graph written -> read by scheduler   wire
    update-graph read -> compute-task written   scheduler (Go: helper round trip + engine, shown apart)
    compute-task written -> read by worker      wire
    worker: compute-task read -> task-finished  worker
    task-finished written -> read by scheduler  wire
    task-finished read -> key-in-memory written scheduler
    key-in-memory written -> read by client     wire
    key-in-memory read -> gather written        client
    gather written -> read by scheduler         wire
    gather read -> reply written                scheduler (get_data to the worker and back inside)
    reply written -> read by client             wire
    reply read -> result returned               client

Prints the median of each stage over the round trips (after 20 untimed), per
scheduler, and writes the table to --out if given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from procs import Scheduler, Workers, python_env  # noqa: E402

# (stage, from event, to event); an event is (side, direction, op) or the
# client's own "start"/"end". Events are matched in time order inside the
# round trip; "last task-finished" is the last one before key-in-memory.
STAGES = [
    ("client: call -> update-graph written", "start", ("c", "w", "update-graph")),
    ("wire: update-graph to scheduler", ("c", "w", "update-graph"), ("s", "r", "update-graph")),
    ("scheduler: update-graph -> first compute-task", ("s", "r", "update-graph"), ("s", "w", "compute-task")),
    ("tasks: first compute-task -> last task-finished read", ("s", "w", "compute-task"), "last-finished"),
    ("scheduler: task-finished -> key-in-memory", "last-finished", ("s", "w", "key-in-memory")),
    ("wire: key-in-memory to client", ("s", "w", "key-in-memory"), ("c", "r", "key-in-memory")),
    ("client: key-in-memory -> gather written", ("c", "r", "key-in-memory"), ("c", "w", "gather")),
    ("wire: gather to scheduler", ("c", "w", "gather"), ("s", "r", "gather")),
    ("scheduler: gather -> reply written", ("s", "r", "gather"), ("s", "w", "reply")),
    ("wire: reply to client", ("s", "w", "reply"), ("c", "r", "reply")),
    ("client: reply -> result", ("c", "r", "reply"), "end"),
]
# in a one-task round trip the tasks stage splits into these
TASK_DETAIL = [
    ("  wire: compute-task to worker", ("s", "w", "compute-task"), ("w", "r", "compute-task")),
    ("  worker: compute-task -> task-finished", ("w", "r", "compute-task"), ("w", "w", "task-finished")),
    ("  wire: task-finished to scheduler", ("w", "w", "task-finished"), "last-finished"),
]
EXTRA = ["(Go engine time in the round trip)", "(Go helper round trip)", "total"]


def make_case(case: str, client):
    """(run one round trip, expected result) for a case of latency_client.py."""
    import latency_client

    return latency_client.make_case(case, client)


def inc(x):
    return x + 1


def load_events(trace_dir: Path, go_log: Path | None) -> list[dict]:
    """Every record, with its side: c(lient), s(cheduler) or w(orker)."""
    events = []
    for f in trace_dir.glob("*.jsonl"):
        side = {"client": "c", "scheduler": "s", "worker": "w"}[f.name.split("-")[0]]
        lines = f.read_text().splitlines()
        for i, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1:  # the process was stopped while writing its last record
                    print(f"{f.name}: last record cut short, skipped", file=sys.stderr)
                    continue
                raise
            rec["side"] = side
            events.append(rec)
    if go_log is not None:
        for line in go_log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            rec = json.loads(line)
            if rec.get("message") == "message":
                events.append({"ns": rec["ns"], "dir": rec["dir"], "peer": rec["peer"], "ops": rec["ops"], "side": "s"})
            elif rec.get("message") == "engine":
                events.append({"ns": rec["ns"], "engine_ns": rec["engine_ns"], "stimulus": rec["stimulus"],
                               "side": "s", "dir": "e", "ops": []})
    events.sort(key=lambda e: e["ns"])
    return events


def find(events: list[dict], i0: int, side: str, direction: str, op: str, peer: str | None = None) -> int:
    """Index of the first event at or after i0 on side/direction with op (a
    "reply" is a dict whose status is OK), and with that peer if given."""
    want = "status:OK" if op == "reply" else op
    for i in range(i0, len(events)):
        e = events[i]
        if (e["side"] == side and e["dir"] == direction and (peer is None or e.get("peer") == peer)
                and any(o.partition(" ")[0] == want for o in e["ops"])):
            return i
    raise LookupError(f"no {side}/{direction} {op} after event {i0}")


def stages_of(events: list[dict], marks: list[dict]) -> list[dict]:
    """Per round trip: stage -> seconds. Events are looked for one after the
    other inside the round trip's window."""
    out = []
    for m in marks:
        window = [e for e in events if m["start"] <= e["ns"] <= m["end"]]
        t = {"start": m["start"], "end": m["end"]}
        try:
            i = 0
            for ev in [("c", "w", "update-graph"), ("s", "r", "update-graph"), ("s", "w", "compute-task")]:
                i = find(window, i, *ev)
                t[ev] = window[i]["ns"]
            first_compute = i
            i = find(window, i, "s", "w", "key-in-memory")
            t[("s", "w", "key-in-memory")] = window[i]["ns"]
            finished = [e["ns"] for e in window[first_compute:i]
                        if e["side"] == "s" and e["dir"] == "r" and any(o.startswith("task-finished") for o in e["ops"])]
            t["last-finished"] = finished[-1]
            for ev in [("c", "r", "key-in-memory"), ("c", "w", "gather"), ("s", "r", "gather")]:
                i = find(window, i, *ev)
                t[ev] = window[i]["ns"]
            i = find(window, i, "s", "w", "reply", peer=window[i]["peer"])  # to the gathering connection
            t[("s", "w", "reply")] = window[i]["ns"]
            i = find(window, i, "c", "r", "reply")
            t[("c", "r", "reply")] = window[i]["ns"]
            if len(finished) == 1:
                j = find(window, first_compute, "w", "r", "compute-task")
                t[("w", "r", "compute-task")] = window[j]["ns"]
                t[("w", "w", "task-finished")] = window[find(window, j, "w", "w", "task-finished")]["ns"]
        except (LookupError, IndexError) as e:
            print(f"round trip at {m['start']}: {e!r}", file=sys.stderr)
            continue
        row = {name: (t[b] - t[a]) / 1e9 for name, a, b in STAGES}
        if len(finished) == 1:
            row.update({name: (t[b] - t[a]) / 1e9 for name, a, b in TASK_DETAIL})
        eng = [e for e in window if e["dir"] == "e"]
        row[EXTRA[0]] = sum(e["engine_ns"] for e in eng) / 1e9 if eng else None
        ug = [e for e in eng if e["stimulus"].endswith("UpdateGraph")]
        mat = [e for e in eng if e["stimulus"].endswith("GraphMaterialized")]
        row[EXTRA[1]] = (mat[0]["ns"] - ug[0]["ns"] - ug[0]["engine_ns"]) / 1e9 if mat and ug else None
        row["total"] = (m["end"] - m["start"]) / 1e9
        out.append(row)
    return out


def profile(kind: str, case: str, round_trips: int, tmp: Path, pause_ms: float = 0.0) -> list[dict]:
    trace_dir = tmp / "trace"
    trace_dir.mkdir()
    env = {"ROUNDTRIP_TRACE_DIR": str(trace_dir), "PYTHONPATH": str(BENCH)}
    sched = Scheduler(kind, {**env, "ROUNDTRIP_TRACE_ROLE": "scheduler"}, tmp / "s",
                      log_level="trace" if kind.startswith("go") else "info")
    if kind == "py":
        sched.command = (lambda orig: lambda: [*orig(), "--preload", "roundtrip_trace"])(sched.command)
    sched.launch()
    os.environ.update(python_env({**env, "ROUNDTRIP_TRACE_ROLE": "worker"}))
    workers = Workers(tmp, sched.scheduler_file, 2, 2 * 2**30, nthreads=2, nanny=False)
    workers.start = (lambda w: lambda: start_traced_workers(w))(workers)
    workers.start()
    marks = []
    try:
        sched.wait_ready(60)
        os.environ["ROUNDTRIP_TRACE_ROLE"] = "client"
        import roundtrip_trace  # noqa: F401 - patches TCP in this (the client's) process
        from distributed import Client

        if case == "submit-fast-client":
            import latency_client

            latency_client.fast_client_stream()
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
            one = make_case(case, c)
            for i in range(20):
                assert one(-1 - i)
            for i in range(round_trips):
                if pause_ms:
                    time.sleep(pause_ms / 1e3)
                t0 = time.time_ns()
                assert one(i)
                marks.append({"start": t0, "end": time.time_ns()})
            time.sleep(0.5)
        roundtrip_trace._flush()
    finally:
        workers.stop()
        sched.stop()
    events = load_events(trace_dir, sched.log_path if kind.startswith("go") else None)
    if os.environ.get("ROUNDTRIP_DUMP"):  # a file: one round trip's events, in ms from its start
        m = marks[len(marks) // 2]
        dump = open(os.environ["ROUNDTRIP_DUMP"], "w")
        for e in events:
            if m["start"] - 2_000_000 <= e["ns"] <= m["end"] + 1_000_000:
                print(f"{(e['ns'] - m['start']) / 1e6:9.3f} {e['side']} {e['dir']} {e.get('peer', '')[-6:]} "
                      f"{e.get('stimulus', '')} {e['ops'][:3]}", file=dump)
    return stages_of(events, marks)


def start_traced_workers(w: Workers) -> Workers:
    """Workers.start with --preload roundtrip_trace."""
    from procs import VENV_BIN

    for i in range(w.n):
        with open(w.tmp / f"worker-{i}.log", "wb") as log:
            w.procs.append(subprocess.Popen(
                [str(VENV_BIN / "dask"), "worker", "--scheduler-file", str(w.scheduler_file), "--name", f"w{i}",
                 "--nthreads", str(w.nthreads), "--host", "127.0.0.1", "--no-dashboard", "--memory-limit",
                 str(w.memory_limit), "--local-directory", str(w.tmp / f"dask-w{i}"), "--no-nanny",
                 "--preload", "roundtrip_trace"],
                stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)))
    return w


def table(results: dict[str, list[dict]]) -> str:
    kinds = list(results)
    names = [s[0] for s in STAGES[:4]] + [s[0] for s in TASK_DETAIL] + [s[0] for s in STAGES[4:]] + EXTRA
    lines = ["| stage | " + " | ".join(f"{k} median ms" for k in kinds) + " |",
             "|---|" + "---:|" * len(kinds)]
    for n in names:
        cells = []
        for k in kinds:
            vals = [r[n] for r in results[k] if r.get(n) is not None]
            cells.append(f"{statistics.median(vals) * 1e3:.3f}" if vals else "–")
        if any(c != "–" for c in cells):
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Round trips profiled: " + ", ".join(f"{k} {len(results[k])}" for k in kinds))
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schedulers", default="py,go")
    ap.add_argument("--case", default="submit", help="submit, array-sum-4 or slice-mean (latency_client.py)")
    ap.add_argument("--round-trips", type=int, default=200)
    ap.add_argument("--pause-ms", type=float, default=0.0,
                    help="an untimed pause before each call (latency_client.py --pause-ms)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="profile the schedulers this many times, interleaved; the table takes every round trip")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    results: dict[str, list[dict]] = {}
    for _ in range(a.rounds):
        for kind in a.schedulers.split(","):
            with tempfile.TemporaryDirectory() as d:
                # each scheduler in a fresh process: the client's TCP patch and env are per process
                proc = subprocess.run([sys.executable, __file__, "--one", kind, a.case, str(a.round_trips), d,
                                       str(a.pause_ms)], capture_output=True, text=True)
                if proc.returncode != 0 or "round trip" in proc.stderr:
                    print(proc.stderr[-3000:], file=sys.stderr)
                if proc.returncode != 0:
                    return 1
                results.setdefault(kind, []).extend(json.loads(proc.stdout.strip().splitlines()[-1]))
    text = table(results)
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--one":
        rows = profile(sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]), float(sys.argv[6]))
        print(json.dumps(rows))
        raise SystemExit(0)
    raise SystemExit(main())
