"""The floor of the Go scheduler's per-message I/O cost (scripts/bench/msgfloor).

The Go scheduler with stock workers spends ~100-200 us of CPU per task; with
zero workers ~23 us, and profiles put ~37 % of the rest in the kernel (read,
writev, epoll, context switches). This driver measures what the I/O stack
alone costs: it builds scripts/bench/msgfloor (daskgo/comm as the scheduler
uses it, no engine), then N peers in one asyncio loop, talking through
distributed's own comm (handshake included, so the bytes are a stock
worker's), each send one task-finished-like message every --period-ms
through distributed's BatchedSend(interval="2ms"), as a worker does, and read
the compute-task-sized reply the Go side sends back for each. The Go process
reports its own CPU (getrusage) from the first message to the last stream's
end; the result is Go CPU microseconds per message in (one in plus one reply
out), context switches and reply batches per message.

Default pace: 4 peers x one message per 12 ms is what 4 single-thread stock
workers running 4 ms tasks send (about 333 msg/s in all); --peers 2
--period-ms 2.5 is 2 workers x 2 threads running trivial tasks (800 msg/s).

    .venv/bin/python scripts/bench/msgfloor.py
    .venv/bin/python scripts/bench/msgfloor.py --peers 2 --period-ms 2.5 --json out.json

The Go process is stopped by its PID (SIGTERM, then SIGKILL), also when the
run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import json
import os
import pickle
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from procs import stop

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "./scripts/bench/msgfloor"
TYPE_PICKLE = pickle.dumps(collections.OrderedDict, protocol=5)  # 42 bytes, a typical result type


def build(outdir: str) -> str:
    """go build the server into outdir (never bin/: another run may use it)."""
    binary = os.path.join(outdir, "msgfloor")
    subprocess.run(["go", "build", "-o", binary, PACKAGE], cwd=REPO, check=True)
    return binary


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    """One line of proc's stdout, or RuntimeError after timeout seconds."""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise RuntimeError(f"msgfloor printed nothing within {timeout}s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"msgfloor exited (rc={proc.poll()}) without output")
    return line.strip()


def task_finished(token: str, i: int) -> dict:
    """A worker's task-finished (worker_state_machine.TaskFinishedMsg.to_dict)."""
    now = time.time()
    return {
        "op": "task-finished",
        "key": (f"inc-{token}", i),
        "run_id": i,
        "nbytes": 28,
        "type": TYPE_PICKLE,
        "typename": "collections.OrderedDict",
        "metadata": {},
        "thread": 140230425900608,
        "startstops": [{"action": "compute", "start": now - 0.004, "stop": now}],
        "stimulus_id": f"task-finished-{now}",
        "status": "OK",
    }


class Peer:
    """One fake worker stream: sends on a fixed schedule, reads every reply."""

    def __init__(self, addr: str):
        self.addr = addr
        self.token = uuid.uuid4().hex
        self.sent = 0
        self.replies = 0
        self.reply_batches = 0
        self.comm = None
        self.bsend = None
        self.reader = None

    async def connect(self) -> None:
        from distributed.batched import BatchedSend
        from distributed.comm import connect

        self.comm = await connect(self.addr)
        await self.comm.write({"op": "floor-stream"})
        self.bsend = BatchedSend(interval="2ms")  # Worker.batched_stream's interval
        self.bsend.start(self.comm)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        from distributed.comm import CommClosedError

        try:
            while True:
                msgs = await self.comm.read()
                self.reply_batches += 1
                self.replies += len(msgs) if isinstance(msgs, (list, tuple)) else 1
        except CommClosedError:
            pass

    async def send_until(self, start: float, end: float, period: float) -> None:
        """One message every period from start to end (loop time). Late
        wake-ups do not shift the schedule: the rate stays the peers'."""
        loop = asyncio.get_running_loop()
        t = start
        while t < end:
            if (delay := t - loop.time()) > 0:
                await asyncio.sleep(delay)
            self.bsend.send(task_finished(self.token, self.sent))
            self.sent += 1
            t += period

    async def close(self, wait: float = 2.0) -> None:
        """Wait (bounded) for the last replies, then close-stream and close."""
        deadline = time.monotonic() + wait
        while self.replies < self.sent and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        self.bsend.send({"op": "close-stream"})
        # tornado reads a number as an absolute IOLoop time: pass a timedelta
        await self.bsend.close(timeout=datetime.timedelta(seconds=5))
        await asyncio.wait_for(self.reader, timeout=5)


async def drive(addr: str, peers: int, period: float, duration: float) -> dict:
    ps = [Peer(addr) for _ in range(peers)]
    await asyncio.gather(*(p.connect() for p in ps))
    cpu0 = time.process_time()  # the driver's own CPU, after imports and handshakes
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.1
    end = start + duration
    # staggered, as independent workers are not in step
    await asyncio.gather(*(p.send_until(start + i * period / peers, end, period)
                           for i, p in enumerate(ps)))
    await asyncio.gather(*(p.close() for p in ps))
    return {
        "driver_cpu_s": time.process_time() - cpu0,
        "sent": sum(p.sent for p in ps),
        "replies": sum(p.replies for p in ps),
        "reply_batches_read": sum(p.reply_batches for p in ps),
    }


def run_once(binary: str, args: argparse.Namespace, rep: int) -> dict:
    env = dict(os.environ)
    if args.gomaxprocs:
        env["GOMAXPROCS"] = str(args.gomaxprocs)
    proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        addr = read_line(proc, 30)
        peers = asyncio.run(drive(addr, args.peers, args.period_ms / 1000, args.duration))
        proc.stdin.close()  # the Go side prints its report and exits
        report = json.loads(read_line(proc, 15))
        proc.wait(timeout=10)
    finally:
        stop(proc, grace=5)
    n = report["messages_in"]
    if n == 0:
        raise RuntimeError(f"repetition {rep}: the Go side received no message: {report}")
    cpu = report["cpu_user_s"] + report["cpu_sys_s"]
    return {
        "repetition": rep, "peers": args.peers, "period_ms": args.period_ms,
        "duration_s": args.duration, **report, **peers,
        "msgs_per_s": n / report["wall_s"] if report["wall_s"] else None,
        "cpu_us_per_msg": cpu / n * 1e6,
        "user_us_per_msg": report["cpu_user_s"] / n * 1e6,
        "sys_us_per_msg": report["cpu_sys_s"] / n * 1e6,
        "vcsw_per_msg": report["voluntary_ctxt_switches"] / n,
        "ivcsw_per_msg": report["nonvoluntary_ctxt_switches"] / n,
        "batches_out_per_msg": report["batches_out"] / n,
        "batches_in_per_msg": report["batches_in"] / n,
        "cpu_util": cpu / report["window_s"] if report["window_s"] else None,
        "driver_cpu_us_per_msg": peers["driver_cpu_s"] / n * 1e6,
        "loadavg_1m": os.getloadavg()[0],
    }


def line(r: dict) -> str:
    return (f"rep {r['repetition']}: {r['messages_in']} msgs in ({r['msgs_per_s']:.0f}/s), "
            f"{r['cpu_us_per_msg']:.1f} us CPU/msg (user {r['user_us_per_msg']:.1f} + "
            f"sys {r['sys_us_per_msg']:.1f}), {r['vcsw_per_msg']:.2f} vol + "
            f"{r['ivcsw_per_msg']:.2f} invol ctx sw/msg, {r['batches_out_per_msg']:.2f} "
            f"batches out/msg, {r['batches_in_per_msg']:.2f} batches in/msg, "
            f"replies {r['replies']}/{r['sent']}, Go util {r['cpu_util']:.1%}, "
            f"driver {r['driver_cpu_us_per_msg']:.0f} us/msg, load {r['loadavg_1m']:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--period-ms", type=float, default=12.0,
                    help="each peer sends one message this often")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of sending")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--gomaxprocs", type=int, default=0,
                    help="GOMAXPROCS for the Go side (default: its own, 1 like the scheduler)")
    ap.add_argument("--json", metavar="OUT", help="write the records here")
    args = ap.parse_args()
    if args.peers < 1 or args.period_ms <= 0 or args.duration <= 0 or args.repetitions < 1:
        ap.error("--peers, --period-ms, --duration and --repetitions must be positive")

    with tempfile.TemporaryDirectory(prefix="msgfloor-") as tmp:
        binary = build(tmp)
        print(f"msgfloor: {args.peers} peers x 1 msg / {args.period_ms} ms, "
              f"{args.duration}s, {args.repetitions} repetitions", flush=True)
        records = []
        for rep in range(args.repetitions):
            records.append(run_once(binary, args, rep))
            print(line(records[-1]), flush=True)
    med = statistics.median(r["cpu_us_per_msg"] for r in records)
    print(f"median: {med:.1f} us Go CPU per message in "
          f"(user {statistics.median(r['user_us_per_msg'] for r in records):.1f}, "
          f"sys {statistics.median(r['sys_us_per_msg'] for r in records):.1f}), "
          f"{statistics.median(r['vcsw_per_msg'] for r in records):.2f} vol ctx sw/msg, "
          f"{statistics.median(r['batches_out_per_msg'] for r in records):.2f} batches out/msg; "
          f"runs: {', '.join(format(r['cpu_us_per_msg'], '.1f') for r in records)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"median_cpu_us_per_msg": med, "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
