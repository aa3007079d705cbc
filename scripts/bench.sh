#!/usr/bin/env bash
# Benchmarks the Go scheduler side by side with the Python scheduler:
# workloads x configurations on fresh clusters of stock workers, plus the
# scheduler-overhead runs with the Go zero worker. See scripts/bench/harness.py.
#
#   scripts/bench.sh            # full run (over an hour): scripts/bench/results/latest.{json,md}, plots
#   scripts/bench.sh --smoke    # tiny sizes, < 2 min, results in a temporary directory
#   scripts/bench.sh --help     # workload/configuration subsets, sizes, repetitions
#
# Exits non-zero if any run failed or produced a wrong result.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2  # venv, pinned packages, bin/dask-go-scheduler (idempotent)
go build -o bin/dask-go-zero-worker ./cmd/dask-go-zero-worker
# many-connections holds 10,000 workers: a socket each in the scheduler,
# two in the zero workers. Raise the fd limit where allowed (root here);
# many_connections.py stops with a clear error if it is still too low.
ulimit -Hn 65536 2>/dev/null || true
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec .venv/bin/python scripts/bench/harness.py "$@"
