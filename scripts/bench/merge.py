#!/usr/bin/env python
"""Merge benchmark result directories into one report.

A full run takes hours here, so it is made in parts (a few workloads at a
time, the overhead benchmarks on their own); this writes the union as one
latest.json / timeseries.json / overhead.json / latest.md with the plots.
Directories are read in order; a later one replaces an earlier one's
records of the same workload (a re-run), and its overhead results if it has
any; with --pool their runs are pooled instead (more repetitions of one
benchmark), each later directory's repetitions numbered on. The report
lists every part's command.

    .venv/bin/python scripts/bench/merge.py DIR... --out scripts/bench/results [--pool]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report  # noqa: E402


def load_part(d: Path) -> tuple[list[dict], dict, list[dict], dict]:
    records = json.loads((d / "latest.json").read_text()) if (d / "latest.json").exists() else []
    series = json.loads((d / "timeseries.json").read_text()) if (d / "timeseries.json").exists() else {}
    over, machine = [], {}
    if (d / "overhead.json").exists():
        o = json.loads((d / "overhead.json").read_text())
        over, machine = o.get("results", []), o.get("machine", {})
    return records, series, over, machine


def pooled(records: list[dict], recs: list[dict], ser: dict) -> tuple[list[dict], dict]:
    """recs and their series with each (workload, configuration)'s
    repetitions numbered on from those records already has."""
    nxt: dict[tuple, int] = {}
    for r in records:
        key = (r["workload"], r["configuration"])
        nxt[key] = max(nxt.get(key, 0), r["repetition"] + 1)
    out, out_ser = [], {}
    for r in recs:
        rep = nxt.get((r["workload"], r["configuration"]), 0) + r["repetition"]
        ts = ser.get(f"{r['workload']}|{r['configuration']}|{r['repetition']}")
        r = {**r, "repetition": rep}
        out.append(r)
        if ts is not None:
            out_ser[f"{r['workload']}|{r['configuration']}|{rep}"] = ts
    return out, out_ser


def merge(dirs: list[Path], pool: bool = False) -> tuple[list[dict], dict, list[dict], dict]:
    records: list[dict] = []
    series: dict = {}
    over: list[dict] = []
    commands, starts, machine = [], [], {}
    for d in dirs:
        recs, ser, ov, mach = load_part(d)
        if not mach:
            raise SystemExit(f"merge: {d} has no overhead.json (with the run's machine description)")
        if pool:
            recs, ser = pooled(records, recs, ser)
        else:
            replaced = {r["workload"] for r in recs}
            records = [r for r in records if r["workload"] not in replaced]
            series = {k: v for k, v in series.items() if k.split("|")[0] not in replaced}
        records += recs
        series.update(ser)
        if ov:
            over = ov
        if machine and (mach.get("workers"), mach.get("memory_limit_bytes")) != \
                (machine.get("workers"), machine.get("memory_limit_bytes")):
            raise SystemExit(f"merge: {d} ran another cluster shape than the parts before it")
        machine = {**mach, **machine} if machine else dict(mach)
        if (recs or ov) and mach.get("command"):
            commands.append(mach["command"])
            starts.append(mach.get("started", "?"))
    machine["command"] = "` then `".join(commands)
    machine["started"] = ", ".join(starts)
    return records, series, over, machine


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pool", action="store_true",
                    help="pool the runs of a workload that several directories have (more repetitions of the "
                         "same benchmark) instead of the later directory replacing the earlier's")
    args = ap.parse_args(argv)
    records, series, over, machine = merge(args.dirs, args.pool)
    args.out.mkdir(parents=True, exist_ok=True)
    report.write(args.out, records, series, over, machine)
    print(f"{len(records)} workload records, {len(over)} overhead records -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
