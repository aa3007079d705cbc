#!/usr/bin/env bash
# Engine CPU per task on the reference run (a 999,999-task tree reduction on
# 1,000 simulated workers, withholding), two simulator binaries interleaved:
#
#   scripts/sim/engine-throughput.sh BEFORE_BIN AFTER_BIN ROUNDS OUTDIR
#
# Each round runs BEFORE then AFTER; every run's record goes to
# OUTDIR/{before,after}-ROUND.json and the medians to OUTDIR/summary.json.
# A binary older than engine_cpu_raw_s reports the raw figure as
# engine_cpu_s; its clock-corrected figure is computed with the clock cost
# the other binary measured in the same round (the handle counts are equal
# when the engines behave alike, which the summary checks).
# BEFORE_ARGS and AFTER_ARGS, when set, are added to that side's command
# line: the same binary on two engine clocks is
#   BEFORE_ARGS="-engine-clock thread" scripts/sim/engine-throughput.sh BIN BIN 5 OUT
# Run it under the exclusive measurement lock: flock -x /tmp/measure.lock ...
set -euo pipefail
before=$1 after=$2 rounds=$3 out=$4
spec=${SPEC:-tree:500000} # SPEC=tree:2000 for a quick try
mkdir -p "$out"
for r in $(seq "$rounds"); do
  for side in before after; do
    bin=$before extra=${BEFORE_ARGS:-}
    [ "$side" = after ] && bin=$after extra=${AFTER_ARGS:-}
    # shellcheck disable=SC2086 # extra is a list of flags
    "$bin" run -synthetic "$spec" -workers 1000 $extra > "$out/$side-$r.json"
  done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {s: [json.load(open(f"{out}/{s}-{r}.json")) for r in range(1, rounds + 1)] for s in ("before", "after")}
def raw(rec): return rec.get("engine_cpu_raw_s", rec["engine_cpu_s"])
summary = {"command": f"scripts/sim/engine-throughput.sh BEFORE AFTER {rounds} {out}", "rounds": rounds,
           "engine_clock": {s: recs[0].get("engine_clock", "thread") for s, recs in runs.items()}}
for s, recs in runs.items():
    n = recs[0]["n_tasks"]
    rows = []
    for r, (rec, other) in enumerate(zip(recs, runs["after"])):
        clock = rec.get("engine_clock_ns") or other["engine_clock_ns"]
        # one clock cost per timed interval (engine_timed: every Handle and
        # Recycle), per Handle in records made before Recycle was timed
        corrected = raw(rec) - rec.get("engine_timed", rec["engine_handles"]) * clock * 1e-9
        rows.append({"round": r + 1, "raw_us_per_task": raw(rec) * 1e6 / n, "clock_ns": clock,
                     "us_per_task": corrected * 1e6 / n, "handles": rec["engine_handles"],
                     "makespan_s": rec["makespan_s"], "sim_wall_s": rec["sim_wall_s"]})
    summary[s] = {"runs": rows,
                  "median_raw_us_per_task": statistics.median(x["raw_us_per_task"] for x in rows),
                  "median_us_per_task": statistics.median(x["us_per_task"] for x in rows)}
facts = lambda rec: {k: v for k, v in rec.items() if not k.startswith(("engine_cpu", "engine_clock", "engine_wall", "sim_wall"))}
summary["same_simulation"] = all(facts(a) == facts(b) for a in runs["before"] for b in runs["after"])
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
for s in ("before", "after"):
    print(s, summary["engine_clock"][s], "median raw %.2f us/task, clock-corrected %.2f us/task" % (summary[s]["median_raw_us_per_task"], summary[s]["median_us_per_task"]),
          [round(x["us_per_task"], 2) for x in summary[s]["runs"]])
print("same simulation (every field but the timings):", summary["same_simulation"])
PY
