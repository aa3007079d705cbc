"""The demo behind scripts/demo.sh: what this project is for, side by side.

The same two workloads run on the Python scheduler from this environment
(`dask scheduler`, withholding on: distributed's default worker-saturation
1.1) and on dask-go-scheduler with withholding + co-assignment, each on a
fresh cluster of 4 stock `dask worker`s (1 thread, 1 GiB each, with
nannies), through a stock Client:

  basic-sum  a reduction over thin chunks (scripts/bench/workloads.py)
  anom-mean  an xarray monthly anomaly (groupby mean, then subtract)

Printed per run: wall time, the workers' peak memory (summed RSS, sampled
every 100 ms), the bytes moved between workers (the workers' own
transfer_outgoing_bytes_total) and the result check. It uses the
benchmark's harness (scripts/bench/harness.py); scripts/bench.sh measures
the same things with repetitions and at larger sizes.
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

from harness import Cluster, run_workload  # noqa: E402
from workloads import Context  # noqa: E402

WORKERS, MEMORY = 4, 2**30
# Sized so that the four runs and the two clusters fit in under two
# minutes on a 2-core machine: 2.4 GiB over 256 thin chunks, 0.3 GiB
# of daily grids.
SCALE = {"basic-sum": 0.12, "anom-mean": 0.3}
CONFIGS = (
    ("py-queuing", "Python scheduler, withholding (default)"),
    ("go-queuing-coassign", "Go scheduler, withholding + co-assignment"),
)


def main() -> int:
    t_start = time.perf_counter()
    records = {}
    with tempfile.TemporaryDirectory(prefix="dask-go-demo-") as tmp:
        for config, label in CONFIGS:
            print(f"{label}: starting a scheduler and {WORKERS} stock workers", flush=True)
            with Cluster(config, Path(tmp) / config, WORKERS, MEMORY) as cluster:
                for name, scale in SCALE.items():
                    ctx = Context(memory=WORKERS * MEMORY, nthreads=WORKERS, smoke=False, scale=scale)
                    rec, _ = run_workload(cluster, name, ctx, 0, timeout=300)
                    records[name, config] = rec
                    status = "ok" if rec["ok"] else rec.get("error", "failed")
                    print(f"  {name}: {rec.get('wall_s', 0):.1f} s, {status}", flush=True)
                    if not rec["ok"]:
                        print(cluster.logs()[-4000:], file=sys.stderr)
    print()
    print_table(records)
    print(f"\ndemo finished in {time.perf_counter() - t_start:.0f} s")
    failed = [k for k, r in records.items() if not r["ok"]]
    if failed:
        print(f"demo FAILED: {failed}", file=sys.stderr)
        return 1
    print("demo OK")
    return 0


def print_table(records: dict) -> None:
    head = ("workload", "scheduler", "wall s", "peak worker memory GiB", "moved between workers MiB", "result")
    rows = []
    for name in SCALE:
        base = records.get((name, CONFIGS[0][0]))
        for config, _ in CONFIGS:
            r = records.get((name, config))
            if r is None:
                continue
            desc = r.get("description", "")
            rows.append((
                f"{name} ({desc})" if config == CONFIGS[0][0] else "",
                config,
                cell(r, "wall_s", base, 1),
                cell(r, "peak_memory_bytes", base, 2, 2**30),
                cell(r, "transferred_bytes", base, 0, 2**20),
                "ok" if r["ok"] else "FAILED",
            ))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    for line in (head, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(x).ljust(w) if i < 2 else str(x).rjust(w) for i, (x, w) in enumerate(zip(line, widths))))
    print("\n(×: the Go run's figure over the Python run's; lower is better)")


def cell(r: dict, key: str, base: dict | None, digits: int, unit: float = 1.0) -> str:
    if key not in r:
        return "-"
    text = f"{r[key] / unit:,.{digits}f}"
    if base is not None and base is not r and base.get(key):
        text += f" ({r[key] / base[key]:.2f}×)"
    return text


if __name__ == "__main__":
    sys.exit(main())
