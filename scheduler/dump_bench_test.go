package scheduler

import (
	"fmt"
	"testing"
)

// stuckGraph holds n tasks on the scheduler, as the debug-dump benchmark
// does: n/2 roots restricted to a worker that never joins, and n/2
// dependents waiting on them.
func stuckGraph(b *testing.B, n int) *tstate {
	s := newTestState(&testing.T{}, withWorkers("w1:2"))
	s.cfg.ValidateInvariants = false
	var gts []GraphTask
	for i := 0; i < n/2; i++ {
		gts = append(gts, annotated(task(fmt.Sprintf("ones-%d", i)), "workers", []any{"tcp://nowhere:9"}))
	}
	for i := 0; i < n/2; i++ {
		gts = append(gts, task(fmt.Sprintf("add-%d", i), fmt.Sprintf("ones-%d", i)))
	}
	s.submit("c1", gts)
	if s.NumTasks() != n {
		b.Fatalf("%d tasks", s.NumTasks())
	}
	return s
}

// BenchmarkDumpState: the cluster dump's copy of a 100k-task engine, the
// time the engine's lock is held for a dump.
func BenchmarkDumpState(b *testing.B) {
	s := stuckGraph(b, 100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = s.DumpState()
	}
}

// BenchmarkDumpTasks: the host's copy of a 100k-task engine
// (dask_scheduler.tasks): DumpState without the log and the events.
func BenchmarkDumpTasks(b *testing.B) {
	s := stuckGraph(b, 100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = s.DumpTasks()
	}
}

// BenchmarkDumpPeers: dask_scheduler.workers beside 100k tasks.
func BenchmarkDumpPeers(b *testing.B) {
	s := stuckGraph(b, 100_000)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = s.DumpPeers()
	}
}
