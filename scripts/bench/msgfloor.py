"""Our Go process's CPU per task against the machine's floor for the same
traffic.

    flock -x /tmp/measure.lock .venv/bin/python scripts/bench/msgfloor.py \\
        --repetitions 3 --results scripts/bench/results/per-message

1. Record: one map-20k run of the graph-path benchmark (client.map(inc,
   range(20_000)) + gather, 2 stock workers x 2 threads with nannies, a
   stock Client) on our scheduler at --log-level trace, which logs every
   message it reads and writes with its size and time
   (scheduler/server/trace.go). The part between the update-graph read and
   the gather reply (the benchmark's timed window) becomes a script: every
   message read, on which connection, when, and the messages written after
   it (scripts/bench/msgfloor/script.go). Not measured: tracing slows us.
2. Then, interleaved, --repetitions times: our scheduler on the same
   map-20k run, untraced (graph_path.one_run, as `scripts/bench.sh
   --workloads graph-path --graph-path-cases map-20k` runs it), and the
   floor (msgfloor serve, a Go program that does a read per wake-up and a
   write per message written and nothing else, GOMAXPROCS 1) replaying the
   script against msgfloor drive (the peers, another process), sped up to
   that run's pace (the script's duration over that run's wall time).

Reported: the floor's CPU per message (read or written) and per task of
the recording; ours per task, the Go process and the helper apart; the
ratio of our Go process's CPU per task to the floor's per task and per
message read. Processes are stopped by PID, also on failure.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import graph_path
from procs import stop
from report import write_named

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "./scripts/bench/msgfloor"
NAME = "per-message"
CASE = "map-20k"


def build(outdir: Path) -> Path:
    """go build the floor into outdir (never bin/: another run may use it)."""
    binary = outdir / "msgfloor"
    subprocess.run(["go", "build", "-o", str(binary), PACKAGE], cwd=REPO, check=True)
    return binary


# ---- recording -----------------------------------------------------------------

def trace_lines(log: Path):
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("message") == "message" and "bytes" in rec:
            yield rec


def op_names(ops: list[str]) -> list[str]:
    return [o.split(" ", 1)[0] for o in ops or []]


def count_tasks(ops: list[str]) -> int:
    """task-finished ops in a traced message (the trace names 8, then '+N more')."""
    names = op_names(ops)
    n = names.count("task-finished")
    if ops and ops[-1].startswith("+") and all(x == "task-finished" for x in names[:-1]):
        n += int(names[-1][1:])
    return n


def make_script(log: Path, source: str) -> dict:
    """The timed window's traffic: from the update-graph read to the reply to
    the gather RPC."""
    recs = list(trace_lines(log))
    start = next((i for i, r in enumerate(recs) if r["dir"] == "r" and "update-graph" in op_names(r["ops"])), None)
    if start is None:
        raise RuntimeError(f"no update-graph read in {log}")
    end, gather_peer = len(recs) - 1, None
    for i in range(start, len(recs)):
        r = recs[i]
        if gather_peer is None and r["dir"] == "r" and "gather" in op_names(r["ops"]):
            gather_peer = r["peer"]
        elif gather_peer is not None and r["dir"] == "w" and r["peer"] == gather_peer:
            end = i
            break
    window = recs[start:end + 1]
    roles: dict[str, str] = {}
    for r in window:
        names = op_names(r["ops"])
        if r["dir"] == "w" and "compute-task" in names:
            roles[r["peer"]] = "worker-stream"
        elif ("update-graph" in names or "key-in-memory" in names) and roles.get(r["peer"]) != "worker-stream":
            roles[r["peer"]] = "client-stream"
    index: dict[str, int] = {}
    conns: list[str] = []
    events: list[dict] = []
    t0 = window[0]["ns"]
    for r in window:
        if r["peer"] not in index:
            index[r["peer"]] = len(conns)
            conns.append(roles.get(r["peer"], "rpc"))
        c = index[r["peer"]]
        if r["dir"] == "r":
            ev = {"t": r["ns"] - t0, "c": c, "b": r["bytes"], "r": []}
            if k := count_tasks(r["ops"]):
                ev["k"] = k
            events.append(ev)
        else:
            events[-1]["r"].append([c, r["bytes"]])
    return {"source": source, "conns": conns, "events": events}


def script_summary(s: dict) -> dict:
    ev = s["events"]
    out = [r for e in ev for r in e["r"]]
    by_role: dict[str, dict] = {}
    for e in ev:
        d = by_role.setdefault(s["conns"][e["c"]], {"in": 0, "in_bytes": 0, "out": 0, "out_bytes": 0})
        d["in"] += 1
        d["in_bytes"] += e["b"]
    for c, b in out:
        d = by_role.setdefault(s["conns"][c], {"in": 0, "in_bytes": 0, "out": 0, "out_bytes": 0})
        d["out"] += 1
        d["out_bytes"] += b
    return {"source": s.get("source", ""), "connections": len(s["conns"]), "messages_in": len(ev), "messages_out": len(out),
            "task_finished_ops": sum(e.get("k", 0) for e in ev), "duration_s": ev[-1]["t"] / 1e9,
            "by_role": by_role}


def record(tmp: Path, results: Path, timeout: float) -> tuple[Path, dict]:
    d = tmp / "record"
    rec = graph_path.one_run(CASE, "go", graph_path.CASES[CASE][0], d, timeout, log_level="trace")
    if not rec["ok"]:
        raise RuntimeError(f"recording run failed: {rec.get('error')}")
    script = make_script(d / "scheduler.log", f"{CASE} on our scheduler at --log-level trace, "
                                               f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC")
    path = results / "script-map-20k.json.gz"
    results.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump(script, f, separators=(",", ":"))
    return path, {**script_summary(script), "recording_run": rec}


# ---- the runs ------------------------------------------------------------------

def replay(binary: Path, script: Path, speed: float = 1.0, timeout: float = 600,
           batch: str = "") -> tuple[dict, dict]:
    """msgfloor serve (GOMAXPROCS as our scheduler sets it) replaying script
    against msgfloor drive at speed: their reports (drive, serve). With
    batch (a Go duration), serve polls every connection from one goroutine
    that often (serve --batch). Raises when either fails; both are stopped
    by PID, also on failure."""
    env = {**os.environ}
    env.pop("GOMAXPROCS", None)
    serve = subprocess.Popen([str(binary), "serve", "--script", str(script), *(["--batch", batch] if batch else [])],
                             stdout=subprocess.PIPE, text=True, env=env)
    drive = None
    try:
        addr = serve.stdout.readline().strip()
        if not addr:
            raise RuntimeError(f"msgfloor serve exited (rc={serve.poll()}) without its address")
        drive = subprocess.Popen([str(binary), "drive", "--script", str(script), "--addr", addr,
                                  "--speed", f"{speed:.4f}"],
                                 stdout=subprocess.PIPE, text=True, env=env)
        d_out, _ = drive.communicate(timeout=timeout)
        s_out, _ = serve.communicate(timeout=60)
        if drive.returncode or serve.returncode:
            raise RuntimeError(f"drive rc={drive.returncode}, serve rc={serve.returncode}")
        return json.loads(d_out.strip().splitlines()[-1]), json.loads(s_out.strip().splitlines()[-1])
    finally:
        if drive is not None:
            stop(drive, grace=5)
        stop(serve, grace=5)


def floor_run(binary: Path, script: Path, rep: int, tasks: int, speed: float) -> dict:
    rec = {"kind": "floor", "repetition": rep, "ok": False, "speed": speed}
    try:
        d, s = replay(binary, script, speed)
        cpu = s["cpu_user_s"] + s["cpu_sys_s"]
        msgs = s["messages_in"] + s["messages_out"]
        rec.update(ok=d["received"] == d["expected"] and s["failed_writes"] == 0, drive=d, serve=s, cpu_s=cpu,
                   cpu_us_per_message=cpu / msgs * 1e6, cpu_us_per_message_in=cpu / s["messages_in"] * 1e6,
                   cpu_us_per_task=cpu / tasks * 1e6, user_us_per_task=s["cpu_user_s"] / tasks * 1e6,
                   sys_us_per_task=s["cpu_sys_s"] / tasks * 1e6, wakeups_per_message_in=s["reads"] / s["messages_in"],
                   loadavg_1m=os.getloadavg()[0])
        if not rec["ok"]:
            rec["error"] = f"replies {d['received']}/{d['expected']}, failed writes {s['failed_writes']}"
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
    return rec


def ours_run(tmp: Path, rep: int, timeout: float, profile: Path | None) -> dict:
    rec = graph_path.one_run(CASE, "go", graph_path.CASES[CASE][0], tmp / f"go-{rep}", timeout,
                             profile=profile / f"{CASE}-go-{rep}" if profile else None)
    rec.update(kind="ours", repetition=rep, loadavg_1m=os.getloadavg()[0])
    if rec["ok"]:
        rec["go_cpu_us_per_task"] = rec["scheduler_cpu_s"] / rec["tasks"] * 1e6
        rec["helper_cpu_us_per_task"] = rec["helper_cpu_s"] / rec["tasks"] * 1e6
    return rec


# ---- report --------------------------------------------------------------------

def med(runs: list[dict], f) -> float | None:
    vals = [f(r) for r in runs if r["ok"]]
    return statistics.median(vals) if vals else None


def summary(results: list[dict]) -> dict:
    fl = [r for r in results if r["kind"] == "floor"]
    ours = [r for r in results if r["kind"] == "ours"]
    s = {
        "floor_cpu_us_per_message": med(fl, lambda r: r["cpu_us_per_message"]),
        "floor_cpu_us_per_message_in": med(fl, lambda r: r["cpu_us_per_message_in"]),
        "floor_cpu_us_per_task": med(fl, lambda r: r["cpu_us_per_task"]),
        "floor_user_us_per_task": med(fl, lambda r: r["user_us_per_task"]),
        "floor_sys_us_per_task": med(fl, lambda r: r["sys_us_per_task"]),
        "go_cpu_us_per_task": med(ours, lambda r: r["go_cpu_us_per_task"]),
        "helper_cpu_us_per_task": med(ours, lambda r: r["helper_cpu_us_per_task"]),
        "go_plus_helper_cpu_us_per_task": med(ours, lambda r: r["cpu_us_per_task"]),
        "wall_s": med(ours, lambda r: r["wall_s"]),
    }
    if s["go_cpu_us_per_task"] and s["floor_cpu_us_per_task"]:
        s["ratio_go_per_task_to_floor_per_task"] = s["go_cpu_us_per_task"] / s["floor_cpu_us_per_task"]
        s["ratio_go_per_task_to_floor_per_message_in"] = s["go_cpu_us_per_task"] / s["floor_cpu_us_per_message_in"]
    return s


def markdown(results: list[dict], machine: dict) -> str:
    s, sc = summary(results), machine["script"]

    def f(v, d=1):
        return "–" if v is None else f"{v:.{d}f}"

    lines = [
        "# Per message: our Go process against the machine's floor for the same traffic", "",
        f"Command: `{machine['command']}`  ",
        f"Machine: {machine['machine']}, Python {machine['python']}  ",
        f"Started: {machine['started']}; interleaved ours, floor, ours, floor, ...; medians of the runs that "
        "succeeded.", "",
        f"The traffic: {sc['source']}; the timed window (update-graph read to gather reply): "
        f"{sc['connections']} connections, {sc['messages_in']:,} messages read and {sc['messages_out']:,} "
        f"written in {sc['duration_s']:.1f} s, {sc['task_finished_ops']:,} task-finished ops. Per role "
        "(messages read / written, bytes read / written): "
        + "; ".join(f"{k} {v['in']:,} / {v['out']:,} ({v['in_bytes']:,} / {v['out_bytes']:,} B)"
                    for k, v in sc["by_role"].items()) + ".", "",
        "The floor: `msgfloor serve` replays it against `msgfloor drive` (the peers, another process): a read "
        "per wake-up, one write per message our scheduler wrote, nothing else, GOMAXPROCS 1; each replay at the "
        "pace of the ours run before it (speed = the script's duration / that run's wall; the recording ran "
        "traced, slower). "
        "Ours: the same map-20k run untraced (graph_path.one_run, what `scripts/bench.sh --workloads graph-path "
        "--graph-path-cases map-20k` runs), the Go process and its helper apart.", "",
        "| figure | median |", "|---|---:|",
        f"| floor: CPU per message (read or written) | {f(s['floor_cpu_us_per_message'])} µs |",
        f"| floor: CPU per message read | {f(s['floor_cpu_us_per_message_in'])} µs |",
        f"| floor: CPU per task (user + sys) | {f(s['floor_cpu_us_per_task'])} µs "
        f"({f(s['floor_user_us_per_task'])} + {f(s['floor_sys_us_per_task'])}) |",
        f"| ours: Go process CPU per task | **{f(s['go_cpu_us_per_task'])} µs** |",
        f"| ours: helper CPU per task | {f(s['helper_cpu_us_per_task'])} µs |",
        f"| ours: Go + helper CPU per task | {f(s['go_plus_helper_cpu_us_per_task'])} µs |",
        f"| ours: wall | {f(s['wall_s'])} s |",
        f"| Go per task / floor per task | **{f(s.get('ratio_go_per_task_to_floor_per_task'), 2)}** |",
        f"| Go per task / floor per message read | {f(s.get('ratio_go_per_task_to_floor_per_message_in'), 2)} |",
        "", "Every run:", "",
        "| kind | rep | ok | CPU s | µs/task | detail | load 1m |", "|---|---:|---|---:|---:|---|---:|",
    ]
    for r in results:
        ok = "ok" if r["ok"] else r.get("error", "failed")
        if r["kind"] == "floor" and "serve" in r:
            sv, dv = r["serve"], r["drive"]
            detail = (f"{sv['messages_in']:,} in / {sv['messages_out']:,} out, {sv['reads']:,} reads, "
                      f"user {sv['cpu_user_s']:.2f} + sys {sv['cpu_sys_s']:.2f} s, "
                      f"{sv['voluntary_ctxt_switches']:,} vol ctx sw, speed {r['speed']:.2f}, sends late by median "
                      f"{dv['median_late_ms']:.2f} ms (max {dv['max_late_ms']:.1f})")
            lines.append(f"| floor | {r['repetition']} | {ok} | {r['cpu_s']:.2f} | {r['cpu_us_per_task']:.1f} "
                         f"| {detail} | {r['loadavg_1m']:.2f} |")
        elif r["kind"] == "ours" and r["ok"]:
            detail = (f"Go {r['scheduler_cpu_s']:.2f} s + helper {r['helper_cpu_s']:.2f} s, wall {r['wall_s']:.1f} s; "
                      f"Go + helper {r['cpu_us_per_task']:.1f} µs/task")
            lines.append(f"| ours | {r['repetition']} | ok | {r['scheduler_cpu_s']:.2f} | "
                         f"{r['go_cpu_us_per_task']:.1f} | {detail} | {r['loadavg_1m']:.2f} |")
        else:
            lines.append(f"| {r['kind']} | {r['repetition']} | {ok} | – | – | – | – |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--results", type=Path, default=REPO / "scripts/bench/results/per-message")
    ap.add_argument("--script", type=Path, help="replay this recorded script instead of recording one")
    ap.add_argument("--profile", type=Path, help="write our runs' CPU profiles here (DIR/map-20k-go-REP/)")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    if args.repetitions < 1:
        ap.error("--repetitions must be positive")
    machine = {"command": " ".join([".venv/bin/python", "scripts/bench/msgfloor.py", *sys.argv[1:]]),
               "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
               "python": platform.python_version(),
               "started": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"}
    # bin/dask-go-scheduler as this checkout builds it (scripts/bench.sh does the same)
    subprocess.run([str(REPO / "scripts" / "setup.sh")], check=True, stdout=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="msgfloor-") as t:
        tmp = Path(t)
        binary = build(tmp)
        if args.script:
            script = args.script
            with gzip.open(script, "rt") if script.suffix == ".gz" else open(script) as fh:
                machine["script"] = script_summary(json.load(fh))
        else:
            print("recording map-20k at --log-level trace ...", flush=True)
            script, machine["script"] = record(tmp, args.results, args.timeout)
        tasks = graph_path.CASES[CASE][0]  # per task as ours: of the 20,000
        print(f"script: {json.dumps({k: v for k, v in machine['script'].items() if k != 'recording_run'})}", flush=True)
        results: list[dict] = []
        for rep in range(args.repetitions):
            speed = 1.0
            for kind in ("ours", "floor"):
                if kind == "ours":
                    r = ours_run(tmp, rep, args.timeout, args.profile)
                    if r["ok"] and r.get("wall_s"):
                        # the floor at this run's pace: the recording ran traced, slower
                        speed = max(1.0, machine["script"]["duration_s"] / r["wall_s"])
                else:
                    r = floor_run(tmp / "msgfloor", script, rep, tasks, speed)
                results.append(r)
                per = r.get("cpu_us_per_task") if kind == "floor" else r.get("go_cpu_us_per_task")
                print(f"{kind} rep {rep}: {'ok' if r['ok'] else r.get('error')}  "
                      f"{'–' if per is None else f'{per:.1f}'} us/task", flush=True)
                write_named(args.results, NAME, results, machine, markdown(results, machine))
    print(json.dumps(summary(results), indent=1))
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
