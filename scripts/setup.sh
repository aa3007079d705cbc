#!/usr/bin/env bash
# Sets up everything the demo and the tests need, idempotently and quickly
# when nothing changed: a Python >= 3.10 virtualenv in .venv with the pinned
# packages of requirements.txt, Go module downloads, and bin/dask-go-scheduler.
set -euo pipefail
cd "$(dirname "$0")/.."

find_python() {
  for py in "${PYTHON:-}" python3 python3.13 python3.12 python3.11 python3.10; do
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "setup: no Python >= 3.10 found (set PYTHON=/path/to/python3)" >&2
  return 1
}

if [ ! -x .venv/bin/python ]; then
  py=$(find_python)
  echo "setup: creating .venv with $($py --version)"
  "$py" -m venv .venv
fi

stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned Python packages"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  echo "$want" > "$stamp"
fi

# Headless Chromium for the dashboard's browser test
# (tests/test_dashboard_browser.py fails, naming the cause, without it).
if ! command -v chromium >/dev/null 2>&1; then
  apt=""
  if [ "$(id -u)" = 0 ]; then apt="apt-get"; elif sudo -n true 2>/dev/null; then apt="sudo apt-get"; fi
  if [ -n "$apt" ]; then
    echo "setup: installing chromium (apt-get)"
    DEBIAN_FRONTEND=noninteractive $apt install -y -q chromium >/dev/null 2>&1 ||
      { $apt update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive $apt install -y -q chromium >/dev/null 2>&1; } ||
      echo "setup: could not install chromium with apt-get; the dashboard's browser test will fail" >&2
  else
    echo "setup: chromium is missing and apt-get needs root; the dashboard's browser test will fail" >&2
  fi
fi

command -v go >/dev/null 2>&1 || { echo "setup: go is not on PATH" >&2; exit 1; }
go mod download
mkdir -p bin
go build -o bin/dask-go-scheduler ./cmd/dask-go-scheduler
echo "setup: ready (bin/dask-go-scheduler, .venv)"
