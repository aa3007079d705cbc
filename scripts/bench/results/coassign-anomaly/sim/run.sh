#!/usr/bin/env bash
# The simulator on anom-persist, before and after pacing by memory:
#   scripts/bench/results/coassign-anomaly/sim/run.sh BEFORE_SIM AFTER_SIM
# BEFORE_SIM: dask-go-sim built from 1d337a0; AFTER_SIM: bin/dask-go-sim.
# As the validation runs it (scripts/sim/README.md): 4 workers x 1 thread x
# 1 GiB on 2 shared cores, the calibration, graphs under hash seeds 1-5
# (seed n also draws the worker speeds); one JSON record per run.
set -euo pipefail
cd "$(dirname "$0")/../../../../.."
out=scripts/bench/results/coassign-anomaly/sim
for build in before after; do
  sim=$1; [ $build = after ] && sim=$2
  mkdir -p $out/$build
  for n in 1 2 3 4 5; do
    g=scripts/sim/graphs/anom-persist-small.jsonl.gz
    [ $n = 1 ] || g=scripts/sim/graphs/hash-seeds/$n/anom-persist-small.jsonl.gz
    for mode in withholding coassign; do
      $sim run -graph $g -workers 4 -threads 1 -memory-limit 1GiB -cores 2 \
        -calibration scripts/sim/calibration.json -mode $mode -seed $n -trace-peak \
        > $out/$build/anom-persist-$mode-$n.json
    done
  done
done
