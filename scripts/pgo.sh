#!/usr/bin/env bash
# Regenerates cmd/dask-go-scheduler/default.pgo, the CPU profile the Go
# compiler optimizes the scheduler with (profile-guided optimization: `go
# build` applies a main package's default.pgo by itself, so scripts/setup.sh,
# the pip package's build and a plain `go build ./cmd/dask-go-scheduler` all
# use it; cmd/dask-go-sim/default.pgo links to it, so the simulator's engine
# is the scheduler's).
#
#   scripts/pgo.sh     # a few minutes; run it on a quiet machine
#
# The profile is what the scheduler does under load, in two parts:
#   - the engine on the reference run (BenchmarkEngineReplay1M: a
#     1M-task tree over 1,000 simulated workers, withholding on), about two
#     thirds of the samples;
#   - the whole Go process with stock workers and a stock Client:
#     client.map of 20,000 tasks and the 200,000-task tree, three runs each
#     (scripts/bench.sh --workloads graph-path --profile), so the message
#     path (reading, decoding, encoding, writing) is in it too; most of the
#     rest. Go's inliner takes the call sites that carry the top 99 % of the
#     profile's call weight, so both parts' hot paths are in.
# Profiles are taken from binaries built without PGO, so the file does not
# feed on itself. Go matches a profile to the source by function and line
# offset and ignores what no longer matches: a stale profile costs only the
# optimizations it no longer guides, and this script refreshes it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go test -c -pgo=off -o "$out/sim.test" ./cmd/dask-go-sim/internal/sim
"$out/sim.test" -test.run '^$' -test.bench 'BenchmarkEngineReplay1M$' -test.benchtime 1x \
  -test.cpuprofile "$out/engine.pprof" >&2

go build -pgo=off -o "$out/dask-go-scheduler" ./cmd/dask-go-scheduler
scripts/bench.sh --workloads graph-path --graph-path-cases map-20k,tree-200k \
  --graph-path-schedulers "go:$out/dask-go-scheduler" --repetitions 3 \
  --profile "$out/process" --results "$out/results" >&2

go tool pprof -proto "$out/engine.pprof" "$out"/process/*/cpu.pprof > "$out/default.pgo"
mv "$out/default.pgo" cmd/dask-go-scheduler/default.pgo
echo "pgo: wrote cmd/dask-go-scheduler/default.pgo ($(wc -c < cmd/dask-go-scheduler/default.pgo) bytes)"
