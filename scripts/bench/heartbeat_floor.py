"""The machine's floor for the idle phase of the many-workers benchmark
(issue 31, must-show 1's idle CPU target).

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

import gzip
import json
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


def one_run(n: int, tmp: Path, idle_s: float, timeout: float) -> dict:
    """The floor's idle CPU share for n workers over idle_s seconds: a record
    with the many-workers benchmark's idle fields, scheduler "floor"."""
    rec = {"case": f"{n} workers", "workers": n, "scheduler": KIND, "idle_s": idle_s, "ok": False,
           "heartbeat_interval_s": heartbeat_interval(n)}
    tmp.mkdir(parents=True, exist_ok=True)
    binary = tmp.parent / "msgfloor"  # one build for every run under the same directory
    script = tmp / "heartbeats.json.gz"
    with gzip.open(script, "wt") as f:
        json.dump(make_script(n, idle_s), f, separators=(",", ":"))
    try:
        if not binary.exists():
            msgfloor.build(tmp.parent)
        d, s = msgfloor.replay(binary, script, timeout=idle_s + timeout)
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
