#!/usr/bin/env python
"""Python and Go paired by hash seed: the runs of NAME-seedN configurations
(scripts/bench/procs.py, resolve_config) in one or more bench results, each
py-X-seedN set against go-X-seedN, so that both schedulers are compared on
the same dask.order priorities.

    .venv/bin/python scripts/bench/paired.py RESULTS/latest.json [...] > RESULTS/paired.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import split_seed  # noqa: E402

GiB, MiB = 2**30, 2**20


def pairs(paths: list[Path]) -> list[tuple[str, str, str, int, dict, dict]]:
    out = []
    for path in paths:
        by: dict[tuple[str, str, int], dict[str, dict]] = {}
        for r in json.loads(path.read_text()):
            base, seed = split_seed(r["configuration"])
            kind, _, mode = base.partition("-")
            if seed is not None and kind in ("py", "go") and r.get("ok"):
                by.setdefault((r["workload"], mode, seed), {})[kind] = r
        for (wl, mode, seed), p in sorted(by.items()):
            if len(p) == 2:
                out.append((path.parent.name, wl, mode, seed, p["py"], p["go"]))
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path, nargs="+", help="latest.json files")
    args = ap.parse_args(argv)
    rows = pairs(args.results)
    print("# Python and Go paired by hash seed\n")
    print(f"Command: `.venv/bin/python scripts/bench/paired.py {' '.join(str(p) for p in args.results)}`\n")
    print("| results | workload | mode | seed | Python peak GiB | Go peak GiB | Go / Python | Python spilled MiB | Go spilled MiB |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for res, wl, mode, seed, p, g in rows:
        print(f"| {res} | {wl} | {mode} | {seed} | {p['peak_memory_bytes'] / GiB:.2f} | {g['peak_memory_bytes'] / GiB:.2f} | "
              f"{g['peak_memory_bytes'] / p['peak_memory_bytes']:.2f} | {p['spilled_bytes'] / MiB:.0f} | {g['spilled_bytes'] / MiB:.0f} |")
    print()
    for key in sorted({(r[1], r[2]) for r in rows}):
        rs = [r for r in rows if (r[1], r[2]) == key]
        ratios = [g["peak_memory_bytes"] / p["peak_memory_bytes"] for *_, p, g in rs]
        print(f"- {key[0]}, {key[1]}: {len(rs)} seeds, Go / Python median {statistics.median(ratios):.2f} "
              f"({min(ratios):.2f}–{max(ratios):.2f}), Go higher on {sum(x > 1 for x in ratios)}; medians Python "
              f"{statistics.median(r[4]['peak_memory_bytes'] for r in rs) / GiB:.2f} GiB, Go "
              f"{statistics.median(r[5]['peak_memory_bytes'] for r in rs) / GiB:.2f} GiB")


if __name__ == "__main__":
    main()
