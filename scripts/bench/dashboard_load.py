"""Time to the first full render of the dashboard's /status page,
in headless Chromium, with the browser cache off (every load fetches the
page, its scripts and the data):

- idle: a Go scheduler with no workers and no tasks;
- million-waiting: the same scheduler holding a 1,000,000-task graph that
  waits (no workers: every task is queued on the scheduler);
- million-1000-workers (with --zero-workers): 1,000 fake workers
  (bin/dask-go-zero-worker) computing a 1,000,000-task graph while the page
  loads; also the page's own drawing cost per View over 10 s.

The figure is the page's `data-rendered` mark: performance.now() (ms since
navigation start) when the page has drawn its first View (dashboard.js).
Results go to --results (default scripts/bench/results/dashboard/):
dashboard_load.json (every load) and dashboard_load.md (medians).

    .venv/bin/python scripts/bench/dashboard_load.py [--repetitions 5] [--zero-workers]

Needs Debian's chromium, bin/dask-go-scheduler (built if stale) and, with
--zero-workers, bin/dask-go-zero-worker. Every process is started here and
stopped by its PID.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from browser import Browser, chromium_path  # noqa: E402
from cluster import GoScheduler, wait_for  # noqa: E402

RESULTS = ROOT / "scripts" / "bench" / "results" / "dashboard"


def persist_million(client, side: int = 1000):
    """Persist a side x side array of 1x1 chunks: side**2 tasks (one per
    chunk, the graph sent as an expression and materialized by the
    scheduler's helper). Returns the persisted collection: keep it, or the
    tasks are forgotten."""
    import dask.array as da

    return client.persist(da.ones((side, side), chunks=(1, 1)))


def state(base: str) -> tuple[dict, int, float]:
    t = time.perf_counter()
    with urllib.request.urlopen(f"{base}/dashboard/state.json", timeout=30) as r:
        body = r.read()
    return json.loads(body), len(body), time.perf_counter() - t


def load_status(browser: Browser, base: str, settle: float = 0) -> dict:
    """One cold load of /status in a fresh tab: the render mark, navigation
    timings, what the page counted, and (with settle) its drawing cost."""
    page = browser.page()
    try:
        page.send("Network.enable")
        page.send("Network.setCacheDisabled", {"cacheDisabled": True})
        t = time.perf_counter()
        page.navigate(f"{base}/status")
        rendered = float(page.wait_for("document.body && document.body.dataset.rendered", 60, "the first render"))
        wall = time.perf_counter() - t
        if settle:
            time.sleep(settle)
        facts = page.evaluate("""(() => {
          const nav = performance.getEntriesByType('navigation')[0];
          return {
            response_end_ms: nav.responseEnd, dom_content_loaded_ms: nav.domContentLoadedEventEnd,
            held: Number(document.getElementById('count-total').dataset.count),
            workers: Number(document.getElementById('summary-workers').dataset.value),
            stats: window.dashboardStats,
          };
        })()""")
        return {"rendered_ms": rendered, "wall_s": round(wall, 3), **facts, "errors": list(page.errors)}
    finally:
        page.close()


def measure(case: str, browser: Browser, base: str, repetitions: int, settle: float = 0) -> dict:
    loads = [load_status(browser, base, settle) for _ in range(repetitions)]
    view, size, fetch_s = state(base)
    rec = {
        "case": case, "loads": loads,
        "rendered_ms_median": statistics.median(x["rendered_ms"] for x in loads),
        "rendered_ms_max": max(x["rendered_ms"] for x in loads),
        "state_json_bytes": size, "state_json_fetch_s": round(fetch_s, 4),
        "held_tasks": sum(view["counts"].values()), "workers": len(view["workers"]),
    }
    print(f"{case}: first render median {rec['rendered_ms_median']:.0f} ms (max {rec['rendered_ms_max']:.0f} ms); "
          f"state.json {size / 1024:.1f} KiB in {fetch_s * 1e3:.1f} ms; {rec['held_tasks']:,} tasks held, "
          f"{rec['workers']} workers", flush=True)
    return rec


def wait_held(base: str, n: int, proc, timeout: float = 900) -> float:
    t = time.perf_counter()
    wait_for(lambda: sum(state(base)[0]["counts"].values()) >= n, timeout, f"{n:,} tasks held", proc)
    return time.perf_counter() - t


def run(args) -> list[dict]:
    from distributed import Client

    records = []
    with tempfile.TemporaryDirectory(prefix="dashboard-load-") as tmp:
        tmp = Path(tmp)
        (tmp / "idle").mkdir()
        with Browser(tmp / "browser") as browser, GoScheduler(tmp / "idle", "--dashboard-address", "127.0.0.1:0") as sched:
            base = dashboard_base(sched)
            records.append(measure("idle", browser, base, args.repetitions))
            with Client(sched.address, timeout=30) as c:
                t = time.perf_counter()
                held = persist_million(c, args.side)
                wait_held(base, args.side ** 2, sched.proc)
                print(f"graph held after {time.perf_counter() - t:.0f} s", flush=True)
                records.append(measure("million-waiting", browser, base, args.repetitions))
                del held
        if args.zero_workers:
            records.append(zero_workers_case(args, tmp, Browser))
    return records


def zero_workers_case(args, tmp: Path, browser_cls) -> dict:
    from distributed import Client

    sys.path.insert(0, str(ROOT / "scripts" / "bench"))
    from procs import ZeroWorkers

    (tmp / "zero").mkdir()
    with browser_cls(tmp / "browser-zero") as browser, \
            GoScheduler(tmp / "zero", "--dashboard-address", "127.0.0.1:0") as sched:
        base = dashboard_base(sched)
        zero = ZeroWorkers(tmp / "zero", sched.scheduler_file, 1000, 1).start()
        try:
            with Client(sched.address, timeout=60) as c:
                c.wait_for_workers(1000, timeout=300)
                held = persist_million(c, args.side)
                wait_for(lambda: state(base)[0]["tasks_done"] > 1000, 900, "tasks computing", sched.proc)
                rec = measure("million-1000-workers", browser, base, args.repetitions, settle=10)
                del held
        finally:
            zero.stop()
    return rec


def dashboard_base(sched: GoScheduler) -> str:
    return f"http://127.0.0.1:{json.loads(sched.scheduler_file.read_text())['services']['dashboard']}"


def write(records: list[dict], args) -> None:
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    chromium = subprocess.run([chromium_path(), "--version"], capture_output=True, text=True).stdout.strip()
    meta = {"command": " ".join([".venv/bin/python", "scripts/bench/dashboard_load.py", *sys.argv[1:]]),
            "chromium": chromium, "cpus": os.cpu_count(), "machine": platform.platform(),
            "at": time.strftime("%Y-%m-%d %H:%M:%S")}
    (out / "dashboard_load.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1))
    lines = [
        "# Dashboard: time to the first render of /status", "",
        f"`{meta['command']}` ({meta['at']}, {meta['cpus']} CPUs, {chromium}, browser cache off).", "",
        "The figure is the page's `data-rendered` mark: ms from navigation start until /status has drawn "
        "its first View. Drawing cost: the page's render function per View, over 10 s after the load.", "",
        "| case | tasks held | workers | first render, median (max) ms | DOMContentLoaded ms | state.json KiB | drawing per View, mean (max) ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        dcl = statistics.median(x["dom_content_loaded_ms"] for x in r["loads"])
        stats = [x["stats"] for x in r["loads"] if x.get("stats") and x["stats"]["renders"] > 1]
        draw = "–"
        if stats:
            mean = statistics.mean(s["total_ms"] / s["renders"] for s in stats)
            draw = f"{mean:.1f} ({max(s['max_ms'] for s in stats):.1f})"
        lines.append(f"| {r['case']} | {r['held_tasks']:,} | {r['workers']:,} | {r['rendered_ms_median']:.0f} "
                     f"({r['rendered_ms_max']:.0f}) | {dcl:.0f} | {r['state_json_bytes'] / 1024:.1f} | {draw} |")
    errors = [e for r in records for x in r["loads"] for e in x["errors"]]
    lines += ["", f"JavaScript errors during the loads: {len(errors)}."]
    (out / "dashboard_load.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'dashboard_load.md'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--side", type=int, default=1000, help="the graph is side**2 tasks")
    ap.add_argument("--zero-workers", action="store_true", help="also 1,000 fake workers computing the graph")
    ap.add_argument("--results", default=str(RESULTS))
    args = ap.parse_args()
    write(run(args), args)


if __name__ == "__main__":
    main()
