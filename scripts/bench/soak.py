"""Memory over rounds of big graphs: does the scheduler give memory back
after a graph is forgotten? (The stress suite's soak case checks the
results; this measures the memory.)

    .venv/bin/python scripts/bench/soak.py [--schedulers py,go] [--rounds 10] [--tasks 100000]
                                           [--workers 0] [--settle 8] [--idle-tail 0] [--json OUT]
    .venv/bin/python scripts/bench/soak.py --render GO.json PY.json    # the Markdown table

For each scheduler: start it (no workers by default, or N stock workers
with nannies), connect a Client, then for each round submit a binary
reduction tree of plain builtins (overhead.tree_graph) under fresh keys. With
workers, even rounds are computed to the end and odd rounds cancelled 2 s
after their first tasks run; without workers every round is cancelled once
the scheduler is idle (the graph is then fully held). `--settle` seconds
after each round, record the RSS of the scheduler process and, for Go, of
its materializer helper apart; then `--idle-tail` seconds of idling, every
10 s. Prints a line per round and writes the records with --json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from overhead import tree_graph
from procs import Sampler, Scheduler, Workers
from waiting import idle_cpu_rate, wait_idle

MiB = 2**20


def soak(kind: str, args, tmp: Path) -> list[dict]:
    from distributed import Client, wait

    sched = Scheduler(kind, {}, tmp).start()
    workers = Workers(tmp, sched.scheduler_file, args.workers, 2**30).start() if args.workers else None
    out = []
    try:
        with Client(scheduler_file=str(sched.scheduler_file), timeout=60) as client:
            if args.workers:
                client.wait_for_workers(args.workers, timeout=120)
            sampler = Sampler([], sched.proc.pid).start()
            time.sleep(args.settle)
            # with no workers, a round ends when the scheduler side is as
            # idle as it is now (waiting.wait_idle)
            idle_rate = None if args.workers else idle_cpu_rate(sampler)
            out.append({"scheduler": kind, "round": "start", "rss_bytes": sampler.scheduler_rss[-1],
                        "helper_rss_bytes": sampler.helper_rss[-1]})
            for r in range(args.rounds):
                dsk, root = tree_graph(args.tasks, f"soak{r}")
                future = client.get(dsk, root, sync=False)
                computed = bool(args.workers) and r % 2 == 0
                if computed:
                    wait(future, timeout=args.timeout)
                    if future.status != "finished":
                        raise RuntimeError(f"round {r}: the graph ended {future.status}")
                elif args.workers:
                    # cancelled once it runs: in, ordered, tasks on the workers
                    wait_running(client, args.timeout)
                    time.sleep(2)
                    client.cancel(future)
                else:
                    wait_idle(sampler, args.timeout, idle_rate)
                    client.cancel(future)
                del future
                time.sleep(args.settle)
                rec = {"scheduler": kind, "round": r, "how": "computed" if computed else "cancelled",
                       "rss_bytes": sampler.scheduler_rss[-1], "helper_rss_bytes": sampler.helper_rss[-1],
                       "peak_rss_bytes": max(sampler.scheduler_rss)}
                out.append(rec)
                print(f"  {kind} round {r:2} ({rec['how']:9}): scheduler {rec['rss_bytes'] / MiB:6.0f} MiB, "
                      f"helper {rec['helper_rss_bytes'] / MiB:5.0f} MiB", flush=True)
            for t in range(10, int(args.idle_tail) + 1, 10):  # idle: does it fall back?
                time.sleep(10)
                out.append({"scheduler": kind, "round": f"idle+{t}s", "rss_bytes": sampler.scheduler_rss[-1],
                            "helper_rss_bytes": sampler.helper_rss[-1]})
                print(f"  {kind} idle {t} s after the last round: scheduler {out[-1]['rss_bytes'] / MiB:6.0f} MiB, "
                      f"helper {out[-1]['helper_rss_bytes'] / MiB:5.0f} MiB", flush=True)
            sampler.stop()
    finally:
        if workers:
            workers.stop()
        sched.stop()
    return out


def wait_running(client, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(client.processing().values()):
        if time.monotonic() > deadline:
            raise TimeoutError("the graph never started running")
        time.sleep(0.2)


def render(paths: list[str]) -> str:
    """A Markdown table of soak runs (one JSON per scheduler), round by round."""
    runs = {}
    for p in paths:
        for r in json.loads(Path(p).read_text())["records"]:
            runs.setdefault(r["scheduler"], {})[str(r["round"])] = r
    kinds = [k for k in ("go", "py") if k in runs]
    rounds = list(dict.fromkeys(k for kind in kinds for k in runs[kind]))
    head = "| round | " + " | ".join(
        "Go process RSS MiB | Go helper RSS MiB" if k == "go" else "Python scheduler RSS MiB" for k in kinds) + " |"
    lines = [head, "|---|" + "---:|" * (len(head.split("|")) - 3)]
    for rd in rounds:
        how = next((runs[k][rd].get("how", "") for k in kinds if rd in runs[k]), "")
        cells = []
        for k in kinds:
            r = runs[k].get(rd)
            if k == "go":
                cells += [f"{r['rss_bytes'] / MiB:.0f}", f"{r['helper_rss_bytes'] / MiB:.0f}"] if r else ["", ""]
            else:
                cells.append(f"{r['rss_bytes'] / MiB:.0f}" if r else "")
        lines.append(f"| {rd}{' (' + how + ')' if how else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    if sys.argv[1:2] == ["--render"]:
        print(render(sys.argv[2:]), end="")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedulers", default="py,go")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=0, help="stock workers with nannies (0: none, every round cancelled)")
    ap.add_argument("--settle", type=float, default=8.0, help="seconds after each round before the RSS is read")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--idle-tail", type=float, default=0.0, help="seconds of idle after the last round, RSS every 10 s")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()
    records = []
    for kind in [k for k in args.schedulers.split(",") if k]:
        with tempfile.TemporaryDirectory(prefix=f"soak-{kind}-") as tmp:
            records += soak(kind, args, Path(tmp))
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
