package scheduler

import (
	"testing"
	"time"
)

func (s *tstate) heartbeatMemory(worker string, at time.Duration, process, spilledMem, spilledDisk int64) {
	s.t.Helper()
	s.handle(&WorkerHeartbeat{Base: Base{At: time.Unix(1_800_000_000, 0).Add(at)}, Worker: addr(worker),
		Memory: &HeartbeatMemory{Process: process, SpilledMemory: spilledMem, SpilledDisk: spilledDisk}})
}

// MemoryState.__init__ clips a part larger than the whole, and the derived
// measures follow from the four stored ones.
func TestMemoryStateClipsAndDerives(t *testing.T) {
	m := newMemoryState(100, 90, 150, 7)
	eq(t, m, MemoryState{Process: 100, Managed: 100, UnmanagedOld: 0, Spilled: 7}, "managed > process")
	m = newMemoryState(100, 50, 30, 7)
	for name, want := range map[string]int64{"managed": 30, "managed_total": 37, "optimistic": 80, "process": 100,
		"spilled": 7, "unmanaged": 70, "unmanaged_old": 50, "unmanaged_recent": 20} {
		got, ok := m.Measure(name)
		eq(t, ok, true, name)
		eq(t, got, want, name)
	}
	_, ok := m.Measure("_private")
	eq(t, ok, false, "unknown measure")
}

// unmanaged_old is the minimum unmanaged memory over recent-to-old-time,
// kept as Scheduler.heartbeat_worker keeps it: the history forgets samples
// older than the window, and the minimum is recomputed only when the
// forgotten sample was it.
func TestUnmanagedOldFollowsHeartbeatWorker(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), func(c *Config, _ *[]string) { c.MemoryRecentToOldTime = 30 * time.Second })
	ws := s.Worker(addr("w1"))
	steps := []struct {
		at      time.Duration
		process int64
		want    int64
	}{
		{0, 100, 100},
		{10 * time.Second, 150, 100},
		{20 * time.Second, 80, 80},
		{35 * time.Second, 120, 80},  // (0, 100) expires; it was not the minimum
		{55 * time.Second, 200, 120}, // (20, 80), the minimum, expires: min of (35, 120), (55, 200)
	}
	for _, st := range steps {
		s.heartbeatMemory("w1", st.at, st.process, 0, 0)
		eq(t, s.WorkerMemory(ws).UnmanagedOld, st.want, "unmanaged_old at "+st.at.String())
	}
	eq(t, len(ws.mem.history), 2, "history holds the window only")
}

// Managed memory is the scheduler's own count of the worker's keys,
// less what the worker spilled; process and spilled come from the
// heartbeat; the cluster's is the sum over workers.
func TestMemorySumsWorkersAndMixesSources(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("a"), task("b")})
	s.finish("w1", "a") // 8 bytes on w1
	s.finish("w2", "b")
	s.heartbeatMemory("w1", 0, 1000, 3, 40)
	s.heartbeatMemory("w2", 0, 500, 0, 0)
	w1 := s.WorkerMemory(s.Worker(addr("w1")))
	eq(t, w1.Managed, int64(5), "managed: nbytes - spilled to memory")
	eq(t, w1.Spilled, int64(40), "spilled: on disk")
	total := s.Memory()
	eq(t, total.Process, int64(1500), "process summed")
	eq(t, total.Managed, int64(5+8), "managed summed")
}

// A sample has a first point at once, one per MemorySample, and its
// points when stopped; a second stop is KeyError.
func TestMemorySamplerSamplesUntilStopped(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.heartbeatMemory("w1", 0, 1000, 0, 0)
	s.handle(&MemorySamplerStart{Key: "k1", Client: "c1", Measure: "process", ReplyTo: 1})
	eq(t, s.MemorySamplers(), 1, "running")
	s.heartbeatMemory("w1", time.Second, 3000, 0, 0)
	s.wantReply(s.handle(&MemorySample{Key: "k1", ReplyTo: 2}), 2, true)
	out := s.handle(&MemorySamplerStop{Key: "k1", ReplyTo: 3})
	v, _ := replyOf(out, 3)
	points := v.([]MemoryPoint)
	eq(t, len(points), 2, "first sample and one tick")
	eq(t, points[0].Bytes, int64(1000), "first")
	eq(t, points[1].Bytes, int64(3000), "after the heartbeat")
	eq(t, s.MemorySamplers(), 0, "stopped")
	s.wantReply(s.handle(&MemorySample{Key: "k1", ReplyTo: 4}), 4, false)
	s.wantReply(s.handle(&MemorySamplerStop{Key: "k1", ReplyTo: 5}), 5, "KeyError")
}

// A client that leaves without stopping its sample frees it; the outer
// ring's next MemorySample hears that it is gone.
func TestMemorySamplerFreedWhenItsClientLeaves(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.handle(&AddClient{Client: "c2"})
	s.handle(&MemorySamplerStart{Key: "mine", Client: "c2", Measure: "managed", ReplyTo: 1})
	s.handle(&MemorySamplerStart{Key: "other", Client: "c1", Measure: "managed", ReplyTo: 2})
	s.handle(&RemoveClient{Client: "c2"})
	eq(t, s.MemorySamplers(), 1, "only the other client's sample is left")
	s.wantReply(s.handle(&MemorySample{Key: "mine", ReplyTo: 3}), 3, false)
	s.wantReply(s.handle(&MemorySample{Key: "other", ReplyTo: 4}), 4, true)
	s.handle(&MemorySamplerStart{Key: "ghost", Client: "nobody", Measure: "managed", ReplyTo: 5})
	eq(t, s.MemorySamplers(), 1, "an unknown client's sample does not start")
}
