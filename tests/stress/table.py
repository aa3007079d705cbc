"""Renders the stress rows (JSON lines, one per case) as the Markdown table
of scripts/bench/README.md (Stress).  python table.py stress.jsonl"""

from __future__ import annotations

import json
import sys


def main() -> int:
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    print("| case | runs | failures | lost or wrong | peak RSS Go / helper (MiB) | final RSS Go / helper (MiB) "
          "| goroutines before → after | fds before → after | live peer connections before → after "
          "| dangling connections | per-task state after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['runs']} | {r['failures']} | {r['lost_or_wrong']} "
              f"| {r['peak_go_mib']:.0f} / {r['peak_helper_mib']:.0f} | {r['final_go_mib']:.0f} / {r['final_helper_mib']:.0f} "
              f"| {r['goroutines_before']} → {r['goroutines_after']} | {r['fds_before']} → {r['fds_after']} "
              f"| {r['connections_before']} → {r['connections_after']} | {r['dangling_after']} "
              f"| {r['per_task_state_after']} |")
    notes = [(r["case"], n) for r in rows for n in r.get("notes", [])]
    if notes:
        print()
        for case, n in notes:
            print(f"- {case}: {n}")
    scale = {r["scale"] for r in rows}
    print(f"\nScale: {', '.join(sorted(scale))}; wall per case (s): "
          + ", ".join(f"{r['case'].split(':')[0]} {r['wall_s']:.0f}" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
