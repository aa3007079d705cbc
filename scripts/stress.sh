#!/usr/bin/env bash
# The stress suite at full scale: soak, worker SIGKILL loop,
# SIGSTOP past worker-ttl, 100 concurrent clients, a client killed holding
# futures, the helper killed mid-graph, garbage on the port, peers that stop
# reading (SIGSTOPped workers and clients: test_faults.py); and
# fan-out to 200 workers through a pool of 8 connections, a storm of 1,000
# stock workers connecting at once then all SIGKILLed while a client
# computes, and a worker flooding heartbeats. Each case runs
# against its own Go scheduler and stock workers; the rows (runs, failures,
# lost or wrong results, RSS, goroutines, fds) go to
# scripts/bench/results/stress/stress.{jsonl,md}. The normal test command
# runs the same cases at smoke scale.
#
#   scripts/stress.sh [pytest args, e.g. -k clients]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
out=scripts/bench/results/stress
mkdir -p "$out"
rm -f "$out/stress.jsonl"
set +e
DASKGO_STRESS=full DASKGO_STRESS_RESULTS="$PWD/$out/stress.jsonl" \
  .venv/bin/python -m pytest -q -p no:cacheprovider tests/stress "$@"
rc=$?
set -e
.venv/bin/python tests/stress/table.py "$out/stress.jsonl" > "$out/stress.md"
cat "$out/stress.md"
exit "$rc"
