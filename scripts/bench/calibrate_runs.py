#!/usr/bin/env python
"""Benchmark runs that also record what the simulator is calibrated from
(scripts/sim/calibrate.py).

    .venv/bin/python scripts/bench/calibrate_runs.py \\
        --workloads anom-mean,basic-sum,climactic-mean,vorticity \\
        --configs go-noqueue,go-queuing,go-queuing-coassign --repetitions 3 --scale 0.5 \\
        --results scripts/sim/results/calibration

Each run is the benchmark's own (harness.run_workload on a fresh
harness.Cluster: wall time, the workers' summed RSS every 100 ms from
outside), so the records are interchangeable with scripts/bench's
latest.json. In addition, for every run:

* a WorkerPlugin on every stock worker logs each task that reaches memory
  (prefix, compute start/stop, output nbytes, input nbytes) and, every
  50 ms, the worker's managed bytes (WorkerState.nbytes), its process RSS,
  the executing tasks (prefix, input bytes) and the bytes in flight to it:
  the managed vs unmanaged split over time;
* the workers' transfer_incoming_log (every transfer: bytes, start, stop,
  source), with the log length raised so that none is dropped;
* the workers' digests_total difference (distributed's fine metrics:
  execute thread-cpu / thread-noncpu seconds per prefix, gather-dep
  deserialize / network seconds, ...);
* CPU seconds of the worker processes, of the scheduler, and of the whole
  machine (psutil.cpu_times), so that other load on the machine during a
  run is visible (foreign_cpu_s).

Runs are ordered repetition-major (all workloads and configurations once,
then again), so an interrupted session still has complete repetitions.
Writes RESULTS/records.json (bench records), RESULTS/timeseries.json and
RESULTS/traces/WORKLOAD--CONFIG--REP.json.gz, after every run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

# every transfer kept in transfer_incoming_log (default 1000 entries)
os.environ.setdefault("DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH", "200000")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from distributed.diagnostics.plugin import WorkerPlugin  # noqa: E402
from harness import Cluster, run_workload  # noqa: E402
from procs import known_config  # noqa: E402
from workloads import WORKLOADS, Context  # noqa: E402

PLUGIN = "sim-calibration"


class Recorder(WorkerPlugin):
    """Per-task and per-instant records on one worker. The lists grow for
    the whole run; read and cleared by collect(). A sampler thread reads,
    every 50 ms, the worker's managed bytes (WorkerState.nbytes), its RSS,
    the prefixes of the tasks executing and the bytes of transfers in
    flight to it: unmanaged memory (RSS - managed) attributed to what ran
    at that instant. Reads of the state from another thread are racy but
    only of sizes and a set copied at once; a failed read skips a sample."""

    name = PLUGIN

    def setup(self, worker):
        import threading

        import psutil as _ps

        self.worker = worker
        self.proc = _ps.Process()
        self.tasks: list = []
        self.samples: list = []
        self.stop = threading.Event()
        threading.Thread(target=self._sample, name="sim-calibration", daemon=True).start()

    def teardown(self, worker):
        self.stop.set()

    def _sample(self):
        import time as _t

        from distributed.utils import key_split

        while not self.stop.wait(0.05):
            try:
                ws = self.worker.state
                ex = [(key_split(ts.key), sum((d.nbytes or 0) for d in ts.dependencies)) for ts in list(ws.executing)]
                self.samples.append([_t.time(), ws.nbytes, self.proc.memory_info().rss, ex,
                                     ws.transfer_incoming_bytes])
            except Exception:  # noqa: BLE001 - a missed sample
                pass

    def transition(self, key, start, finish, *args, **kwargs):
        from distributed.utils import key_split

        if finish != "memory" or start != "executing":
            return
        ts = self.worker.state.tasks.get(key)
        if ts is None:
            return
        comp = [s for s in ts.startstops if s.get("action") == "compute"]
        c0, c1 = (comp[-1]["start"], comp[-1]["stop"]) if comp else (None, None)
        nin = sum((d.nbytes or 0) for d in ts.dependencies)
        self.tasks.append([key_split(key), c0, c1, ts.nbytes or 0, nin, len(ts.dependencies)])


def collect(dask_worker) -> dict:
    """Everything the Recorder and the worker logged, then cleared."""
    p = dask_worker.plugins.get(PLUGIN)
    out = {"tasks": [], "samples": []}
    if p is not None:
        out = {"tasks": p.tasks, "samples": p.samples}
        p.tasks, p.samples = [], []
    out["transfers"] = [
        {"start": t["start"], "stop": t["stop"], "total": t["total"], "n_keys": len(t["keys"]), "who": t["who"]}
        for t in dask_worker.transfer_incoming_log]
    dask_worker.transfer_incoming_log.clear()
    out["digests"] = {repr(k): v for k, v in dask_worker.digests_total.items()}
    return out


def digests(dask_worker) -> dict:
    return {repr(k): v for k, v in dask_worker.digests_total.items()}


def proc_cpu(pids) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def machine_cpu() -> float:
    t = psutil.cpu_times()
    return t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def scheduler_binary(exe) -> dict | None:
    """Which scheduler build ran (the Go binary is rebuilt while work on
    the engine goes on): path, mtime, size."""
    try:
        st = exe.stat()
    except (OSError, AttributeError):
        return None
    return {"path": str(exe), "mtime": st.st_mtime, "size": st.st_size}


def one_run(config, name, ctx, rep, args, tmp):
    with Cluster(config, Path(tempfile.mkdtemp(prefix=f"{name}-{config}-{rep}-", dir=tmp)),
                 args.workers, args.memory_limit) as cluster:
        c = cluster.client
        c.register_plugin(Recorder(), name=PLUGIN)
        c.run(collect)  # drop the warm-up's records
        d0 = c.run(digests)
        wpids = cluster.workers.worker_pids
        spid = cluster.scheduler.proc.pid
        sched_pids = [spid] + [p.pid for p in psutil.Process(spid).children(recursive=True)]
        try:
            exe = Path(psutil.Process(spid).exe())
        except psutil.Error:
            exe = None
        w0, s0, m0, t0 = proc_cpu(wpids), proc_cpu(sched_pids), machine_cpu(), time.time()
        la0 = os.getloadavg()
        rec, series = run_workload(cluster, name, ctx, rep, args.timeout)
        w1, s1, m1, t1 = proc_cpu(wpids), proc_cpu(sched_pids), machine_cpu(), time.time()
        per_worker = c.run(collect)
        d1 = per_worker
        client_cpu = psutil.Process().cpu_times()
    for addr, w in per_worker.items():
        before = d0.get(addr, {})
        w["digests"] = {k: v - before.get(k, 0.0) for k, v in d1[addr]["digests"].items()
                        if v - before.get(k, 0.0) > 0}
    own = (w1 - w0) + (s1 - s0)
    rec.update(worker_cpu_s=w1 - w0, scheduler_side_cpu_s=s1 - s0, machine_cpu_s=m1 - m0,
               foreign_cpu_s=max(0.0, (m1 - m0) - own), run_t0=t0, run_t1=t1,
               loadavg_before=la0, loadavg_after=os.getloadavg(),
               client_cpu_total_s=client_cpu.user + client_cpu.system,
               scheduler_binary=scheduler_binary(exe))
    return rec, series, per_worker


def main(argv=None) -> int:
    from dask.utils import parse_bytes

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="anom-mean,basic-sum,climactic-mean,vorticity")
    ap.add_argument("--configs", default="go-noqueue,go-queuing,go-queuing-coassign")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--deadline", default="", help="UTC HH:MM: start no run that would end after it "
                                                   "(estimated from the longest run so far)")
    ap.add_argument("--results", type=Path, default=Path(__file__).resolve().parents[1] / "sim" / "results" / "calibration")
    args = ap.parse_args(argv)
    args.memory_limit = parse_bytes(args.memory_limit)
    workloads = [w for w in args.workloads.split(",") if w]
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if not known_config(c):
            ap.error(f"unknown configuration {c!r}")
    ctx = Context(memory=args.workers * args.memory_limit, nthreads=args.workers, smoke=False, scale=args.scale)
    (args.results / "traces").mkdir(parents=True, exist_ok=True)
    rec_path, ts_path = args.results / "records.json", args.results / "timeseries.json"
    records = json.loads(rec_path.read_text()) if rec_path.exists() else []
    series = json.loads(ts_path.read_text()) if ts_path.exists() else {}
    done = {(r["workload"], r["configuration"], r["repetition"]) for r in records if r.get("ok")}
    tmp = Path(tempfile.mkdtemp(prefix="calib-"))
    longest = 0.0
    for rep in range(args.repetitions):
        for name in workloads:
            for config in configs:
                if (name, config, rep) in done:
                    continue
                if args.deadline:
                    hh, mm = map(int, args.deadline.split(":"))
                    now = time.gmtime()
                    left = (hh * 60 + mm) * 60 - (now.tm_hour * 3600 + now.tm_min * 60 + now.tm_sec)
                    if left < longest * 1.2:
                        print(f"deadline {args.deadline} UTC: stopping before {name} {config} rep {rep}", flush=True)
                        return 0
                t = time.time()
                rec, ts, per_worker = one_run(config, name, ctx, rep, args, tmp)
                longest = max(longest, time.time() - t)
                rec["command"] = " ".join(["scripts/bench/calibrate_runs.py", *(argv or sys.argv[1:])])
                records = [r for r in records if (r["workload"], r["configuration"], r["repetition"]) !=
                           (name, config, rep)] + [rec]
                series[f"{name}|{config}|{rep}"] = ts
                with gzip.open(args.results / "traces" / f"{name}--{config}--{rep}.json.gz", "wt") as f:
                    json.dump({"record": {k: v for k, v in rec.items() if k != "traceback"},
                               "workers": per_worker}, f)
                rec_path.write_text(json.dumps(records, indent=1))
                ts_path.write_text(json.dumps(series))
                print(f"{name:15} {config:20} rep {rep}: ok={rec['ok']} {rec.get('wall_s', 0):6.1f} s "
                      f"peak {rec.get('peak_memory_bytes', 0) / 2**30:5.2f} GiB  worker cpu {rec['worker_cpu_s']:6.1f} s "
                      f"foreign cpu {rec['foreign_cpu_s']:5.1f} s {rec.get('error') or ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
