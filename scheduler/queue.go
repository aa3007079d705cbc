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
