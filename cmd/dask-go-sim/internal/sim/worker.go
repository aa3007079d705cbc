package sim

import "container/heap"

// worker is a simulated dask worker: a thread pool, the data it holds, the
// tasks it was asked to compute and the dependencies in flight to it. It
// mirrors the parts of distributed's WorkerState that decide timing and
// memory: ready tasks run in priority order as threads free up; a task
// waits until every dependency is local (fetched from a holder the
// scheduler named); results and fetched replicas stay in memory until the
// scheduler frees them (free-keys, remove-replicas).
type worker struct {
	idx     int32
	addr    string
	threads int
	busy    int
	limit   int64

	// assigned: compute-task received and not freed, by run_id. A ready or
	// executing task whose run_id no longer matches was cancelled.
	assigned map[int32]int64
	// waiting: assigned tasks still missing dependencies.
	waiting map[int32]*pending
	// fetch: dependencies in flight to this worker -> the tasks they unblock.
	fetch map[int32][]waiter
	// executing: tasks on a thread now, by run_id.
	executing map[int32]int64
	ready     readyHeap
	// keys: the data held (results and fetched replicas), in memory or
	// spilled (spill.go).
	keys spillBuffer

	mem, peak int64   // data, transient memory of executing tasks, MemoryModel terms
	overLimit bool    // mem exceeded limit at some point
	speed     float64 // factor on the work of its tasks (Config.WorkerSpeedSpread)
	active    bool    // has run a task (MemoryModel.WorkerUnmanaged counted)

	// inFree/outFree: when the worker's network link is next idle in each
	// direction; transfers queue FIFO on both ends.
	inFree, outFree float64
}

type pending struct {
	run     int64
	missing int
}

type waiter struct {
	task int32
	run  int64
}

func newWorker(idx int32, addr string, threads int, limit int64) *worker {
	return &worker{idx: idx, addr: addr, threads: threads, limit: limit, speed: 1,
		assigned: map[int32]int64{}, waiting: map[int32]*pending{},
		fetch: map[int32][]waiter{}, keys: newSpillBuffer(), executing: map[int32]int64{}}
}

// addMem adjusts the worker's memory and returns the delta for the
// cluster total. Only Sim.mem calls it, so both totals stay in step.
func (w *worker) addMem(d int64) int64 {
	w.mem += d
	if w.mem > w.peak {
		w.peak = w.mem
	}
	if w.mem > w.limit {
		w.overLimit = true
	}
	return d
}

// free drops everything the worker knows about t (free-keys): its data,
// its assignment (a queued or executing run is then stale). It returns the
// memory change for the caller to apply (Sim.mem).
func (w *worker) free(t int32) int64 {
	d := w.keys.drop(t)
	delete(w.assigned, t)
	delete(w.waiting, t)
	return d
}

// live reports whether run is still the current assignment of t.
func (w *worker) live(t int32, run int64) bool {
	r, ok := w.assigned[t]
	return ok && r == run
}

// nextReady pops the most urgent ready task that is still assigned.
func (w *worker) nextReady() (readyItem, bool) {
	for w.ready.Len() > 0 {
		it := heap.Pop(&w.ready).(readyItem)
		if w.live(it.task, it.run) {
			return it, true
		}
	}
	return readyItem{}, false
}

// readyItem is a task whose dependencies are all local.
type readyItem struct {
	order int64
	task  int32
	run   int64
}

// readyHeap orders ready tasks by dask.order priority, as the worker's
// ready queue orders them by the compute-task priority.
type readyHeap []readyItem

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].order != h[j].order {
		return h[i].order < h[j].order
	}
	return h[i].task < h[j].task
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(readyItem)) }
func (h *readyHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
