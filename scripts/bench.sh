#!/usr/bin/env bash
# Benchmarks the Go scheduler side by side with the Python scheduler (issue 5):
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
exec .venv/bin/python scripts/bench/harness.py "$@"
