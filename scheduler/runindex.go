package scheduler

import "daskgo/protocol"

// runIndex finds a processing task by the run_id of its compute-task, for
// task-finished. A lookup in State.tasks by key was the engine's single
// biggest cost per task on a 1M-task graph (about 0.6 µs: the map's
// control words and keys are cache and TLB misses at that size, profile in
// scripts/sim/results/engine-throughput.md); run ids are handed out in
// increasing order, one per compute-task, so the tasks in flight sit in a
// window of a slice indexed by run id. It is only a shortcut: State.tasks
// stays the truth, and a hit counts only for the same key on a task not
// forgotten, which is then s.tasks.get(key) (the table holds exactly the
// tasks not forgotten).
//
// Invariant: items[i] is nil or a task sent with run id base+i. Entries are
// cleared when their task leaves processing or is sent again; the front of
// the window moves past cleared entries and past any whose task no longer
// runs under that id, so that the window spans from the oldest run still
// in flight and holds no finished task.
type runIndex struct {
	base  int64 // the run id of items[0]
	items []*TaskState
}

// add records that ts was sent with run id id, the newest.
func (r *runIndex) add(id int64, ts *TaskState) {
	if len(r.items) == 0 {
		r.base = id
	}
	for r.base+int64(len(r.items)) < id { // ids skipped: none today
		r.items = append(r.items, nil)
	}
	if id == r.base+int64(len(r.items)) {
		r.items = append(r.items, ts)
	}
}

// find returns the task sent with run id id if it has key k and is not
// forgotten, else nil (the caller then looks k up in State.tasks).
func (r *runIndex) find(id int64, k protocol.Key) *TaskState {
	i := id - r.base
	if i < 0 || i >= int64(len(r.items)) {
		return nil
	}
	if ts := r.items[i]; ts != nil && ts.state != StatusForgotten && ts.Key == k {
		return ts
	}
	return nil
}

// drop forgets run id id (its task left processing or was sent again).
func (r *runIndex) drop(id int64) {
	i := id - r.base
	if i < 0 || i >= int64(len(r.items)) {
		return
	}
	r.items[i] = nil
	n := 0
	for ; n < len(r.items); n++ {
		ts := r.items[n]
		if ts != nil && ts.runID == r.base+int64(n) && ts.state == StatusProcessing {
			break
		}
	}
	// the dropped front stays in the backing array, cleared, until the
	// next append reallocates: at most the window's size again
	clear(r.items[:n])
	r.items = r.items[n:]
	r.base += int64(n)
}
