"""Latency of small computations, Go scheduler side by side with the Python
scheduler: the round trip a notebook cell or a test suite feels.

    scripts/bench.sh --workloads latency [--repetitions 3] [--latency-cases submit,array-sum-4,slice-mean]
                     [--latency-pause-ms 25]

Each run: a fresh scheduler, 2 stock workers x 2 threads without nannies,
one client process (scripts/bench/latency_client.py) that runs a case's
round trip 20 times untimed, then 200 times timed one after another, each
result checked exactly; with --latency-pause-ms each timed call comes
after that pause (latency_client.py says why). Per run: the median and p90 of the 200 round trips.
Runs are interleaved py, go, go, py, ... per case (the order turns each repetition); the table shows, per case
and scheduler, the median over runs of each run's median and p90, and the
ratio Go / Python of those.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import traceback
from pathlib import Path

from procs import BENCH, Scheduler, Workers, python_env, run_interleaved
from report import runs_table, write_named

NAME = "latency"
CASES = {"submit": 200, "array-sum-4": 200, "slice-mean": 200, "submit-fast-client": 200}  # case -> timed round trips
DEFAULT_CASES = tuple(CASES)
SMOKE_ROUND_TRIPS = 20
WORKERS, THREADS, MEMORY = 2, 2, 2 * 2**30


def quantile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation (numpy's default)."""
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def one_run(case: str, kind: str, round_trips: int, tmp: Path, timeout: float, env: dict | None = None,
            profile: Path | None = None, pause_ms: float = 0.0) -> dict:
    rec = {"case": case, "scheduler": kind, "round_trips": round_trips, "pause_ms": pause_ms, "ok": False}
    sched = Scheduler(kind, dict(env or {}), tmp, profile=profile).launch()
    workers = Workers(tmp, sched.scheduler_file, WORKERS, MEMORY, nthreads=THREADS, nanny=False).start()
    try:
        sched.wait_ready(60)
        proc = subprocess.run(
            [sys.executable, str(BENCH / "latency_client.py"), case, "--scheduler-file", str(sched.scheduler_file),
             "--repetitions", str(round_trips), "--pause-ms", str(pause_ms)],
            capture_output=True, text=True, timeout=timeout, env=python_env())
        done = [ln for ln in proc.stdout.splitlines() if ln.startswith("DONE ")]
        if proc.returncode != 0 or not done:
            raise RuntimeError(f"client exited {proc.returncode}: {proc.stderr[-2000:]}")
        got = json.loads(done[-1][5:])
        times = got["times_s"]
        rec.update(median_s=statistics.median(times), p90_s=quantile(times, 0.9), min_s=min(times),
                   max_s=max(times), wrong=got["wrong"], times_s=times)
        rec["ok"] = got["wrong"] == 0 and len(times) == round_trips
        if got["wrong"]:
            rec["error"] = f"{got['wrong']} wrong results"
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        rec["error"] = f"{type(e).__name__}: {e}"
        rec["traceback"] = traceback.format_exc()
        with (tmp.parent / "failures.log").open("a") as f:
            f.write(f"=== {case} {kind}\n{rec['traceback']}\n--- scheduler\n{sched.logs()}\n{workers.logs()}\n")
    finally:
        workers.stop()
        sched.stop()
    return rec


def run_all(tmp: Path, cases: list[str], repetitions: int, smoke: bool, timeout: float,
            on_record=lambda results: None, profile: Path | None = None,
            schedulers: tuple[str, ...] = ("py", "go"), env: dict | None = None,
            pause_ms: float = 0.0) -> list[dict]:
    """Interleaved: for each repetition, each case, every scheduler, in the
    given order on even repetitions and reversed on odd ones
    (procs.run_interleaved, which says why)."""
    def describe(rec: dict) -> str:
        return f"median {rec['median_s'] * 1e3:7.2f} ms  p90 {rec['p90_s'] * 1e3:7.2f} ms"

    return run_interleaved(
        tmp, NAME, cases, repetitions, lambda case, rep: schedulers,
        lambda case, kind, d, prof: one_run(case, kind, SMOKE_ROUND_TRIPS if smoke else CASES[case], d, timeout,
                                            env, prof, pause_ms),
        describe, on_record, profile)


# ---- report ------------------------------------------------------------------

def medians(results: list[dict]) -> dict[tuple[str, str], dict]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in results:
        groups.setdefault((r["case"], r["scheduler"]), []).append(r)
    out = {}
    for key, runs in groups.items():
        ok = [r for r in runs if r["ok"]]
        m = {"runs": len(runs), "ok": len(ok)}
        for f in ("median_s", "p90_s"):
            vals = [r[f] for r in ok]
            m[f] = statistics.median(vals) if vals else None
            m[f + "_range"] = (min(vals), max(vals)) if vals else None
        out[key] = m
    return out


def markdown(results: list[dict], machine: dict) -> str:
    med = medians(results)
    cases = list(dict.fromkeys(r["case"] for r in results))
    lines = [
        "# Latency of small computations: Go scheduler vs the Python scheduler",
        "",
        f"Command: `{machine.get('command', '')}`  ",
        f"Machine: {machine.get('machine', '')}, Python {machine.get('python', '')}  ",
        f"Started: {machine.get('started', '')}; {WORKERS} stock workers x {THREADS} threads, no nanny; "
        "per run 20 untimed round trips, then the timed ones"
        + (f", each after a {results[0].get('pause_ms')} ms pause (untimed)" if results and results[0].get("pause_ms") else
           ", back to back")
        + "; runs interleaved per case, in the order of the table on even repetitions and reversed on odd ones",
        "",
        "Each cell: the median over runs of the run's median (or p90) round trip, in ms, with the runs' "
        "range; × is that scheduler / Python (go:PATH is another build of ours).",
        "",
        "| case | scheduler | runs ok | median ms (range) | p90 ms (range) | median × | p90 × |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]

    def ms(v):
        return "–" if v is None else f"{v * 1e3:.2f}"

    def rng(r):
        return "" if r is None else f" ({r[0] * 1e3:.2f}–{r[1] * 1e3:.2f})"

    kinds = list(dict.fromkeys(r["scheduler"] for r in results))
    for case in cases:
        py = med.get((case, "py"))
        for kind in kinds:
            m = med.get((case, kind))
            if m is None:
                continue

            def ratio(f):
                if kind == "py" or py is None or not py.get(f) or m.get(f) is None:
                    return "–"
                return f"{m[f] / py[f]:.2f}"

            lines.append(f"| {case} | {kind} | {m['ok']}/{m['runs']} | {ms(m['median_s'])}{rng(m['median_s_range'])} "
                         f"| {ms(m['p90_s'])}{rng(m['p90_s_range'])} | {ratio('median_s')} | {ratio('p90_s')} |")
    lines += runs_table(results, [
        ("median ms", lambda r: ms(r.get("median_s"))),
        ("p90 ms", lambda r: ms(r.get("p90_s"))),
        ("min ms", lambda r: ms(r.get("min_s"))),
        ("max ms", lambda r: ms(r.get("max_s"))),
    ])
    return "\n".join(lines) + "\n"


def write(out: Path, results: list[dict], machine: dict) -> None:
    slim = [{k: v for k, v in r.items() if k != "traceback"} for r in results]
    write_named(out, NAME, slim, machine, markdown(results, machine))


if __name__ == "__main__":  # a quick look without the harness: latency.py CASE [KIND ...]
    import tempfile

    case_arg = sys.argv[1] if len(sys.argv) > 1 else "submit"
    kinds = tuple(sys.argv[2:]) or ("py", "go")
    with tempfile.TemporaryDirectory() as d:
        for rec in run_all(Path(d), [case_arg], 1, False, 600, schedulers=kinds):
            if not rec["ok"]:
                print(rec.get("error"), file=sys.stderr)

