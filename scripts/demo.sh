#!/usr/bin/env bash
# Sets up (virtualenv, pinned packages, binary), then starts dask-go-scheduler
# and two stock `dask worker`s on 127.0.0.1, runs a dask.array reduction and
# an xarray anomaly through them with a stock Client, prints results and
# timings, and stops exactly the processes it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python scripts/demo.py
