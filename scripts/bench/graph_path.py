"""The graph path, Go scheduler side by side with the Python scheduler: what
the scheduler side (the Go process plus its materializer helper, counted
together) costs from a client's update-graph to tasks running, on stock
workers.

    scripts/bench.sh --workloads graph-path [--repetitions 3] [--graph-path-cases ...]

Cases (the client runs in its own process with its functions in __main__,
see graph_path_client.py; 2 stock workers x 2 threads with nannies):

    tree-200k  client.get of a 200,006-task tree graph, then a high-priority
               sentinel task: time until the sentinel's result
    map-20k    client.map(inc, range(20_000)) + gather
    map-20k-progress  the same with distributed.progress(futures) (the text
               bar, which blocks until they finish) open on it before the gather
    tree-40k   a 20,000-leaf tree of additions (40,005 tasks), client.get
    tree-1m    tree-200k at 1,000,006 tasks (Go only; --graph-path-1m-python
               adds one Python run, in the first repetition)

Per run: wall time (the client's own, from START to DONE), scheduler CPU
seconds between those lines for the scheduler process and for its children
(the helper: live and reaped), and peak RSS sampled every 100 ms of the
scheduler process, of its children, and of both summed at each instant.
Runs are interleaved py, go, go, py, ... (the order turns each repetition) with a fresh cluster each.

Scheduler kinds: py, go, go:PATH (another build of ours), and any of them
with "+tls" (py+tls, go+tls): every process of the run on tls:// with
certificates made for it (procs.tls_env), for TLS's cost against tcp://.
Ours runs with --no-dashboard (its HTTP routes answer, as Python's do)
unless the kind has "+dash" (the dashboard's pages served) or "+page" (and
/status open in headless Chromium for the whole run): go+dash against
go+page is what watching the dashboard costs the scheduler.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

from procs import BENCH, BrowserPage, Sampler, Scheduler, Workers, python_env, run_interleaved, stop, tls_env
from report import runs_table, write_named

NAME = "graph-path"
# case -> (size argument: leaves of a tree, tasks of the map; smoke size)
CASES = {
    "tree-200k": (100_000, 500),
    "map-20k": (20_000, 300),
    "map-20k-progress": (20_000, 300),
    "tree-40k": (20_000, 300),
    "tree-1m": (500_000, 1_000),
}
DEFAULT_CASES = ("tree-200k", "map-20k", "tree-40k")
WORKERS, THREADS, MEMORY = 2, 2, 4 * 2**30


def tree_tasks(leaves: int) -> int:
    n, level = leaves, leaves
    while level > 1:
        level = (level + 1) // 2
        n += level
    return n


def tasks_of(case: str, size: int) -> int:
    return size if case.startswith("map-20k") else tree_tasks(size)


def one_run(case: str, kind: str, size: int, tmp: Path, timeout: float, profile: Path | None = None,
            log_level: str = "info") -> dict:
    """One run; log_level "trace" makes ours log every message (msgfloor.py
    records the traffic so), in tmp/scheduler.log."""
    rec = {"case": case, "scheduler": kind, "size": size, "tasks": tasks_of(case, size), "ok": False}
    env = tls_env(tmp / "tls") if "+tls" in kind else {}
    page = None
    sched = Scheduler(kind, env, tmp, log_level=log_level, profile=profile).launch()
    workers = Workers(tmp, sched.scheduler_file, WORKERS, MEMORY, nthreads=THREADS, env=env).start()
    client = None
    try:
        sched.wait_ready(60)
        rec["address"] = sched.address  # tls:// for a "+tls" kind
        if ("+tls" in kind) != sched.address.startswith("tls://"):
            raise RuntimeError(f"{kind} scheduler listens on {sched.address}")
        if "+page" in kind:
            port = json.loads(sched.scheduler_file.read_text())["services"]["dashboard"]
            page = BrowserPage(f"http://127.0.0.1:{port}/status", tmp)
            time.sleep(5)  # loaded and subscribed to the event stream before the window opens
        client = subprocess.Popen(
            [sys.executable, str(BENCH / "graph_path_client.py"), case, "--scheduler-file",
             str(sched.scheduler_file), "--size", str(size)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(tmp / "client.log", "wb"),
            env=python_env(env), text=True)
        line = client.stdout.readline().strip()
        if line != "START":
            raise RuntimeError(f"client said {line!r} instead of START; see {tmp / 'client.log'}")
        sampler = Sampler([], sched.proc.pid)
        own0, helper0 = sampler.scheduler_cpu()
        sampler.start()
        deadline = time.monotonic() + timeout
        line = client.stdout.readline().strip()
        own1, helper1 = sampler.scheduler_cpu()
        sampler.stop()
        sched.snapshot_heap()  # heap.pprof.1: the graph is in
        if time.monotonic() > deadline:
            raise TimeoutError(f"{case} took over {timeout} s")
        if not line.startswith("DONE "):
            raise RuntimeError(f"client said {line!r} instead of DONE; see {tmp / 'client.log'}")
        got = json.loads(line[5:])
        rec.update(got)
        cpu_own, cpu_helper = own1 - own0, max(0.0, helper1 - helper0)
        rec.update(
            cpu_s=cpu_own + cpu_helper,
            scheduler_cpu_s=cpu_own,
            helper_cpu_s=cpu_helper,
            cpu_us_per_task=(cpu_own + cpu_helper) / rec["tasks"] * 1e6,
            peak_rss_bytes=max(sampler.total_rss),
            scheduler_peak_rss_bytes=max(sampler.scheduler_rss),
            helper_peak_rss_bytes=max(sampler.helper_rss),
        )
        client.stdin.close()
        client.wait(120)
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        rec["ok"] = False
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        with (tmp.parent / "failures.log").open("a") as f:
            f.write(f"=== {case} {kind}\n{rec['traceback']}\n--- scheduler\n{sched.logs()}\n"
                    f"--- client\n{(tmp / 'client.log').read_text(errors='replace')[-3000:]}\n")
    finally:
        if client is not None:
            stop(client, grace=10)
        if page is not None:
            page.stop()
        workers.stop()
        sched.stop()
    return rec


def run_all(tmp: Path, cases: list[str], repetitions: int, smoke: bool, python_1m: bool,
            timeout: float, on_record=lambda results: None, profile: Path | None = None,
            schedulers: tuple[str, ...] = ("py", "go")) -> list[dict]:
    """Interleaved: for each repetition, each case, py then go (reversed on
    odd repetitions: procs.run_interleaved)."""
    def kinds(case: str, rep: int) -> tuple[str, ...]:
        # tree-1m on Python: many minutes and GiB; once, in the first repetition, if asked
        return tuple(k for k in schedulers if k.startswith("go") or case != "tree-1m" or (python_1m and rep == 0))

    def describe(rec: dict) -> str:
        return (f"{rec['wall_s']:7.2f} s  cpu {rec['cpu_s']:6.2f} s (sched {rec['scheduler_cpu_s']:.2f} + "
                f"helper {rec['helper_cpu_s']:.2f})  peak RSS {rec['peak_rss_bytes'] / 2**20:6.0f} MiB")

    return run_interleaved(
        tmp, NAME, cases, repetitions, kinds,
        lambda case, kind, d, prof: one_run(case, kind, CASES[case][1 if smoke else 0], d, timeout, prof),
        describe, on_record, profile)


# ---- report ------------------------------------------------------------------

FIELDS = ("wall_s", "cpu_s", "scheduler_cpu_s", "helper_cpu_s", "cpu_us_per_task", "peak_rss_bytes",
          "scheduler_peak_rss_bytes", "helper_peak_rss_bytes", "client_submit_s")


def medians(results: list[dict]) -> dict[tuple[str, str], dict]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["case"], r["scheduler"]), []).append(r)
    out = {}
    for key, runs in groups.items():
        ok = [r for r in runs if r["ok"]]
        m = {"runs": len(runs), "ok": len(ok), "tasks": runs[0]["tasks"]}
        for f in FIELDS:
            vals = [r[f] for r in ok if r.get(f) is not None]
            m[f] = statistics.median(vals) if vals else None
        out[key] = m
    return out


def markdown(results: list[dict], machine: dict) -> str:
    med = medians(results)
    cases = list(dict.fromkeys(r["case"] for r in results))
    mib = 2**20
    lines = [
        "# Graph path: Go scheduler + helper vs the Python scheduler",
        "",
        f"Command: `{machine.get('command', '')}`  ",
        f"Machine: {machine.get('machine', '')}, Python {machine.get('python', '')}  ",
        f"Started: {machine.get('started', '')}; {WORKERS} stock workers x {THREADS} threads with nannies; "
        "medians of the runs shown (interleaved py, go, go, py, ...: the order turns each repetition).",
        "",
        "CPU and RSS are the scheduler side's: for Go, the Go process **plus** its materializer helper "
        "(CPU summed over the window, RSS summed at each 100 ms sample); each part is shown too. "
        "Ratios are against the first scheduler listed (Python when it ran): Go+helper / Python, or one Go build / another (kind go:PATH).",
        "",
        "| case | tasks | scheduler | runs ok | wall s | CPU s (Go + helper) | CPU µs/task | peak RSS MiB (Go + helper) "
        "| wall × | CPU × | RSS × |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def fmt(v, unit=1.0, d=1):
        return "–" if v is None else f"{v / unit:.{d}f}"

    kinds = list(dict.fromkeys(r["scheduler"] for r in results))
    for case in cases:
        for kind in kinds:
            # ratios: against py (py+tls for a TLS run), or the first kind run
            base_kind = ("py+tls" if kind.endswith("+tls") else "py") if "py" in kinds else kinds[0]
            py = med.get((case, base_kind))
            m = med.get((case, kind))
            if m is None:
                continue
            if kind.startswith("go"):
                cpu = f"{fmt(m['cpu_s'])} ({fmt(m['scheduler_cpu_s'])} + {fmt(m['helper_cpu_s'])})"
                rss = (f"{fmt(m['peak_rss_bytes'], mib, 0)} ({fmt(m['scheduler_peak_rss_bytes'], mib, 0)} + "
                       f"{fmt(m['helper_peak_rss_bytes'], mib, 0)})")
            else:
                cpu, rss = fmt(m["cpu_s"]), fmt(m["peak_rss_bytes"], mib, 0)

            def ratio(f):
                if kind == base_kind or py is None or not py.get(f) or m.get(f) is None:
                    return "–"
                return f"{m[f] / py[f]:.2f}"

            lines.append(f"| {case} | {m['tasks']:,} | {kind} | {m['ok']}/{m['runs']} | {fmt(m['wall_s'])} | {cpu} "
                         f"| {fmt(m['cpu_us_per_task'])} | {rss} | {ratio('wall_s')} | {ratio('cpu_s')} "
                         f"| {ratio('peak_rss_bytes')} |")
    tls_kinds = [k for k in kinds if k.endswith("+tls") and k[:-4] in kinds]
    if tls_kinds:
        lines += ["", "What TLS costs each scheduler: CPU per task over tls:// against tcp:// (scheduler side, "
                  "helper included), medians of the same interleaved run.", "",
                  "| case | scheduler | tcp CPU µs/task | tls CPU µs/task | tls / tcp |", "|---|---|---:|---:|---:|"]
        for case in cases:
            for k in tls_kinds:
                plain, enc = med.get((case, k[:-4])), med.get((case, k))
                if plain and enc and plain.get("cpu_us_per_task") and enc.get("cpu_us_per_task"):
                    lines.append(f"| {case} | {k[:-4]} | {plain['cpu_us_per_task']:.1f} | {enc['cpu_us_per_task']:.1f} "
                                 f"| {enc['cpu_us_per_task'] / plain['cpu_us_per_task']:.2f} |")
    page_kinds = [k for k in kinds if k.endswith("+page") and k[:-5] + "+dash" in kinds]
    if page_kinds:
        lines += ["", "What watching the dashboard costs: CPU per task with /status open in headless Chromium "
                  "against the same dashboard with no page open (scheduler side, helper included).", "",
                  "| case | closed CPU µs/task | open CPU µs/task | open / closed |", "|---|---:|---:|---:|"]
        for case in cases:
            for k in page_kinds:
                closed, opened = med.get((case, k[:-5] + "+dash")), med.get((case, k))
                if closed and opened and closed.get("cpu_us_per_task") and opened.get("cpu_us_per_task"):
                    lines.append(f"| {case} | {closed['cpu_us_per_task']:.1f} | {opened['cpu_us_per_task']:.1f} "
                                 f"| {opened['cpu_us_per_task'] / closed['cpu_us_per_task']:.2f} |")
    lines += runs_table(results, [
        ("wall s", lambda r: fmt(r.get("wall_s"), 1, 2)),
        ("client submit s", lambda r: fmt(r.get("client_submit_s"), 1, 2)),
        ("CPU s", lambda r: fmt(r.get("cpu_s"), 1, 2)),
        ("sched CPU s", lambda r: fmt(r.get("scheduler_cpu_s"), 1, 2)),
        ("helper CPU s", lambda r: fmt(r.get("helper_cpu_s"), 1, 2)),
        ("peak RSS MiB", lambda r: fmt(r.get("peak_rss_bytes"), mib, 0)),
        ("sched RSS MiB", lambda r: fmt(r.get("scheduler_peak_rss_bytes"), mib, 0)),
        ("helper RSS MiB", lambda r: fmt(r.get("helper_peak_rss_bytes"), mib, 0)),
    ])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    write_named(out, NAME, results, machine, markdown(results, machine))
