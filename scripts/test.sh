#!/usr/bin/env bash
# The project's whole test suite (the README's test command; .ci/run calls
# exactly this): setup, gofmt, go vet, go test -race, bounded fuzzing, pytest.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60000x}  # a count, not a duration: -fuzztime=15s sometimes ends in "context deadline exceeded" on a loaded machine (the fuzzing engine's own timer, no failing input)

step() { printf '\n=== %s\n' "$*"; }

step setup
scripts/setup.sh

step gofmt
unformatted=$(gofmt -l $(git ls-files '*.go'; git ls-files --others --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "go test -race"
go test -race -count=1 ./...

step "fuzzing ($FUZZTIME per target)"
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | grep -v '^./.venv/' | sort |
while read -r file; do
  pkg=./$(dirname "${file#./}")
  for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | cut -d' ' -f2); do
    echo "fuzz $pkg $target"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$FUZZTIME" "$pkg"
  done
done

step pytest
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider tests/
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi
exit "$rc"
