"""The machine's floor for the idle phase of the many-workers benchmark
(the target there: an idle scheduler under 0.5 % of a core at 1,000 workers).

An idle scheduler with n stock workers does one thing: it answers each
worker's heartbeat_worker RPC, every distributed.scheduler.heartbeat_interval(n)
seconds per worker (the interval the scheduler itself hands out in the
reply). The floor is msgfloor (scripts/bench/msgfloor: a Go program that
does a read per wake-up and a write per message and nothing else,
GOMAXPROCS 1) serving n connections that each send one heartbeat-sized
message per interval, spread evenly like the workers' periodic callbacks,
and get one reply-sized message back. Its CPU share over the window is what
any scheduler built on one RPC per heartbeat pays on this machine before
decoding or deciding anything.

Sizes: a stock worker's heartbeat_worker request is 605 bytes on the wire
and our reply 77 (a `dask worker` against `dask-go-scheduler --log-level
trace`, whose trace lines give each message's size framing included).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import statistics
import sys
import tempfile
from pathlib import Path

import msgfloor

# the many-workers benchmark's name for these runs' "scheduler"
KIND = "floor"
HEARTBEAT_BYTES = 605
REPLY_BYTES = 77
# the drive dials every connection before the first send; replies to the
# last sends may take a moment
SETTLE_S = 2.0


def heartbeat_interval(n: int) -> float:
    """distributed.scheduler.heartbeat_interval: seconds between one
    worker's heartbeats when n workers are connected."""
    if n <= 10:
        return 0.5
    if n < 50:
        return 1
    if n < 200:
        return 2
    return n / 200 + 1


def make_script(n: int, window_s: float) -> dict:
    """n connections, each sending a heartbeat every heartbeat_interval(n)
    seconds for window_s, the connections' phases spread over the interval."""
    period = heartbeat_interval(n)
    beats = max(1, round(window_s / period))
    events = []
    for j in range(beats):
        for i in range(n):
            events.append({"t": int((j + i / n) * period * 1e9), "c": i, "b": HEARTBEAT_BYTES,
                           "r": [[i, REPLY_BYTES]]})
    events.sort(key=lambda e: e["t"])
    return {"source": f"{n} workers' heartbeats every {period:g} s (distributed's heartbeat_interval({n})), "
                      f"{HEARTBEAT_BYTES} B in and {REPLY_BYTES} B out each",
            "conns": ["rpc"] * n, "events": events}


def one_run(n: int, tmp: Path, idle_s: float, timeout: float, batch: str = "") -> dict:
    """The floor's idle CPU share for n workers over idle_s seconds: a record
    with the many-workers benchmark's idle fields, scheduler "floor". With
    batch, the floor of a design that polls every connection from one
    goroutine that often instead of waking per message (msgfloor serve
    --batch)."""
    rec = {"case": f"{n} workers", "workers": n, "scheduler": KIND, "idle_s": idle_s, "ok": False,
           "heartbeat_interval_s": heartbeat_interval(n), "batch": batch}
    tmp.mkdir(parents=True, exist_ok=True)
    binary = tmp.parent / "msgfloor"  # one build for every run under the same directory
    script = tmp / "heartbeats.json.gz"
    with gzip.open(script, "wt") as f:
        json.dump(make_script(n, idle_s), f, separators=(",", ":"))
    try:
        if not binary.exists():
            msgfloor.build(tmp.parent)
        d, s = msgfloor.replay(binary, script, timeout=idle_s + timeout, batch=batch)
        if d["received"] != d["expected"] or s["failed_writes"]:
            raise RuntimeError(f"replies {d['received']}/{d['expected']}, failed writes {s['failed_writes']}")
        # the serve's window runs from the first heartbeat it reads to the
        # drive's hang-up: the heartbeats' window and the drain after it
        window = s["window_s"]
        cpu = s["cpu_user_s"] + s["cpu_sys_s"]
        rec.update(ok=True, window_s=window, heartbeats=s["messages_in"], idle_cpu_pct=100 * cpu / window,
                   idle_go_pct=100 * cpu / window, idle_helper_pct=0.0,
                   idle_user_pct=100 * s["cpu_user_s"] / window, idle_sys_pct=100 * s["cpu_sys_s"] / window,
                   cpu_us_per_heartbeat=1e6 * cpu / s["messages_in"], drive=d, serve=s)
    except Exception as e:  # noqa: BLE001 - recorded; fails the exit code
        rec["error"] = f"{type(e).__name__}: {e}"
    return rec


def main() -> int:
    """Only the floor, per polling design, interleaved (the many-workers
    benchmark runs the plain floor beside the schedulers):

        flock -x /tmp/measure.lock .venv/bin/python scripts/bench/heartbeat_floor.py \\
            --workers 1000 --batch ,50ms,100ms,250ms --repetitions 3 --results DIR

    "" is a goroutine per connection woken per message; a duration is serve
    --batch. Writes DIR/heartbeat-floor.json (every run) and .md (medians)."""
    ap = argparse.ArgumentParser(description=main.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1000)
    ap.add_argument("--batch", default=",50ms,100ms,250ms", help="comma-separated; empty = per-message wake-ups")
    ap.add_argument("--idle-s", type=float, default=30)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--results", type=Path, required=True)
    a = ap.parse_args()
    batches = a.batch.split(",")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.repetitions):
            for b in batches:
                rec = one_run(a.workers, Path(tmp) / f"r{rep}-{b or 'none'}", a.idle_s, 60, batch=b)
                rec["repetition"] = rep + 1
                runs.append(rec)
                print(json.dumps({k: rec.get(k) for k in ("batch", "repetition", "ok", "idle_cpu_pct",
                                                          "cpu_us_per_heartbeat", "error")}), flush=True)
    a.results.mkdir(parents=True, exist_ok=True)
    cmd = " ".join(["scripts/bench/heartbeat_floor.py", *sys.argv[1:]])
    (a.results / "heartbeat-floor.json").write_text(json.dumps({"command": cmd, "runs": runs}, indent=1))
    lines = [f"# The idle heartbeats' floor at {a.workers:,} workers, per polling design", "",
             f"Command: `flock -x /tmp/measure.lock .venv/bin/python {cmd}`  ",
             f"Recorded {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; designs interleaved "
             f"in each of {a.repetitions} rounds; medians. Each heartbeat is {HEARTBEAT_BYTES} B in and "
             f"{REPLY_BYTES} B out, every {heartbeat_interval(a.workers):g} s per connection.", "",
             "| design | idle CPU % (user + sys) | CPU µs per heartbeat | runs |", "|---|---:|---:|---|"]
    for b in batches:
        ok = [r for r in runs if r["batch"] == b and r["ok"]]
        if not ok:
            lines.append(f"| {b or 'a wake-up per message'} | – | – | failed |")
            continue
        md = lambda f: statistics.median(f(r) for r in ok)  # noqa: E731
        name = "a wake-up per message (the floor for an idle scheduler)" if not b else f"one poll of all connections every {b}"
        lines.append(f"| {name} | {md(lambda r: r['idle_cpu_pct']):.2f} ({md(lambda r: r['idle_user_pct']):.2f} + "
                     f"{md(lambda r: r['idle_sys_pct']):.2f}) | {md(lambda r: r['cpu_us_per_heartbeat']):.1f} | "
                     + ", ".join(f"{r['idle_cpu_pct']:.2f}" for r in ok) + " |")
    (a.results / "heartbeat-floor.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
