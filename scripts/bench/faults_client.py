"""The client that is stopped in the client-stop case (faults.py): a stock
Client that holds BLOCKS blocks of BYTES bytes each on the workers, says
"ready", waits for a line on stdin, then gathers them all through the
scheduler and reports what it got.

    python faults_client.py SCHEDULER_ADDRESS BLOCKS BYTES WORKER[,WORKER...]

Prints "ready", then "gathered N" or "error TYPE: TEXT"; exits 0 either way
(the parent compares the outcome between schedulers).
"""

from __future__ import annotations

import sys

from distributed import Client, wait

import faults_tasks


def main(address: str, blocks: int, nbytes: int, workers: list[str]) -> int:
    with Client(address, timeout=60) as client:
        futs = [client.submit(faults_tasks.block, i, nbytes, workers=[workers[i % len(workers)]], pure=False)
                for i in range(blocks)]
        wait(futs)
        print("ready", flush=True)
        if not sys.stdin.readline():
            return 1
        try:
            got = client.gather(futs, direct=False)  # through the scheduler, as the case
            print(f"gathered {sum(a.nbytes for a in got)}", flush=True)
        except Exception as e:  # noqa: BLE001 - the outcome is the output
            print(f"error {type(e).__name__}: {str(e)[:200]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")))
