package sim

import "testing"

// Every worker that ran a task holds WorkerUnmanaged more from then on: in
// indep:60 every worker is busy before the outputs pile up, so the peak
// grows by exactly workers x the term, and it is no leak.
func TestWorkerUnmanaged(t *testing.T) {
	g := mustSynthetic(t, "indep:60")
	base := Config{Workers: 4, Threads: 3, Mode: "withholding"}
	plain := mustRun(t, g, base)
	base.Mem.WorkerUnmanaged = 100 << 20
	r := mustRun(t, g, base)
	if d := r.PeakClusterMemoryBytes - plain.PeakClusterMemoryBytes; d != 4*(100<<20) {
		t.Errorf("peak grew by %d bytes, want 4 x 100 MiB", d)
	}
	if r.LeakedBytes != 0 {
		t.Errorf("leaked %d bytes", r.LeakedBytes)
	}
}

// ReceiveEarly counts a replica from the request of its transfer: with a
// slow link (1 s per MiB, FIFO), the sum's worker holds its inputs while
// they move, so the cluster reaches its peak (every output plus the sum's
// replicas) when the transfers are asked for, not when the last one
// arrives seconds later; the peak itself and the timing do not change,
// and the buffers become the replicas, so nothing leaks. The AMM is off: it
// would drop the sources' copies as the replicas arrive, seconds after the
// early peak.
func TestReceiveEarly(t *testing.T) {
	g := mustSynthetic(t, "indep:8")
	base := Config{Workers: 4, Threads: 1, Mode: "withholding", Bandwidth: 1 << 20, TracePeak: true, NoAMM: true}
	plain := mustRun(t, g, base)
	base.Mem.ReceiveEarly = true
	r := mustRun(t, g, base)
	if r.LeakedBytes != 0 {
		t.Fatalf("leaked %d bytes", r.LeakedBytes)
	}
	if r.MakespanS != plain.MakespanS || r.PeakClusterMemoryBytes != plain.PeakClusterMemoryBytes {
		t.Fatalf("makespan %.3f vs %.3f s, peak %d vs %d: only the peak's time should change",
			r.MakespanS, plain.MakespanS, r.PeakClusterMemoryBytes, plain.PeakClusterMemoryBytes)
	}
	moves := float64(r.TransferredBytes) / (1 << 20) // seconds the sum's link is busy
	if moves < 2 || plain.PeakTrace.TimeS-r.PeakTrace.TimeS < moves-1.01 {
		t.Errorf("peak at %.3f s with early counting, %.3f s without: want it %.0f-1 s earlier",
			r.PeakTrace.TimeS, plain.PeakTrace.TimeS, moves)
	}
}
