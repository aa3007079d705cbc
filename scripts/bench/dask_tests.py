"""dask's own shipped tests for dask.array, run through the Go scheduler and
through the Python one, as a suite of small computations: the same tests,
each scheduler with 2 stock workers x 2 threads (no nanny) and a default
Client pointed at it (dask_tests_plugin.py, which also points assert_eq at
it). Per scheduler:
wall time of the pytest run, and every test's outcome from its JUnit XML.

    scripts/bench.sh --workloads dask-tests [--dask-tests-files test_reductions.py,...]
    .venv/bin/python scripts/bench/dask_tests.py [--files ...] [--schedulers py,go] [--results DIR]

Writes dask-tests.json (every test's outcome per scheduler) and
dask-tests.md: passed/failed/skipped/wall per scheduler, the ratio of the
walls, and every test whose outcome differs, with the failure's message.

Some of dask's tests are not deterministic under a distributed scheduler:
test_arr_like names its arrays "my-name" in every parametrization, so a
test's keys may still be in memory, holding the previous test's values,
when the next one submits the same keys (distributed reuses a key it holds,
Scheduler._generate_taskstates). Every test function with a differing
outcome is therefore run again, whole, --reruns times on each scheduler
(a fresh cluster each), and a difference counts against us only if the test
passed on Python's scheduler every time and failed on ours at least once.
Exits non-zero on such a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from procs import Scheduler, Workers, python_env  # noqa: E402

NAME = "dask-tests"
DEFAULT_FILES = ("test_reductions.py", "test_slicing.py", "test_rechunk.py", "test_creation.py", "test_routines.py")
WORKERS, THREADS, MEMORY = 2, 2, 4 * 2**30
PER_TEST_TIMEOUT = 120


def tests_dir() -> Path:
    import dask.array.tests

    return Path(dask.array.tests.__file__).resolve().parent


def outcomes(junit: Path) -> dict[str, dict]:
    """test id -> {"outcome": passed|failed|error|skipped, "message": ...}."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome, message = ("failed" if child.tag == "failure" else "error"), (child.get("message") or "")[:300]
            elif child.tag == "skipped":
                outcome, message = "skipped", (child.get("message") or "")[:120]
        out[tid] = {"outcome": outcome, "message": message, "time_s": float(case.get("time") or 0)}
    return out


def one_run(kind: str, files: list[str], tmp: Path, node_ids: list[str] | None = None, times: int = 1) -> dict:
    """One cluster, pytest times over files (or node_ids); with times > 1,
    rec["reruns"] maps each test to its outcomes."""
    rec = {"scheduler": kind, "files": files, "ok": False}
    sched = Scheduler(kind, {}, tmp).launch()
    workers = Workers(tmp, sched.scheduler_file, WORKERS, MEMORY, nthreads=THREADS, nanny=False).start()
    try:
        sched.wait_ready(60)
        junit = tmp / "junit.xml"
        env = python_env({"DASK_TESTS_SCHEDULER": sched.address, "DASK_TESTS_WORKERS": str(WORKERS),
                          "PYTHONPATH": str(BENCH)})
        where = tests_dir()
        targets = [str(where / n) for n in (node_ids or files)]
        if times > 1:
            rec["reruns"] = {}
            for i in range(times):
                subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "dask_tests_plugin",
                     f"--timeout={PER_TEST_TIMEOUT}", f"--junitxml={junit}", "-o", "junit_family=xunit1", *targets],
                    cwd=tmp, env=env, capture_output=True, text=True)
                for tid, o in outcomes(junit).items():
                    rec["reruns"].setdefault(tid, []).append(o["outcome"])
            rec["ok"] = True
            return rec
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "dask_tests_plugin",
             f"--timeout={PER_TEST_TIMEOUT}", f"--junitxml={junit}", "-o", "junit_family=xunit1", *targets],
            cwd=tmp, env=env, capture_output=True, text=True)
        rec["wall_s"] = time.perf_counter() - t0
        rec["pytest_exit"] = proc.returncode
        rec["summary"] = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]
        rec["tests"] = outcomes(junit)
        counts: dict[str, int] = {}
        for t in rec["tests"].values():
            counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
        rec["counts"] = counts
        rec["ok"] = True
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        rec["error"] = f"{type(e).__name__}: {e}"
    finally:
        workers.stop()
        sched.stop()
    return rec


def markdown(runs: list[dict], machine: dict) -> str:
    by = {r["scheduler"]: r for r in runs if "tests" in r}
    rr = {r["scheduler"]: r.get("reruns", {}) for r in runs if "reruns" in r}
    runs = [r for r in runs if "rerun_of" not in r]
    lines = ["# dask's array tests through each scheduler", "",
             f"Command: `{machine.get('command', '')}`  ",
             f"Machine: {machine.get('machine', '')}  ",
             f"Started: {machine.get('started', '')}; {WORKERS} stock workers x {THREADS} threads, no nanny; "
             f"files: {', '.join(runs[0]['files'])}; per-test timeout {PER_TEST_TIMEOUT} s", "",
             "| scheduler | tests | passed | failed | error | skipped | wall s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in runs:
        c = r.get("counts", {})
        lines.append(f"| {r['scheduler']} | {len(r.get('tests', {}))} | {c.get('passed', 0)} | {c.get('failed', 0)} | "
                     f"{c.get('error', 0)} | {c.get('skipped', 0)} | {r.get('wall_s', 0):.0f} |")
    if "py" in by and "go" in by and by["py"].get("wall_s"):
        lines += ["", f"Wall time go / py: {by['go']['wall_s'] / by['py']['wall_s']:.2f}"]
        py, go = by["py"].get("tests", {}), by["go"].get("tests", {})
        diff = sorted(t for t in set(py) | set(go) if py.get(t, {}).get("outcome") != go.get(t, {}).get("outcome"))
        lines += ["", f"Tests whose outcome differs: {len(diff)}", ""]
        if diff:
            lines += ["Each test's whole function was run again on a fresh cluster; the next two columns count the "
                      "function's failures (failed or error, every parametrization) over the main run and the reruns.",
                      "",
                      "| test | py | go | function fails on py | on go | verdict | the failing run's message |",
                      "|---|---|---|---:|---:|---|---|"]
            for t in diff:
                p, g = py.get(t, {}), go.get(t, {})
                msg = (g if g.get("outcome") in ("failed", "error") else p).get("message", "")
                lines.append(f"| `{t}` | {p.get('outcome', 'absent')} | {g.get('outcome', 'absent')} | "
                             f"{rerun_cell(t, py, rr.get('py', {}))} | {rerun_cell(t, go, rr.get('go', {}))} | "
                             f"{verdict(t, py, go, rr)} | {msg.replace('|', '/')[:160]} |")
    return "\n".join(lines) + "\n"


FAILED = ("failed", "error")


def function_failures(test: str, main: dict, reruns: dict) -> tuple[int, int]:
    """(failures, runs) over every parametrization of test's function, in
    the main run and the reruns."""
    fn = node_of(test)
    fails = runs = 0
    for tid, o in main.items():
        if node_of(tid) == fn:
            runs += 1
            fails += o["outcome"] in FAILED
    for tid, outs in reruns.items():
        if node_of(tid) == fn:
            runs += len(outs)
            fails += sum(o in FAILED for o in outs)
    return fails, runs


def rerun_cell(test: str, main: dict, reruns: dict) -> str:
    fails, runs = function_failures(test, main, reruns)
    return f"{fails}/{runs}"


def verdict(test: str, py: dict, go: dict, reruns: dict) -> str:
    """Judged per test function: a parametrized test whose keys collide
    fails on one parametrization or another at random. regression: the
    function never failed on py (main run and reruns) and this test failed
    on go; flaky on both: the function failed on py too; fails on py only:
    the test never failed on go."""
    py_fails, _ = function_failures(test, py, reruns.get("py", {}))
    go_fails = go.get(test, {}).get("outcome") in FAILED or any(
        o in FAILED for o in reruns.get("go", {}).get(test, []))
    if go_fails and not py_fails:
        return "regression"
    if go_fails:
        return "flaky on both"
    if py.get(test, {}).get("outcome") in FAILED:
        return "fails on py only"
    return "skip/xfail differs"


def differing(runs: list[dict]) -> list[str]:
    by = {r["scheduler"]: r.get("tests", {}) for r in runs}
    py, go = by.get("py", {}), by.get("go", {})
    return sorted(t for t in set(py) | set(go) if py.get(t, {}).get("outcome") != go.get(t, {}).get("outcome"))


def regressions(runs: list[dict]) -> list[str]:
    """Tests that passed on Python's scheduler in every run and failed on
    ours at least once."""
    by = {r["scheduler"]: r for r in runs if "tests" in r}
    if "py" not in by or "go" not in by:
        return []
    rr = {r["scheduler"]: r.get("reruns", {}) for r in runs if "reruns" in r}
    return [t for t in differing(runs) if verdict(t, by["py"]["tests"], by["go"]["tests"], rr) == "regression"]


def node_of(test_id: str) -> str:
    """'test_creation::test_arr_like[...]' -> 'test_creation.py::test_arr_like'
    (the whole function: a flaky parametrization depends on its neighbours)."""
    module, _, name = test_id.partition("::")
    fname = module.rsplit(".", 1)[-1] + ".py"
    return f"{fname}::{name.split('[')[0]}"


def run_all(tmp: Path, files: list[str], schedulers: list[str], reruns: int = 5) -> list[dict]:
    runs = []
    for kind in schedulers:
        d = Path(tempfile.mkdtemp(prefix=f"{NAME}-{kind}-", dir=tmp))
        rec = one_run(kind, files, d)
        runs.append(rec)
        print(f"  {NAME} {kind}: {rec.get('summary', rec.get('error'))} in {rec.get('wall_s', 0):.0f} s", flush=True)
    nodes = sorted({node_of(t) for t in differing(runs)})
    if nodes and reruns > 0:
        for kind in schedulers:
            d = Path(tempfile.mkdtemp(prefix=f"{NAME}-{kind}-reruns-", dir=tmp))
            rec = one_run(kind, files, d, node_ids=nodes, times=reruns)
            rec["scheduler"] = kind
            rec["rerun_of"] = nodes
            runs.append(rec)
            print(f"  {NAME} {kind}: {len(nodes)} test functions rerun {reruns} times", flush=True)
    return runs


def write(out: Path, runs: list[dict], machine: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.json").write_text(json.dumps({"machine": machine, "results": runs}, indent=1))
    (out / f"{NAME}.md").write_text(markdown(runs, machine))


def main() -> int:
    import platform

    import psutil

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", default=",".join(DEFAULT_FILES))
    ap.add_argument("--schedulers", default="py,go")
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--reruns", type=int, default=5, help="runs of each test function whose outcome differs")
    a = ap.parse_args()
    machine = {"command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
               "machine": f"{platform.node()} {psutil.cpu_count()} CPUs",
               "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    with tempfile.TemporaryDirectory() as d:
        runs = run_all(Path(d), a.files.split(","), a.schedulers.split(","), a.reruns)
    if a.results:
        write(a.results, runs, machine)
    print(markdown(runs, machine))
    bad = regressions(runs)
    if bad:
        print("regressions: " + ", ".join(bad))
    return 1 if bad or not all(r["ok"] for r in runs) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(BENCH))
    raise SystemExit(main())
