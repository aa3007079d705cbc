package scheduler

// taskHeap is distributed's HeapSet of queued tasks: the smallest priority
// first, ties broken oldest first. Entries carry the sort key inline so
// sifting compares without touching the (cache-cold) TaskStates; each task
// records its index so a released task leaves the queue in O(log n) too.
type taskHeap struct {
	items []heapEntry
}

type heapEntry struct {
	prio priority
	seq  uint64
	ts   *TaskState
}

func (h *taskHeap) Len() int { return len(h.items) }

func (h *taskHeap) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	if a.prio != b.prio {
		return a.prio.less(b.prio)
	}
	return a.seq < b.seq
}

func (h *taskHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].ts.queueIdx = i
	h.items[j].ts.queueIdx = j
}

func (h *taskHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h *taskHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h.less(r, l) {
			j = r
		}
		if !h.less(j, i) {
			return
		}
		h.swap(i, j)
		i = j
	}
}

func (h *taskHeap) push(ts *TaskState) {
	if ts.queueIdx >= 0 {
		return
	}
	ts.queueIdx = len(h.items)
	h.items = append(h.items, heapEntry{prio: ts.priority, seq: ts.queueSeq, ts: ts})
	h.up(ts.queueIdx)
}

// peek returns the most urgent queued task, or nil.
func (h *taskHeap) peek() *TaskState {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0].ts
}

func (h *taskHeap) remove(ts *TaskState) {
	i := ts.queueIdx
	if i < 0 || i >= len(h.items) || h.items[i].ts != ts {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = heapEntry{}
	h.items = h.items[:last]
	ts.queueIdx = -1
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h *taskHeap) has(ts *TaskState) bool {
	return ts.queueIdx >= 0 && ts.queueIdx < len(h.items) && h.items[ts.queueIdx].ts == ts
}

// pop removes and returns the most urgent queued task, or nil.
func (h *taskHeap) pop() *TaskState {
	ts := h.peek()
	if ts != nil {
		h.remove(ts)
	}
	return ts
}

// ixheap is a binary heap whose items know their own index (through
// setIdx), so that an item whose key changed is re-sifted, and an item in
// the middle is removed, in O(log n). less must be a strict order that only
// reads keys stored or maintained by the caller.
type ixheap[T comparable] struct {
	items  []T
	less   func(a, b T) bool
	setIdx func(x T, i int)
}

func (h *ixheap[T]) Len() int { return len(h.items) }

func (h *ixheap[T]) top() (T, bool) {
	var zero T
	if len(h.items) == 0 {
		return zero, false
	}
	return h.items[0], true
}

func (h *ixheap[T]) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.setIdx(h.items[i], i)
	h.setIdx(h.items[j], j)
}

func (h *ixheap[T]) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(h.items[j], h.items[i]) {
			return
		}
		h.swap(i, j)
		j = i
	}
}

func (h *ixheap[T]) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && h.less(h.items[r], h.items[l]) {
			j = r
		}
		if !h.less(h.items[j], h.items[i]) {
			return
		}
		h.swap(i, j)
		i = j
	}
}

func (h *ixheap[T]) push(x T) {
	h.items = append(h.items, x)
	h.setIdx(x, len(h.items)-1)
	h.up(len(h.items) - 1)
}

// fix restores the order after the key of the item at i changed.
func (h *ixheap[T]) fix(i int) {
	h.down(i)
	h.up(i)
}

// removeAt deletes the item at i; its index becomes -1.
func (h *ixheap[T]) removeAt(i int) {
	last := len(h.items) - 1
	x := h.items[i]
	if i != last {
		h.swap(i, last)
	}
	var zero T
	h.items[last] = zero
	h.items = h.items[:last]
	h.setIdx(x, -1)
	if i != last {
		h.fix(i)
	}
}

// slotEntry is a worker with a free root-task slot, keyed by
// decide_worker_rootish_queuing_enabled's len(processing)/nthreads (stored
// inline, so a worker whose load changed is found by comparing).
type slotEntry struct {
	load float64
	ws   *WorkerState
}

// newSlotHeap orders the workers of idle_task_count least busy first, ties
// by address: the min() of decide_worker_rootish_queuing_enabled in
// O(log workers) instead of a scan.
func newSlotHeap() ixheap[*slotEntry] {
	return ixheap[*slotEntry]{
		less: func(a, b *slotEntry) bool {
			if a.load != b.load {
				return a.load < b.load
			}
			return a.ws.Address < b.ws.Address
		},
		setIdx: func(e *slotEntry, i int) { e.ws.slotPos = i + 1 },
	}
}

func workerLoad(ws *WorkerState) float64 {
	return float64(ws.processing.Len()) / float64(ws.NThreads)
}

// slotUpdate keeps ws's place in the slot heap in step with idle_task_count
// and its load; checkIdleSaturated calls it after every change of either.
func (s *State) slotUpdate(ws *WorkerState) {
	in := s.idleTaskCount.Has(ws) && !ws.closed
	switch {
	case in && ws.slotPos == 0:
		s.slots.push(&slotEntry{load: workerLoad(ws), ws: ws})
	case in:
		e := s.slots.items[ws.slotPos-1]
		if l := workerLoad(ws); l != e.load {
			e.load = l
			s.slots.fix(ws.slotPos - 1)
		}
	case ws.slotPos > 0:
		s.slots.removeAt(ws.slotPos - 1)
	}
}

// slotTop returns the least busy running worker with a free slot, or nil.
// Entries of workers that left idle_task_count without passing through
// checkIdleSaturated (removed, paused) are dropped here.
func (s *State) slotTop() *WorkerState {
	for {
		e, ok := s.slots.top()
		if !ok {
			return nil
		}
		if s.idleTaskCount.Has(e.ws) && !e.ws.closed {
			return e.ws
		}
		s.slots.removeAt(0)
	}
}
