"""Host many stock `distributed.Worker`s in one process, as the many-workers
cases and benchmarks need them: a thousand `dask worker` processes do not fit
on a 2-core machine, a thousand Worker objects on a few event loops do.

    python worker_host.py SCHEDULER_ADDRESS N NAME_PREFIX [--nthreads 1]

Starts N workers named NAME_PREFIX-0 .. NAME_PREFIX-(N-1), no nanny, on
127.0.0.1, prints "ready N" once all have registered, and closes them all on
SIGTERM or SIGINT; it exits by itself once every one of its workers has
closed on its own (the scheduler closed them), as `dask worker` exits when
its worker closes. With --go-on-stdin it first prints "imported" and waits
for a line on stdin before starting any worker: a benchmark times the
registrations of many hosts from one instant, without their start-up. A worker that fails to start ends the process with its
error (exit 1); nothing is skipped silently.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile

from distributed import Worker


async def main(address: str, n: int, prefix: str, nthreads: int, memory_limit: str,
               start_batch: int, go_on_stdin: bool) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if go_on_stdin:
        print("imported", flush=True)
        if not await loop.run_in_executor(None, sys.stdin.readline):
            return 1  # the benchmark went away before saying go
    workers: list[Worker] = []
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-") as tmp:
        try:
            for first in range(0, n, start_batch):
                batch = [Worker(address, name=f"{prefix}-{i}", nthreads=nthreads, host="127.0.0.1",
                                dashboard=False, memory_limit=memory_limit, local_directory=tmp)
                         for i in range(first, min(n, first + start_batch))]
                workers.extend(batch)
                await asyncio.gather(*batch)
            print(f"ready {len(workers)}", flush=True)
            stopped = asyncio.ensure_future(stop.wait())
            all_closed = asyncio.ensure_future(asyncio.gather(*(w.finished() for w in workers)))
            await asyncio.wait([stopped, all_closed], return_when=asyncio.FIRST_COMPLETED)
            if all_closed.done():
                print(f"closed {len(workers)}", flush=True)
            stopped.cancel()
            all_closed.cancel()
        finally:
            await asyncio.gather(*(w.close(timeout=10) for w in workers), return_exceptions=True)
    return 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("address")
    ap.add_argument("n", type=int)
    ap.add_argument("prefix")
    ap.add_argument("--nthreads", type=int, default=1)
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--start-batch", type=int, default=25,
                    help="workers started concurrently (registration storms use n)")
    ap.add_argument("--go-on-stdin", action="store_true",
                    help='print "imported", then start the workers on a line from stdin')
    a = ap.parse_args()
    sys.exit(asyncio.run(main(a.address, a.n, a.prefix, a.nthreads, a.memory_limit, a.start_batch,
                              a.go_on_stdin)))
