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

// The memory monitor acts on its interval, as distributed's periodic
// callback does: between two checks a worker's memory grows past the 70 %
// threshold, and the longer the interval the further. The SpillBuffer's
// rule (60 % of the limit in managed bytes) still caps it at once.
func TestMemoryMonitorActsOnItsInterval(t *testing.T) {
	g := gatedRoots()
	cfg := Config{Workers: 4, Threads: 1, MemoryLimit: 32 << 20, Mode: "main", Seed: 1, Validate: true,
		Mem: MemoryModel{WorkerIdle: 12 << 20}}
	limit := float64(cfg.MemoryLimit)
	threshold := int64(spillFraction*limit) - 12<<20 // data above which the monitor spills
	buffer := int64(spillTargetFraction * limit)     // the SpillBuffer's cap
	peaks := map[float64]int64{}
	for _, every := range []float64{0.01, 0.1, 2} {
		cfg.MonitorInterval = every
		r := mustRun(t, g, cfg)
		if r.SpilledBytes == 0 || r.LeakedBytes != 0 {
			t.Fatalf("interval %v: spilled %d, leaked %d", every, r.SpilledBytes, r.LeakedBytes)
		}
		if r.PeakWorkerMemoryBytes > buffer+1<<20 {
			t.Fatalf("interval %v: a worker peaked at %d, over the SpillBuffer's %d", every, r.PeakWorkerMemoryBytes, buffer)
		}
		peaks[every] = r.PeakWorkerMemoryBytes
	}
	if peaks[2] <= threshold+2<<20 || peaks[0.01] >= peaks[0.1] || peaks[0.1] >= peaks[2] {
		t.Fatalf("worker peaks %v against the monitor threshold %d: want the overshoot to grow with the interval",
			peaks, threshold)
	}
}

// Periodic events alone (the memory monitor's, the samples) do not keep
// each other going: a run with nothing else queued ends.
func TestTicksAloneDoNotKeepARunGoing(t *testing.T) {
	s := &Sim{cfg: Config{Workers: 2, MemoryLimit: 1 << 30, Mode: "main"}, remaining: 1}
	if err := s.cfg.fill(); err != nil {
		t.Fatal(err)
	}
	s.workers = []*worker{newWorker(0, "a", 1, 1<<30), newWorker(1, "b", 1, 1<<30)}
	s.scheduleTick(evSample, 0, s.cfg.SampleInterval)
	s.scheduleTick(evMemoryMonitor, 0, s.cfg.MonitorInterval)
	s.scheduleTick(evMemoryMonitor, 1, s.cfg.MonitorInterval/2)
	for n := 0; ; n++ {
		e := s.clk.next()
		if e == nil {
			break
		}
		if n > 10 {
			t.Fatalf("still ticking after %d events (t=%.1f s)", n, s.clk.now)
		}
		s.step(e)
	}
}

// The sampled peak is the cluster's memory at the samples only: never
// above the peak, and nothing when the first sample comes after the run.
func TestSampledPeakTakesSamples(t *testing.T) {
	g := gatedRoots()
	cfg := Config{Workers: 4, Threads: 1, MemoryLimit: 1 << 30, Mode: "main", Seed: 1}
	r := mustRun(t, g, cfg)
	if r.PeakClusterSampledBytes <= 0 || r.PeakClusterSampledBytes > r.PeakClusterMemoryBytes {
		t.Fatalf("sampled peak %d, peak %d", r.PeakClusterSampledBytes, r.PeakClusterMemoryBytes)
	}
	cfg.SampleInterval = 1000
	if r := mustRun(t, g, cfg); r.PeakClusterSampledBytes != 0 {
		t.Fatalf("sampled %d with no sample during the run", r.PeakClusterSampledBytes)
	}
}
