#!/usr/bin/env bash
# Fuzzing on demand: every Go fuzz target for FUZZ_EXECS
# executions (default 10,000,000), one after the other. The corpus each run
# grows is copied into the package's testdata/fuzz/<Target>/ (committed: plain
# `go test` replays it as seeds), and a row per target goes to
# scripts/bench/results/fuzz/fuzz.md. A crash fails the script; its input is
# in testdata/fuzz/<Target>/ as Go writes it.
#
#   scripts/fuzz.sh [TargetRegexp]      FUZZ_EXECS=1000000 FUZZ_PARALLEL=2
set -euo pipefail
cd "$(dirname "$0")/.."
EXECS=${FUZZ_EXECS:-10000000}
PAR=${FUZZ_PARALLEL:-1}
only=${1:-.}
out=scripts/bench/results/fuzz
mkdir -p "$out"
cache=$(go env GOCACHE)/fuzz/$(go list -m)
rows=()
while read -r file; do
  dir=$(dirname "${file#./}")
  for target in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | cut -d' ' -f2); do
    [[ "$target" =~ $only ]] || continue
    log=$(mktemp)
    echo "=== fuzz ./$dir $target: $EXECS executions, -parallel $PAR"
    t0=$(date +%s)
    rc=0
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="${EXECS}x" -parallel="$PAR" "./$dir" 2>&1 | tee "$log" | grep -E '^(fuzz: elapsed: [0-9]*[05]m0s|---|FAIL|ok|PASS)' || true
    grep -qE '^ok ' "$log" || rc=1
    wall=$(( $(date +%s) - t0 ))
    last=$(grep -E '^fuzz: elapsed' "$log" | tail -1)
    mkdir -p "$dir/testdata/fuzz/$target"
    if [ -d "$cache/$dir/$target" ]; then
      cp -n "$cache/$dir/$target"/* "$dir/testdata/fuzz/$target/" 2>/dev/null || true
    fi
    corpus=$(ls "$dir/testdata/fuzz/$target" | wc -l)
    rows+=("| ./$dir | $target | $EXECS | $wall | $corpus | $([ $rc -eq 0 ] && echo 0 || echo FAILED) | ${last#fuzz: } |")
    rm -f "$log"
    [ $rc -eq 0 ] || { printf '%s\n' "${rows[@]}"; echo "fuzz: $target failed"; exit 1; }
  done
done < <(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | grep -v '^./.venv/' | sort)
{
  echo "Fuzzing run of $(date -u +%Y-%m-%d), $(nproc) cores, -parallel $PAR (scripts/fuzz.sh)."
  echo
  echo "| package | target | executions | wall (s) | corpus committed | crashes | last status line |"
  echo "|---|---|---:|---:|---:|---:|---|"
  printf '%s\n' "${rows[@]}"
} > "$out/fuzz.md.new"
if [ "$only" = "." ]; then mv "$out/fuzz.md.new" "$out/fuzz.md"; else cat "$out/fuzz.md.new" >> "$out/fuzz.md"; rm "$out/fuzz.md.new"; fi
cat "$out/fuzz.md"
