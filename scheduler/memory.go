package scheduler

import "time"

// Memory readings: distributed.scheduler.MemoryState, per worker
// (WorkerState.memory) and summed over the cluster (SchedulerState.memory).
// Process and spilled memory come with each worker's heartbeat (decoded at
// the edge into HeartbeatMemory); managed memory is the scheduler's own
// count of the bytes of the keys a worker holds (ws.nbytes), updated as
// tasks land, exactly as WorkerState.memory mixes the two. unmanaged_old is
// the minimum unmanaged memory over the last recent-to-old-time, kept per
// worker from its heartbeats (Scheduler.heartbeat_worker's
// _memory_unmanaged_history).
//
// The MemorySampler (memsampler.go) and the cluster dump read these; the
// active memory manager does not (amm.go weighs managed bytes).

// MemoryState mirrors distributed.scheduler.MemoryState. Build it with
// newMemoryState, which forces the parts to add up as __init__ does.
type MemoryState struct {
	Process, UnmanagedOld, Managed, Spilled int64
}

// newMemoryState mirrors MemoryState.__init__: heartbeat and live figures
// arrive at different times and sizeof() may be wrong, so a part larger
// than the whole is clipped.
func newMemoryState(process, unmanagedOld, managed, spilled int64) MemoryState {
	managed = min(process, managed)
	return MemoryState{Process: process, Managed: managed, Spilled: spilled,
		UnmanagedOld: min(unmanagedOld, process-managed)}
}

// ManagedTotal is managed memory plus bytes spilled to disk.
func (m MemoryState) ManagedTotal() int64 { return m.Managed + m.Spilled }

// Unmanaged is process - managed.
func (m MemoryState) Unmanaged() int64 { return m.Process - m.Managed }

// UnmanagedRecent is unmanaged - unmanaged_old.
func (m MemoryState) UnmanagedRecent() int64 { return m.Process - m.Managed - m.UnmanagedOld }

// Optimistic is managed + unmanaged_old.
func (m MemoryState) Optimistic() int64 { return m.Managed + m.UnmanagedOld }

// MemoryMeasures are MemoryState's public int attributes, the measures a
// MemorySampler may ask for, sorted as dir() lists them.
var MemoryMeasures = []string{"managed", "managed_total", "optimistic", "process", "spilled",
	"unmanaged", "unmanaged_old", "unmanaged_recent"}

// Measure is getattr(memory, name) for the names in MemoryMeasures.
func (m MemoryState) Measure(name string) (int64, bool) {
	switch name {
	case "managed":
		return m.Managed, true
	case "managed_total":
		return m.ManagedTotal(), true
	case "optimistic":
		return m.Optimistic(), true
	case "process":
		return m.Process, true
	case "spilled":
		return m.Spilled, true
	case "unmanaged":
		return m.Unmanaged(), true
	case "unmanaged_old":
		return m.UnmanagedOld, true
	case "unmanaged_recent":
		return m.UnmanagedRecent(), true
	}
	return 0, false
}

// HeartbeatMemory is what a heartbeat's metrics say of memory:
// metrics["memory"] (the process's RSS) and metrics["spilled_bytes"]
// ["memory"] and ["disk"].
type HeartbeatMemory struct {
	Process, SpilledMemory, SpilledDisk int64
}

// workerMemory is a worker's last heartbeat memory and the history of its
// unmanaged memory over the last recent-to-old-time.
type workerMemory struct {
	hb           HeartbeatMemory
	unmanagedOld int64
	history      []unmanagedSample // oldest first
}

type unmanagedSample struct {
	at   time.Time
	size int64
}

// noteHeartbeatMemory mirrors the end of Scheduler.heartbeat_worker: drop
// samples older than recent-to-old-time, add this one, and keep the
// minimum (recomputed only when the old minimum expired). The history
// holds recent-to-old-time / heartbeat interval samples per worker.
func (s *State) noteHeartbeatMemory(ws *WorkerState, hb *HeartbeatMemory) {
	m := &ws.mem
	m.hb = *hb
	cutoff := s.now.Add(-s.cfg.MemoryRecentToOldTime)
	old := m.unmanagedOld
	n := 0
	for n < len(m.history) && m.history[n].at.Before(cutoff) {
		if m.history[n].size == old {
			old = 0 // recalculate min()
		}
		n++
	}
	m.history = m.history[n:]
	// ws.nbytes is updated at other times than the heartbeat, and sizeof()
	// may be wrong: the difference may be negative for a while
	size := max(0, hb.Process-ws.nbytes+hb.SpilledMemory)
	m.history = append(m.history, unmanagedSample{at: s.now, size: size})
	switch {
	case old == 0:
		m.unmanagedOld = m.history[0].size
		for _, h := range m.history[1:] {
			m.unmanagedOld = min(m.unmanagedOld, h.size)
		}
	case size < old:
		m.unmanagedOld = size
	}
}

// WorkerMemory mirrors WorkerState.memory: process and spilled memory
// from the last heartbeat, managed memory from the scheduler's own count.
func (s *State) WorkerMemory(ws *WorkerState) MemoryState {
	m := &ws.mem
	return newMemoryState(m.hb.Process, m.unmanagedOld, max(0, ws.nbytes-m.hb.SpilledMemory), m.hb.SpilledDisk)
}

// Memory mirrors SchedulerState.memory: every worker's, summed
// (MemoryState.sum).
func (s *State) Memory() MemoryState {
	var t MemoryState
	for _, ws := range s.workerOrder.Items() {
		m := s.WorkerMemory(ws)
		t.Process += m.Process
		t.UnmanagedOld += m.UnmanagedOld
		t.Managed += m.Managed
		t.Spilled += m.Spilled
	}
	return newMemoryState(t.Process, t.UnmanagedOld, t.Managed, t.Spilled)
}
