#!/usr/bin/env bash
# Sets up (virtualenv, pinned packages, binary), then runs the same thin-chunk
# reduction and xarray anomaly through a stock Client on the Python scheduler
# (withholding) and on dask-go-scheduler (withholding + co-assignment), each
# with 4 stock `dask worker`s on 127.0.0.1, and prints wall time, peak worker
# memory and bytes moved between workers side by side (scripts/demo.py). It
# stops exactly the processes it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python scripts/demo.py
