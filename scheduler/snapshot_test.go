package scheduler

import (
	"testing"

	"daskgo/scheduler/coord"
)

// TestSnapshotAggregates: the snapshot's counts agree with the engine, its
// stream keeps the last runs only, and it shares nothing with the state.
func TestSnapshotAggregates(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2", "w2:1"), withSaturation(1.0),
		func(c *Config, _ *[]string) { c.DashboardStreamLength = 2 })
	s.submit("c1", append(rootTasks("x", 12), treeTasks("sum", "x", 12, 3)...), "sum-2-0")
	for finished := 0; finished < 3; { // three roots finish, wherever they run
		for _, w := range []string{"w1", "w2"} {
			if p := s.Worker(addr(w)).processing.Items(); len(p) > 0 && finished < 3 {
				s.finish(w, p[0].Key.String())
				finished++
			}
		}
	}
	s.handle(&CoordOp{Op: &coord.SemaphoreRegister{Name: "lock", MaxLeases: 1}})
	s.handle(&CoordOp{Op: &coord.SemaphoreAcquire{Call: coord.Call{ReplyTo: 1}, Name: "lock", LeaseID: "a"}})
	snap := s.Snapshot()

	eq(t, len(snap.Workers), 2, "workers")
	eq(t, snap.Workers[0].Address, addr("w1"), "workers by address")
	eq(t, snap.Clients, 1, "clients without fire-and-forget")
	total := 0
	for st, n := range snap.Tasks {
		total += n
		eq(t, n, s.Count(Status(st)), "tasks "+Status(st).String())
	}
	eq(t, total, s.NumTasks(), "every task counted once")
	eq(t, snap.Queued, s.Count(StatusQueued), "queued")
	var x *PrefixView
	for i := range snap.Prefixes {
		if snap.Prefixes[i].Name == "x" {
			x = &snap.Prefixes[i]
		}
	}
	if x == nil {
		t.Fatalf("no prefix x in %+v", snap.Prefixes)
	}
	eq(t, x.States[StatusMemory], 3, "x in memory")
	eq(t, x.StateTotals[StatusProcessing] >= 3, true, "x entered processing at least 3 times")
	eq(t, x.ComputeSeconds, 1.5, "x's compute time (3 runs of 0.5 s)")
	eq(t, x.NBytes, int64(24), "x's bytes in memory")
	eq(t, len(snap.Stream), 2, "stream keeps the last 2 runs")
	eq(t, snap.StreamIndex, int64(3), "stream index counts every run")
	eq(t, snap.TasksDone, int64(3), "tasks done")
	eq(t, len(snap.Semaphores), 1, "semaphores")
	eq(t, snap.Semaphores[0].Active, int64(1), "active leases")
	eq(t, snap.Semaphores[0].AcquireTotal, int64(1), "acquires")

	before := snap.Workers[0].Processing
	s.finish("w1", s.Worker(addr("w1")).processing.Items()[0].Key.String())
	eq(t, snap.Workers[0].Processing, before, "a snapshot does not change with the engine")
}
