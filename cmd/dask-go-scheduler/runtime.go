package main

import (
	"os"
	"runtime"
)

// runtimeDefaults sets the Go runtime for a scheduler's load: many small
// messages on a few dozen connections, the engine entered by one goroutine
// at a time (scheduler/server/doc.go).
// GOMAXPROCS and GOGC in the environment still win.
//
// GOMAXPROCS 1: with a second P every goroutine handoff (stream reader ->
// engine loop -> batched writer) may wake another thread to steal it; on
// the 20k-task client.map with workers pacing tasks like stock ones
// (dask-go-zero-worker --task-duration 2ms) that cost about a quarter of the
// scheduler's CPU (138 vs 202 µs per task, medians of 3, raw socket I/O in
// both; before raw I/O, futex calls fell from 10.9k to 4.5k per 5 s with
// one P). The engine runs on one goroutine at a time anyway, as the Python
// scheduler runs on one thread.
//
// GOGC stays at Go's 100. It used to be 400 (less GC on zero-worker runs),
// but on the 200k-task tree the Go process used the same CPU either way
// (1.79 s at 100, 1.77 s at 400) and peaked at 323 MiB instead of 480 MiB
// (scripts/bench.sh --workloads graph-path, one run each).
func runtimeDefaults() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
