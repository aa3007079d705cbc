"""The client side of one latency run (scripts/bench/latency.py): round trips
of small computations through a stock Client, timed one by one.

    latency_client.py CASE --scheduler-file F [--repetitions 200] [--warm-up 20] [--pause-ms 25]

--pause-ms sleeps that long before each timed call, untimed: calls as a
person types them. Back to back, a stock Client writes update-graph at most
once per 10 ms (its BatchedSend interval), so each call waits for the
previous call's batch window and that window is what gets measured; after a
pause longer than the interval the client writes at once.

Cases (each checks its result exactly, every repetition):
    submit       client.submit(inc, i).result()
    submit-fast-client
                 the same with the client's own batching interval at 1 ms
                 instead of distributed's 10 ms (Client._ensure_connected):
                 a diagnostic. A stock client writes update-graph at most
                 once per 10 ms, so `submit` measures that interval on any
                 scheduler whose round trip is shorter; this shows the
                 scheduler side's share.
    array-sum-4  da.arange(4000, chunks=1000).sum().compute()       (9 tasks)
    slice-mean   da.ones((600, 600), chunks=100)[50:550:2, 50:550].mean().compute()  (122 tasks)

Prints one line, "DONE <json>": the round trips in seconds, in order.
"""

from __future__ import annotations

import argparse
import json
import time


def inc(x):
    return x + 1


def make_case(case: str, client):
    """A function of the repetition i that runs one round trip and returns
    whether its result was exact."""
    import dask.array as da

    if case in ("submit", "submit-fast-client"):
        return lambda i: client.submit(inc, i).result() == i + 1
    if case == "array-sum-4":
        return lambda i: da.arange(4000, chunks=1000).sum().compute() == 4000 * 3999 // 2
    if case == "slice-mean":
        return lambda i: da.ones((600, 600), chunks=(100, 100))[50:550:2, 50:550].mean().compute() == 1.0
    raise SystemExit(f"unknown case {case!r}")


def fast_client_stream() -> None:
    """Clients made after this batch their stream to the scheduler every
    1 ms instead of every 10 ms."""
    import distributed.client
    from distributed.batched import BatchedSend

    class FastBatchedSend(BatchedSend):
        def __init__(self, interval, loop=None, serializers=None):
            super().__init__("1ms", loop=loop, serializers=serializers)

    distributed.client.BatchedSend = FastBatchedSend


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--scheduler-file", required=True)
    ap.add_argument("--repetitions", type=int, default=200)
    ap.add_argument("--warm-up", type=int, default=20)
    ap.add_argument("--pause-ms", type=float, default=0.0)
    a = ap.parse_args()
    from distributed import Client

    if a.case == "submit-fast-client":
        fast_client_stream()
    with Client(scheduler_file=a.scheduler_file, timeout=60) as client:
        client.wait_for_workers(1, timeout=60)
        one = make_case(a.case, client)
        for i in range(a.warm_up):
            if not one(i):
                raise SystemExit(f"{a.case}: wrong result in warm-up {i}")
        times, wrong = [], 0
        for i in range(a.repetitions):
            if a.pause_ms:
                time.sleep(a.pause_ms / 1e3)
            t0 = time.perf_counter()
            ok = one(i)
            times.append(time.perf_counter() - t0)
            wrong += not ok
    print("DONE " + json.dumps({"times_s": times, "wrong": wrong}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
