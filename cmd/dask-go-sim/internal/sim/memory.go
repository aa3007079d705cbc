package sim

import "fmt"

// MemoryModel is what a simulated worker holds beyond the data the
// scheduler tracks (task outputs and fetched replicas) and the Transient
// bytes of its executing tasks. Each term is measured on stock workers
// (scripts/sim/calibrate.py: managed bytes against RSS, sampled every 50 ms
// with the transfers in flight and the tasks executing) and is off when 0.
type MemoryModel struct {
	// ReceiveEarly: a transfer's bytes are held by its destination from
	// the moment it asks for them (as the worker's transfer_incoming_bytes
	// counts them: the receive buffers the frames are read into, which
	// deserialization then wraps), not only on arrival.
	ReceiveEarly bool `json:"receive_early"`
	// WorkerUnmanaged: bytes a worker process grows by once it runs tasks
	// and moves data (allocator arenas, buffers of the comm layer, the
	// libraries' caches): unmanaged memory that stays for the whole run,
	// counted from the worker's first task.
	WorkerUnmanaged int64 `json:"worker_unmanaged_bytes"`
	// WorkerIdle: an idle worker process's memory, which the simulator
	// does not count (it models memory above the workers' idle start) but
	// the memory monitor's spill threshold does (spill.go).
	WorkerIdle int64 `json:"worker_idle_bytes,omitempty"`
}

func (m MemoryModel) check() error {
	if m.WorkerIdle < 0 {
		return fmt.Errorf("sim config: worker idle memory %d", m.WorkerIdle)
	}
	if m.WorkerUnmanaged < 0 {
		return fmt.Errorf("sim config: worker unmanaged memory %d", m.WorkerUnmanaged)
	}
	return nil
}

// runningBytes is what an executing task holds until it finishes.
func (s *Sim) runningBytes(t *Task) int64 { return t.Transient }

// activate counts a worker's unmanaged growth when it starts its first task.
func (s *Sim) activate(w *worker) {
	if !w.active {
		w.active = true
		s.mem(w, s.cfg.Mem.WorkerUnmanaged)
	}
}
