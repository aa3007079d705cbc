"""What a scheduler plugin whose transition() counts costs, Go scheduler
against Python's: client.map(inc, range(20_000)) + gather on 2 stock
workers x 2 threads, with and without the plugin, runs interleaved
(py, py+plugin, go, go+plugin, repeated).

    flock -x /tmp/measure.lock .venv/bin/python scripts/bench/plugin_cost.py [--repetitions 3] [--size 20000]

The window (plugin_cost_client.py) runs from START to the moment the
plugin has counted every task's processing->memory: for ours that
includes the Python host working through the queued hook events. Scheduler
CPU is every process of the scheduler side: Python's one process; for ours
the Go process, its graph helper and its Python host (children of the Go
process, told apart by the host's pid, which the client reports), each
shown. The added cost per task is (CPU with the plugin - CPU without) /
tasks, each the median of its runs.

Results: scripts/bench/results/host/plugin-cost.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procs import BENCH, Scheduler, Workers, python_env, stop  # noqa: E402

KINDS = ("py", "py+plugin", "go", "go+plugin")
WORKERS, THREADS, MEMORY = 2, 2, 4 * 2**30
OUT = BENCH / "results" / "host"


def cpu_parts(sched: psutil.Process) -> tuple[float, dict[int, float], float]:
    """The scheduler process's own CPU, each live child's, and what its
    reaped children used."""
    t = sched.cpu_times()
    kids = {}
    for c in sched.children(recursive=True):
        try:
            ct = c.cpu_times()
            kids[c.pid] = ct.user + ct.system
        except psutil.NoSuchProcess:
            pass
    return t.user + t.system, kids, t.children_user + t.children_system


def one_run(kind: str, size: int, tmp: Path, timeout: float, profile: Path | None = None) -> dict:
    rec = {"scheduler": kind, "tasks": size, "ok": False}
    sched = Scheduler(kind.split("+")[0], {}, tmp, profile=profile).launch()
    workers = Workers(tmp, sched.scheduler_file, WORKERS, MEMORY, nthreads=THREADS).start()
    client = None
    try:
        sched.wait_ready(60)
        cmd = [sys.executable, str(BENCH / "plugin_cost_client.py"), "--scheduler-file", str(sched.scheduler_file),
               "--size", str(size)] + (["--plugin"] if kind.endswith("+plugin") else [])
        client = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(tmp / "client.log", "wb"), env=python_env({}), text=True)
        line = client.stdout.readline().strip()
        if not line.startswith("START"):
            raise RuntimeError(f"client said {line!r}; see {tmp / 'client.log'}")
        host_pid = int(line.split()[1])
        proc = psutil.Process(sched.proc.pid)
        own0, kids0, reaped0 = cpu_parts(proc)
        deadline = time.monotonic() + timeout
        line = client.stdout.readline().strip()
        own1, kids1, reaped1 = cpu_parts(proc)
        if time.monotonic() > deadline:
            raise TimeoutError(f"over {timeout} s")
        if not line.startswith("DONE "):
            raise RuntimeError(f"client said {line!r}; see {tmp / 'client.log'}")
        rec.update(json.loads(line[5:]))
        host = kids1.get(host_pid, 0.0) - kids0.get(host_pid, 0.0) if host_pid else 0.0
        children = sum(kids1.values()) - sum(v for p, v in kids0.items() if p in kids1) + (reaped1 - reaped0)
        rec.update(cpu_s=(own1 - own0) + children, scheduler_cpu_s=own1 - own0,
                   host_cpu_s=host, helper_cpu_s=max(0.0, children - host))
        rec["cpu_us_per_task"] = rec["cpu_s"] / size * 1e6
        client.stdin.close()
        client.wait(120)
    except Exception as e:  # noqa: BLE001 - recorded
        rec["ok"] = False
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        print(rec["traceback"], sched.logs()[-3000:], file=sys.stderr)
    finally:
        if client is not None:
            stop(client, grace=10)
        workers.stop()
        sched.stop()
    return rec


def med(results, kind, field):
    vals = [r[field] for r in results if r["scheduler"] == kind and r["ok"] and r.get(field) is not None]
    return statistics.median(vals) if vals else None


def markdown(results: list[dict], machine: dict) -> str:
    size = results[0]["tasks"]
    lines = [
        "# What a counting scheduler plugin costs: Go scheduler against Python's",
        "",
        f"Command: `{machine['command']}`  ",
        f"Machine: {machine['machine']}, Python {machine['python']}; started {machine['started']}.  ",
        f"`client.map(inc, range({size:,}))` + gather, {WORKERS} stock workers x {THREADS} threads with nannies; "
        "with `+plugin` a SchedulerPlugin whose `transition()` counts is registered first, and the window "
        "ends when it has counted every task's processing->memory (ours: the Python host has worked "
        "through the queued hook events). Runs interleaved py, py+plugin, go, go+plugin; medians.",
        "",
        "CPU is the scheduler side's: Python's process; ours the Go process + its graph helper + its "
        "Python host (the host exists only with a plugin).",
        "",
        "| scheduler | runs ok | wall s | CPU s | Go s | helper s | host s | CPU µs/task |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    f = lambda v, d=2: "–" if v is None else f"{v:.{d}f}"  # noqa: E731
    kinds = list(dict.fromkeys(r["scheduler"] for r in results))  # KINDS, and go:PATH builds, as run
    for k in kinds:
        runs = [r for r in results if r["scheduler"] == k]
        if not runs:
            continue
        ok = sum(r["ok"] for r in runs)
        go = k.startswith("go")
        lines.append(f"| {k} | {ok}/{len(runs)} | {f(med(results, k, 'wall_s'))} | {f(med(results, k, 'cpu_s'))} | "
                     f"{f(med(results, k, 'scheduler_cpu_s')) if go else '–'} | "
                     f"{f(med(results, k, 'helper_cpu_s')) if go else '–'} | "
                     f"{f(med(results, k, 'host_cpu_s')) if go else '–'} | {f(med(results, k, 'cpu_us_per_task'), 1)} |")
    lines += ["", "The plugin's added CPU per task (median with the plugin - median without):", "",
              "| scheduler | without µs/task | with µs/task | added µs/task | added wall s |", "|---|---:|---:|---:|---:|"]
    added = {}
    for base in (k for k in kinds if not k.endswith("+plugin")):
        a, b = med(results, base, "cpu_us_per_task"), med(results, base + "+plugin", "cpu_us_per_task")
        wa, wb = med(results, base, "wall_s"), med(results, base + "+plugin", "wall_s")
        if a is not None and b is not None:
            added[base] = b - a
            lines.append(f"| {base} | {a:.1f} | {b:.1f} | {b - a:.1f} | {f(wb - wa if wa and wb else None)} |")
    if added.get("py", 0) > 0:
        lines += [""] + [f"{k} adds {added[k] / added['py']:.2f}x what Python's adds per task." for k in added if k != "py"]
    lines += ["", "Every run:", "", "| scheduler | rep | ok | wall s | gather s | CPU s | Go s | helper s | host s | transitions counted |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['scheduler']} | {r['repetition']} | {'ok' if r['ok'] else r.get('error')} | {f(r.get('wall_s'))} | "
                     f"{f(r.get('gather_s'))} | {f(r.get('cpu_s'))} | {f(r.get('scheduler_cpu_s'))} | "
                     f"{f(r.get('helper_cpu_s'))} | {f(r.get('host_cpu_s'))} | {r.get('transitions_counted', '–')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--size", type=int, default=20_000)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--profile", type=Path, help="a directory: the Go process's CPU and heap profiles of each Go "
                    "run (DIR/KIND-REP/)")
    ap.add_argument("--pool", type=Path, help="an earlier plugin-cost.json of the same binary: its runs are pooled "
                    "with these (repetitions numbered on), for medians over more runs")
    args = ap.parse_args()
    machine = {"command": " ".join(["scripts/bench/plugin_cost.py", *sys.argv[1:]]),
               "machine": f"{platform.node()} {psutil.cpu_count()} cores", "python": platform.python_version(),
               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    results = json.loads(args.pool.read_text())["results"] if args.pool else []
    first = 1 + max((r["repetition"] for r in results), default=-1)
    if args.pool:
        machine["command"] += f" (pooled with {len(results)} earlier runs)"
    with tempfile.TemporaryDirectory(prefix="plugin-cost-") as tmp:
        for rep in range(first, first + args.repetitions):
            for kind in args.kinds.split(","):
                # a file name: kind "go:PATH+plugin" runs another build (procs.Scheduler)
                name = kind.replace("/", "_").replace(":", "_")
                d = Path(tempfile.mkdtemp(prefix=f"{name}-{rep}-", dir=tmp))
                prof = None
                if args.profile and kind.startswith("go"):
                    prof = args.profile / f"{name}-{rep}"
                    prof.mkdir(parents=True, exist_ok=True)
                rec = one_run(kind, args.size, d, args.timeout, prof)
                rec["repetition"] = rep
                results.append(rec)
                print(f"  {kind:10} rep {rep}: " + (f"wall {rec['wall_s']:.2f} s cpu {rec['cpu_s']:.2f} s "
                      f"(go/py {rec['scheduler_cpu_s']:.2f} helper {rec['helper_cpu_s']:.2f} host {rec['host_cpu_s']:.2f})"
                      if rec["ok"] else f"FAILED {rec.get('error')}"), flush=True)
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "plugin-cost.json").write_text(json.dumps({"machine": machine, "results": results}, indent=1))
                (args.out / "plugin-cost.md").write_text(markdown(results, machine))
    if not all(r["ok"] for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
