"""The benchmark harness keeps working: `scripts/bench.sh --smoke` runs every
workload under every configuration (Python and Go schedulers, stock workers)
and the zero-worker overhead runs at tiny sizes, and must exit 0 with every
result verified and every output file written to the directory it is given
(never the committed scripts/bench/results)."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts" / "bench"))

from procs import CONFIGS  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

RECORD_FIELDS = {"workload", "configuration", "repetition", "wall_s", "peak_memory_bytes",
                 "transferred_bytes", "spilled_bytes", "scheduler_cpu_s", "scheduler_peak_rss_bytes"}
MEASURED = RECORD_FIELDS - {"workload", "configuration", "repetition"}


def numeric(x) -> bool:
    """A measurement: a finite int or float (not a bool, None or a string)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def run_bench(tmp_path, *args: str) -> Path:
    """Run scripts/bench.sh --smoke ARGS into tmp_path/results within 300 s
    (stopped by SIGTERM, which makes the harness stop its clusters, then
    SIGKILL) and require exit 0; returns the results directory."""
    out = tmp_path / "results"
    log = tmp_path / "bench.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(ROOT / "scripts" / "bench.sh"), "--smoke", *args, "--results", str(out)],
                                cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    try:
        rc = proc.wait(timeout=300)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        pytest.fail(f"bench.sh --smoke {' '.join(args)} took over 300 s:\n{log.read_text(errors='replace')[-4000:]}")
    text = log.read_text(errors="replace")
    assert rc == 0, f"bench.sh --smoke {' '.join(args)} exited {rc}:\n{text[-6000:]}"
    return out


@pytest.mark.timeout(330)
def test_bench_smoke(tmp_path):
    check_smoke_results(run_bench(tmp_path))


def check_smoke_results(out: Path) -> None:
    """What `bench.sh --smoke` must have written to out."""
    records = json.loads((out / "latest.json").read_text())
    got = {(r["workload"], r["configuration"]) for r in records}
    assert got == {(w, c) for w in WORKLOADS for c in CONFIGS}
    for r in records:
        assert r["ok"], r
        assert RECORD_FIELDS <= r.keys(), r
        assert all(numeric(r[f]) for f in MEASURED), r
        assert r["wall_s"] > 0 and r["peak_memory_bytes"] > 0 and r["scheduler_peak_rss_bytes"] > 0, r
        # every workload's result is fetched from a worker, and the worker
        # counts what its get_data sends (transfer_outgoing_bytes_total)
        assert r["transferred_bytes"] > 0, r
        # smoke data is kilobytes, on workers of 1 GiB: nothing spills
        assert r["spilled_bytes"] == 0, r
        if r["workload"] == "shuffle":  # the task shuffle moves rows between the two workers
            assert r["transferred_bytes"] >= r["data_bytes"] // 2, r
    # scheduler CPU is a difference of clocks that tick every 10 ms, and one
    # smoke run may cost the Go scheduler less than a tick; the twelve
    # workloads on one configuration cost its scheduler more
    for config in CONFIGS:
        cpu = [r["scheduler_cpu_s"] for r in records if r["configuration"] == config]
        assert len(cpu) == len(WORKLOADS) and sum(cpu) > 0, (config, cpu)

    over = json.loads((out / "overhead.json").read_text())["results"]
    benches = {(r["benchmark"], r["scheduler"]) for r in over}
    assert benches == {(b, s) for b in ("zero-independent", "zero-tree", "stock-array", "submit-to-first-task")
                       for s in ("py", "go")}
    for r in over:
        assert r["ok"] and r["tasks"] > 0, r
        assert numeric(r["scheduler_cpu_s"]) and numeric(r["cpu_us_per_task"]), r
        # the per-task figure is the measured scheduler CPU spread over the tasks
        assert math.isclose(r["cpu_us_per_task"], r["scheduler_cpu_s"] / r["tasks"] * 1e6, rel_tol=1e-9), r
        if r["scheduler"] == "py":  # the Python scheduler spends ms on hundreds of tasks: several ticks
            assert r["scheduler_cpu_s"] > 0 and r["cpu_us_per_task"] > 0, r
    assert sum(r["scheduler_cpu_s"] for r in over if r["scheduler"] == "go") > 0, over

    md = (out / "latest.md").read_text()
    for name in list(WORKLOADS) + list(CONFIGS):
        assert name in md
    pngs = {p.name for p in out.glob("*.png")}
    assert {f"memory-{w}.png" for w in WORKLOADS} | {"ratios-peak-memory.png", "ratios-runtime.png"} <= pngs
    assert json.loads((out / "timeseries.json").read_text())


GRAPH_PATH_FIELDS = {"case", "scheduler", "tasks", "wall_s", "cpu_s", "scheduler_cpu_s", "helper_cpu_s",
                     "peak_rss_bytes", "scheduler_peak_rss_bytes", "helper_peak_rss_bytes"}


@pytest.mark.timeout(330)
def test_bench_graph_path_smoke(tmp_path):
    """`scripts/bench.sh --workloads graph-path` at smoke sizes: every case on
    both schedulers (tree-1m on Go, plus its one Python run), each run
    verified by the client (sentinel, sums), the scheduler side's CPU and RSS
    counted with the Go scheduler's helper, and the report written."""
    out = run_bench(tmp_path, "--workloads", "graph-path", "--graph-path-cases",
                    "tree-200k,map-20k,tree-40k,tree-1m", "--graph-path-1m-python")
    results = json.loads((out / "graph-path.json").read_text())["results"]
    got = {(r["case"], r["scheduler"]) for r in results}
    assert got == {(c, s) for c in ("tree-200k", "map-20k", "tree-40k", "tree-1m") for s in ("py", "go")}
    for r in results:
        assert r["ok"], r
        assert GRAPH_PATH_FIELDS <= r.keys(), r
        assert r["wall_s"] > 0 and r["peak_rss_bytes"] > 0, r
        # the run's CPU is the scheduler's plus its helper's
        assert r["cpu_s"] >= 0 and math.isclose(r["cpu_s"], r["scheduler_cpu_s"] + r["helper_cpu_s"]), r
        if r["scheduler"] == "py":  # Python spends tens of ms on a thousand tasks: several ticks
            assert r["cpu_s"] > 0, r
        if r["scheduler"] == "go":  # the helper is counted
            assert numeric(r["helper_cpu_s"]) and r["helper_peak_rss_bytes"] > 0, r
            assert r["peak_rss_bytes"] >= r["scheduler_peak_rss_bytes"] + r["helper_peak_rss_bytes"] * 0.5, r
    # a small graph may cost the Go process or the helper less than the 10 ms
    # a CPU clock counts (tree-200k at this size: 1,001 tasks in 0.1 s read 0.0
    # once); the biggest (tree-1m, 2,000 tasks) does not
    go = [r for r in results if r["scheduler"] == "go"]
    assert max(r["helper_cpu_s"] for r in go) > 0 and max(r["scheduler_cpu_s"] for r in go) > 0, results
    md = (out / "graph-path.md").read_text()
    assert "Go process **plus** its materializer helper" in md and "tree-200k" in md


@pytest.mark.timeout(330)
def test_bench_waiting_smoke(tmp_path):
    """`scripts/bench.sh --workloads waiting` at smoke sizes: both cases on
    both schedulers settle, the Go runs report the run_spec bytes its engine
    holds (from the scheduler's log) and the helper's memory apart, and the
    report is written."""
    out = run_bench(tmp_path, "--workloads", "waiting")
    results = json.loads((out / "waiting.json").read_text())["results"]
    assert {(r["case"], r["scheduler"]) for r in results} == {
        (c, s) for c in ("waiting-100k", "waiting-1m") for s in ("py", "go")}
    for r in results:
        assert r["ok"], r
        assert r["settled_rss_bytes"] > 0 and r["tasks"] > 0, r
        if r["scheduler"] == "go":
            assert r["run_spec_bytes"] > 0 and r["helper_settled_rss_bytes"] > 0, r
            assert "rss_per_task_beyond_run_spec" in r, r
    assert "B/task beyond run_spec" in (out / "waiting.md").read_text()


def run_script(script: str, *args: str) -> None:
    """Run scripts/bench/SCRIPT ARGS with this interpreter within 150 s and
    require exit 0."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench" / script), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.timeout(180)
def test_msgfloor_smoke(tmp_path):
    """scripts/bench/msgfloor.py replays the committed map-20k recording
    through the floor program and runs ours on map-20k once: the floor
    carries every recorded message both ways, and both report CPU per task."""
    script = ROOT / "scripts/bench/results/per-message/script-map-20k.json.gz"
    run_script("msgfloor.py", "--script", str(script), "--repetitions", "1", "--results", str(tmp_path))
    out = json.loads((tmp_path / "per-message.json").read_text())
    recorded = out["machine"]["script"]
    ours, floor = out["results"]
    assert ours["kind"] == "ours" and ours["ok"] and ours["go_cpu_us_per_task"] > 0, ours
    assert floor["kind"] == "floor" and floor["ok"] and floor["cpu_us_per_task"] > 0, floor
    assert floor["serve"]["messages_in"] == floor["drive"]["sent"] == recorded["messages_in"], floor
    assert floor["drive"]["received"] == floor["serve"]["messages_out"] == recorded["messages_out"], floor


@pytest.mark.timeout(180)
def test_soak_smoke(tmp_path):
    """scripts/bench/soak.py runs rounds of a cancelled graph on both
    schedulers and records the RSS after each, the Go helper's apart."""
    out = tmp_path / "soak.json"
    run_script("soak.py", "--rounds", "2", "--tasks", "2000", "--settle", "1", "--json", str(out))
    recs = json.loads(out.read_text())["records"]
    assert [(r["scheduler"], r["round"]) for r in recs] == [
        (k, r) for k in ("py", "go") for r in ("start", 0, 1)]
    assert all(r["rss_bytes"] > 0 for r in recs), recs
    assert all(r["helper_rss_bytes"] > 0 for r in recs if r["scheduler"] == "go"), recs


def test_heartbeat_floor_answers_every_heartbeat(tmp_path):
    """The many-workers benchmark's floor (scripts/bench/heartbeat_floor.py):
    msgfloor answers 20 connections' heartbeats for 3 s at distributed's
    interval for 20 workers (1 s), every one of them, and reports a CPU
    share; the many-workers table shows it as its own row."""
    import heartbeat_floor
    import many_workers

    assert heartbeat_floor.heartbeat_interval(20) == 1 and heartbeat_floor.heartbeat_interval(1000) == 6
    rec = heartbeat_floor.one_run(20, tmp_path / "floor", 3.0, 60)
    assert rec["ok"], rec.get("error")
    assert rec["heartbeats"] == 20 * 3, rec
    assert rec["drive"]["received"] == rec["drive"]["expected"] == 60
    assert numeric(rec["idle_cpu_pct"]) and rec["idle_cpu_pct"] > 0
    assert rec["idle_cpu_pct"] == pytest.approx(rec["idle_user_pct"] + rec["idle_sys_pct"])
    rec["repetition"] = 0
    md = many_workers.markdown([rec], [{"command": "test", "started": "now", "machine": "here"}])
    row = next(line for line in md.splitlines() if line.startswith("| 20 | floor |"))
    assert f"{rec['idle_cpu_pct']:,.2f}" in row, row


def test_many_workers_table_lists_every_build():
    """Two builds of ours (go:PATH kinds, no Python run) each get a row of
    the many-workers table, the second with its ratios to the first."""
    import many_workers

    runs = json.loads((ROOT / "scripts/bench/results/graph-keys/many-workers-1000-ab.json").read_text())
    md = many_workers.markdown(runs["results"], [runs["machine"]])
    rows = [line for line in md.splitlines() if line.startswith("| 1,000 | go:")]
    assert [r.split(" | ")[1] for r in rows] == ["go:/tmp/p54/sched-before", "go:/tmp/p54/sched-after"], rows
    assert rows[0].endswith("| – | – |"), rows[0]
    assert rows[1].endswith("| 0.96 | 1.01 |"), rows[1]


def test_run_interleaved_turns_the_order_each_repetition(tmp_path):
    """The kinds of a case run in the listed order on even repetitions and
    in reverse on odd ones (the second run of a round is often the slower,
    so a fixed order would favour the first)."""
    from procs import run_interleaved

    ran = []

    def run(case, kind, d, prof):
        ran.append((case, kind))
        return {"ok": True, "case": case, "scheduler": kind}

    recs = run_interleaved(tmp_path, "order", ["a", "b"], 3, lambda case, rep: ("py", "go", "go:x"), run,
                           lambda rec: "ok")
    forward, backward = ["py", "go", "go:x"], ["go:x", "go", "py"]
    want = [(c, k) for order in (forward, backward, forward) for c in ("a", "b") for k in order]
    assert ran == want
    assert [r["repetition"] for r in recs] == [rep for rep in range(3) for _ in range(6)]
