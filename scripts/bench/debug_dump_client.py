"""The other client of a debug-dump run (scripts/bench/debug_dump.py): a
stock Client timing client.submit(inc, i).result() round trips one after
another until told to stop, while the driver dumps the cluster state.

    debug_dump_client.py --scheduler-file F --ready R --stop S --out O

Writes R after 20 untimed round trips, then times round trips until S
exists, and writes O: {"samples": [[start unix seconds, seconds], ...],
"wrong": n}.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def inc(x):
    return x + 1


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scheduler-file", required=True)
    ap.add_argument("--ready", type=Path, required=True)
    ap.add_argument("--stop", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    from distributed import Client

    with Client(scheduler_file=a.scheduler_file, timeout=60) as client:
        client.wait_for_workers(1, timeout=60)
        for i in range(20):
            assert client.submit(inc, i, pure=False).result() == i + 1
        a.ready.write_text("ready")
        samples, wrong, i = [], 0, 0
        while not a.stop.exists():
            start, t0 = time.time(), time.perf_counter()
            ok = client.submit(inc, i, pure=False).result() == i + 1
            samples.append([start, time.perf_counter() - t0])
            wrong += not ok
            i += 1
    a.out.write_text(json.dumps({"samples": samples, "wrong": wrong}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
