"""The client side of one plugin-cost run (scripts/bench/plugin_cost.py).

    plugin_cost_client.py --scheduler-file F --size N [--plugin]

With --plugin it registers a SchedulerPlugin whose transition() counts
(defined here, in __main__: pickled by value, as a user's own plugin in a
script), then prints "START <host pid or 0>", maps inc over range(N),
gathers, and, with the plugin, waits until the plugin has counted N
processing->memory transitions: on the Go scheduler the hooks run in the
Python host behind a queue, so the window must include the host's work;
on Python's they ran inline already. Then "DONE <json>".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from distributed.diagnostics.plugin import SchedulerPlugin


class CountingPlugin(SchedulerPlugin):
    name = "counting"

    def __init__(self):
        self.n = 0
        self.memory = 0

    def transition(self, key, start, finish, *args, **kwargs):
        self.n += 1
        if finish == "memory":
            self.memory += 1


def inc(x):
    return x + 1


def say(line: str) -> None:
    print(line, flush=True)


def counted(dask_scheduler):
    p = dask_scheduler.plugins["counting"]
    return p.memory, p.n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scheduler-file", required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--plugin", action="store_true")
    args = ap.parse_args()
    from distributed import Client

    with Client(scheduler_file=args.scheduler_file, timeout=60) as client:
        client.wait_for_workers(1, timeout=60)
        host_pid = 0
        if args.plugin:
            client.register_plugin(CountingPlugin())
            host_pid = client.run_on_scheduler(os.getpid)
        say(f"START {host_pid}")
        t0 = time.perf_counter()
        futures = client.map(inc, range(args.size))
        results = client.gather(futures)
        wall_gather = time.perf_counter() - t0
        n = 0
        if args.plugin:
            while True:
                memory, n = client.run_on_scheduler(counted)
                if memory >= args.size:
                    break
                time.sleep(0.02)
        wall = time.perf_counter() - t0
        want = args.size * (args.size + 1) // 2
        ok = sum(results) == want
        say("DONE " + json.dumps({"wall_s": wall, "gather_s": wall_gather, "transitions_counted": n, "ok": ok,
                                   "error": None if ok else f"sum {sum(results)}, expected {want}"}))
        sys.stdin.read()
        del futures


if __name__ == "__main__":
    main()
