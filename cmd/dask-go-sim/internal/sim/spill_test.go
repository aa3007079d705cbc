package sim

import (
	"strconv"
	"testing"

	"daskgo/protocol"
)

// The spill buffer evicts the least recently used key in memory; a read
// brings a spilled key back; dropping a spilled key frees no memory.
func TestSpillBufferEvictsLeastRecentlyUsed(t *testing.T) {
	b := newSpillBuffer()
	eq := func(got, want int64, what string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %d, want %d", what, got, want)
		}
	}
	eq(b.store(1, 10)+b.store(2, 20)+b.store(3, 30), 60, "stored")
	eq(b.store(2, 20), 0, "storing a held key again")
	eq(b.touch(1), 0, "touching a key in memory")
	d, _ := b.evict()
	eq(d, -20, "first eviction (key 2, least recently used)")
	d, _ = b.evict()
	eq(d, -30, "second eviction (key 3)")
	eq(b.fast, 10, "bytes in memory")
	eq(b.touch(2), 20, "reading spilled key 2")
	eq(b.drop(3), 0, "dropping spilled key 3")
	eq(b.drop(1), -10, "dropping key 1")
	if !b.held(2) || b.held(3) || b.fast != 20 {
		t.Fatalf("held 2 %v, 3 %v, fast %d", b.held(2), b.held(3), b.fast)
	}
	b.evict()
	if _, ok := b.evict(); ok {
		t.Fatal("evicted from an empty buffer")
	}
}

// gatedRoots: 100 roots of 1 MiB that all finish before a 5 s gate lets
// their consumers run, so the roots sit in memory together.
func gatedRoots() *Graph {
	g := &Graph{Workload: "gated-roots", Scale: "synthetic"}
	gate := g.add(protocol.StrKey("gate"), nil, 5, 8, 0)
	roots := make([]int32, 100)
	for i := range roots {
		roots[i] = g.add(tupleKey("root", i), nil, 0.1, 1<<20, 0)
	}
	for i, r := range roots {
		g.add(protocol.StrKey("use-"+strconv.Itoa(i)), []int32{gate, r}, 0.01, 8, 0)
	}
	g.DataBytes = 100 << 20
	return g
}

// With 32 MiB workers (spilling from 19 MiB in memory) the 25 MiB of
// roots per worker spill, the run still completes and frees everything,
// and the cluster peaks lower than without spilling; off, nothing spills.
func TestSpillingCapsWorkerMemory(t *testing.T) {
	g := gatedRoots()
	cfg := Config{Workers: 4, Threads: 1, MemoryLimit: 32 << 20, Mode: "main", Seed: 1, Validate: true}
	on := mustRun(t, g, cfg)
	cfg.NoSpill = true
	off := mustRun(t, g, cfg)
	if !on.Spill || on.SpilledBytes == 0 || off.Spill || off.SpilledBytes != 0 {
		t.Fatalf("spilled %d bytes with spilling, %d without", on.SpilledBytes, off.SpilledBytes)
	}
	if on.LeakedBytes != 0 || on.NTasks != len(g.Tasks) {
		t.Fatalf("leaked %d bytes", on.LeakedBytes)
	}
	if on.PeakClusterMemoryBytes >= off.PeakClusterMemoryBytes || on.PeakClusterMemoryBytes > 4*(20<<20) {
		t.Fatalf("peak %d with spilling, %d without (want below both and 4 × 20 MiB)",
			on.PeakClusterMemoryBytes, off.PeakClusterMemoryBytes)
	}
	// An idle worker's memory counts toward the 70 % threshold: with
	// 12 MiB idle the monitor spills down to 60 % of the limit less 12 MiB.
	cfg.NoSpill = false
	cfg.Mem.WorkerIdle = 12 << 20
	idle := mustRun(t, g, cfg)
	if idle.SpilledBytes <= on.SpilledBytes || idle.PeakClusterMemoryBytes >= on.PeakClusterMemoryBytes {
		t.Fatalf("with idle memory: spilled %d (without %d), peak %d (without %d)",
			idle.SpilledBytes, on.SpilledBytes, idle.PeakClusterMemoryBytes, on.PeakClusterMemoryBytes)
	}
}
