#!/usr/bin/env python
"""What the largest worker holds at its peak, and why: the trace behind a
single worker's memory peak (co-assignment's cost on the anomaly).

    .venv/bin/python scripts/bench/trace_peak.py anom-persist --configs py-queuing,go-queuing-coassign --scale 1

One fresh cluster per configuration, as the benchmark runs them, with the
scheduler's transition log long enough for every task's story
(distributed.admin.low-level-log-length). While the workload runs, each
worker's RSS is sampled every 100 ms (procs.Sampler) and, every
--interval seconds, a second Client asks each worker which keys it holds
in memory (their nbytes; whether fetched) and which it executes; the task
stream records where and when every task ran. After the run:

* the worker with the highest peak RSS of its own, the instant of that
  peak, and the poll nearest it;
* what that worker held then, by task prefix: keys, MiB, how many were
  fetched copies, and why each was still held: the consumers that had not
  started by then, and, for each, the inputs it still lacked and the worker
  that computed (or was yet to compute) them;
* for the held keys that are roots, their placement reasons from the
  scheduler's story (ours records the rule and, with co-assignment, the
  family: "co-assignment: family 7's worker"), counted.

Writes RESULTS/peak-WORKLOAD.json (--results, default
scripts/bench/results/diagnostics) and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import Cluster  # noqa: E402
from procs import Sampler, known_config, path_label  # noqa: E402
from trace_placement import dependencies  # noqa: E402
from workloads import WORKLOADS, Context  # noqa: E402

LOG_LENGTH = {"DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH": "2000000"}


def kstr(key) -> str:
    """A key as one string, whether it came as a tuple (worker, task
    stream) or a list (the story, over msgpack)."""
    return str(tuple(key)) if isinstance(key, (list, tuple)) else str(key)


def held_keys(dask_worker) -> dict:
    """The keys a worker holds in memory ([key, nbytes, fetched]) and executes."""
    mem, ex = [], []
    for ts in list(dask_worker.state.tasks.values()):
        if ts.state == "memory":
            mem.append([ts.key, ts.nbytes or 0, ts.run_spec is None])
        elif ts.state in ("executing", "long-running"):
            ex.append(ts.key)
    return {"memory": mem, "executing": ex}


def prefix(key: str) -> str:
    """key_split's prefix, with the first 4 characters of the layer's token
    for a tuple key (two layers of one name, anom-persist's two
    mean_chunk, are then told apart)."""
    from dask.utils import key_split

    if not key.startswith("("):
        return key_split(key)
    name = eval(key)[0]  # noqa: S307 - our own str(tuple)
    token = name.rsplit("-", 1)[-1]
    return f"{key_split(name)}@{token[:4]}" if len(token) >= 16 else key_split(name)


def run_one(config: str, workload: str, ctx: Context, interval: float, tmp: Path) -> dict:
    from distributed import Client, get_task_stream

    prepared = WORKLOADS[workload](ctx)
    deps = {kstr(k): {kstr(d) for d in ds} for k, ds in dependencies(prepared).items()}
    polls: list[dict] = []
    stop = threading.Event()
    d = Path(tempfile.mkdtemp(prefix=f"peak-{path_label(config)}-", dir=tmp))
    with Cluster(config, d, 4, 2**30, extra_env=LOG_LENGTH) as c:
        observer = Client(scheduler_file=str(c.scheduler.scheduler_file), timeout=60)
        pids = c.client.run(os.getpid)
        sampler = Sampler(c.workers.worker_pids, c.scheduler.proc.pid)

        def poll():
            while not stop.is_set():
                t = time.monotonic() - sampler.t0
                try:
                    polls.append({"t": round(t, 3), "workers": observer.run(held_keys)})
                except Exception as e:  # noqa: BLE001 - a missed poll, not a failed trace
                    polls.append({"t": round(t, 3), "error": repr(e)})
                stop.wait(interval)

        sampler.start()
        poller = threading.Thread(target=poll, name="peak-poller", daemon=True)
        poller.start()
        t_start = time.time()
        try:
            with get_task_stream(client=c.client) as stream:
                value = prepared.run(c.client, 900)
        finally:
            stop.set()
            poller.join(10)
            sampler.stop()
        wall = time.monotonic() - sampler.t0
        records = list(stream.data)
        # the scheduler's story alone (Client.story also asks every worker)
        story = c.client.sync(c.client.scheduler.get_story,
                              keys_or_stimuli=[eval(k) if k.startswith("(") else k for k in deps])  # noqa: S307
        observer.close()
    ran = {}
    for r in records:
        comp = [s for s in r.get("startstops", ()) if s.get("action") == "compute"]
        if comp:
            ran[kstr(r["key"])] = {"worker": r["worker"], "start": comp[0]["start"] - t_start,
                                   "stop": comp[-1]["stop"] - t_start}
    placed = {}
    for entry in story:
        if len(entry) > 6 and entry[6] and entry[2] == "processing":
            placed[kstr(entry[0])] = entry[6].get("reason") or entry[6].get("rule")
    worker_of_pid = {pid: addr for addr, pid in pids.items()}
    return {"configuration": config, "workload": workload, "wall_s": wall, "ok": prepared.check(value) is None,
            "times": sampler.times, "per_worker_rss": sampler.per_worker_rss,
            "workers": [worker_of_pid.get(p.pid, str(p.pid)) for p in sampler.workers],
            "polls": polls, "ran": ran, "placed": placed, "deps": {k: sorted(v) for k, v in deps.items()}}


def peak_of(run: dict) -> tuple[str, float, int]:
    """(worker, time, RSS) of the highest single-worker sample."""
    best = (None, 0.0, -1)
    for t, row in zip(run["times"], run["per_worker_rss"]):
        for w, rss in zip(run["workers"], row):
            if rss > best[2]:
                best = (w, t, rss)
    return best


def summarize(run: dict, top: int = 8) -> dict:
    worker, t_peak, rss = peak_of(run)
    polls = [p for p in run["polls"] if "workers" in p]
    poll = min(polls, key=lambda p: abs(p["t"] - t_peak))
    t = poll["t"]
    # the task stream's clock is the wall clock since the run started: the
    # sampler started just before it, so both count from about the same instant
    held = poll["workers"].get(worker, {"memory": [], "executing": []})
    consumers = defaultdict(set)
    for k, ds in run["deps"].items():
        for dk in ds:
            consumers[dk].add(k)
    ran = run["ran"]
    by_prefix: dict[str, dict] = {}
    why = defaultdict(Counter)  # prefix -> reason held -> count
    lacking_on = defaultdict(Counter)  # prefix -> worker (or "not run") of a consumer's missing input
    for key, nbytes, fetched in held["memory"]:
        k = kstr(key)
        p = prefix(k)
        row = by_prefix.setdefault(p, {"keys": 0, "mib": 0.0, "fetched": 0})
        row["keys"] += 1
        row["mib"] += nbytes / 2**20
        row["fetched"] += bool(fetched)
        waiting = [c for c in consumers.get(k, ()) if not (c in ran and ran[c]["start"] <= t)]
        if not consumers.get(k):
            why[p]["a result (no consumer)"] += 1
            continue
        if not waiting:
            why[p]["every consumer started"] += 1
            continue
        for c in waiting:
            missing = [dk for dk in run["deps"].get(c, ()) if not (dk in ran and ran[dk]["stop"] <= t)]
            if not missing:
                why[p][f"{prefix(c)} ready, not started"] += 1
            else:
                why[p][f"{prefix(c)} lacks {len(missing) > 1 and 'inputs' or 'an input'}: "
                       + ", ".join(sorted({prefix(m) for m in missing}))] += 1
                for m in missing:
                    lacking_on[p]["not yet run" if m not in ran else ran[m]["worker"]] += 1
    roots_held = [kstr(k) for k, _, f in held["memory"] if not run["deps"].get(kstr(k)) and not f]
    reasons = Counter(run["placed"].get(k, "?") for k in roots_held)
    families = Counter(r.split("family ")[1].split("'")[0] for r in reasons.elements() if "family " in r)
    totals = [sum(nb for _, nb, _ in w["memory"]) / 2**20 for w in poll["workers"].values()]
    return {"worker": worker, "peak_rss_mib": rss / 2**20, "t_peak": t_peak, "t_poll": t,
            "held_keys": sorted(kstr(k) for k, _, _ in held["memory"]),
            "held_mib_per_worker": {w: round(m) for w, m in zip(poll["workers"], totals)},
            "by_prefix": dict(sorted(by_prefix.items(), key=lambda kv: -kv[1]["mib"])[:top]),
            "why": {p: dict(c.most_common(6)) for p, c in why.items()},
            "missing_inputs_on": {p: dict(c) for p, c in lacking_on.items()},
            "roots_held_reasons": dict(reasons.most_common(6)), "roots_held_families": dict(families.most_common())}


def over_time(run: dict) -> list[dict]:
    """Per poll: the MiB each worker held, by prefix (the JSON's record of
    the whole run, which the summary only samples at the peak)."""
    out = []
    for p in run["polls"]:
        if "workers" not in p:
            continue
        row = {}
        for w, held in p["workers"].items():
            acc = Counter()
            for key, nbytes, _ in held["memory"]:
                acc[prefix(kstr(key))] += nbytes / 2**20
            row[w] = {k: round(v, 1) for k, v in acc.items()}
        out.append({"t": p["t"], "held_mib": row})
    return out


def text(run: dict, s: dict) -> str:
    lines = [f"{run['configuration']}: wall {run['wall_s']:.1f} s; largest worker {s['worker']} peaks at "
             f"{s['peak_rss_mib']:.0f} MiB RSS at t={s['t_peak']:.1f} s (poll at {s['t_poll']:.1f} s); "
             f"MiB of keys held per worker then: {s['held_mib_per_worker']}"]
    for p, row in s["by_prefix"].items():
        lines.append(f"    {p:32} {row['keys']:5} keys ({row['fetched']} fetched) {row['mib']:7.0f} MiB")
        for reason, n in s["why"].get(p, {}).items():
            lines.append(f"        {n:5} held: {reason}")
        if s["missing_inputs_on"].get(p):
            lines.append(f"        missing inputs computed on: {s['missing_inputs_on'][p]}")
    if s["roots_held_reasons"]:
        lines.append(f"    roots held, placed by: {s['roots_held_reasons']}")
    if s["roots_held_families"]:
        lines.append(f"    roots held, by family: {s['roots_held_families']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--configs", default="py-queuing,go-queuing-coassign")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--interval", type=float, default=0.25, help="seconds between two polls of the workers' keys")
    ap.add_argument("--results", type=Path, default=HERE / "results" / "diagnostics")
    ap.add_argument("--name", default=None, help="output file's stem (default peak-WORKLOAD)")
    args = ap.parse_args(argv)
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if not known_config(c):
            ap.error(f"unknown configuration {c!r}")
    ctx = Context(memory=4 * 2**30, nthreads=4, smoke=False, scale=args.scale)
    out = []
    with tempfile.TemporaryDirectory(prefix="trace-peak-") as tmp:
        for c in configs:
            run = run_one(c, args.workload, ctx, args.interval, Path(tmp))
            s = summarize(run)
            print(text(run, s), flush=True)
            out.append({"configuration": c, "wall_s": run["wall_s"], "ok": run["ok"], "summary": s,
                        "text": text(run, s), "over_time": over_time(run)})
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{args.name or 'peak-' + args.workload}.json").write_text(json.dumps(out, indent=1))
    return 0 if all(r["ok"] for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
