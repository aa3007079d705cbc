package scheduler

// taskHeap is distributed's HeapSet of queued tasks: the smallest priority
// first, ties broken oldest first. (priority, seq) is a total order, so
// the pop order does not depend on how entries are stored, which is:
//
//   - run: a sorted deque. An entry after the run's last goes on its
//     back, one before its first on its front. Root-ish tasks often reach
//     the queue in priority order, one way or the other: the simulator's
//     graphs recommend their roots least urgent first (the transitions
//     loop pops its recommendations from the end), successive graphs come
//     most urgent first. Those pushes and their pops are O(1), with no
//     sifting through a big cache-cold array.
//   - heap: a binary heap for the entries that fit neither end (a graph
//     whose keys the helper lists in no priority order).
//
// Entries carry the sort key inline so comparisons never touch the
// TaskStates, and no TaskState tracks its slot (a slot index written on
// every sift cost a cache miss per level). Removing a task from the middle
// (a release while queued) just ends its ticket (TaskState.heapTok); the
// dead entry is dropped when it surfaces, or by a compaction once the dead
// outnumber the live.
type taskHeap struct {
	run   []heapEntry // sorted; run[head:] are the entries, the rest zero
	head  int         // free slots before the run, taken by front pushes
	items []heapEntry // the heap
	live  int         // entries whose ticket is current
	tok   uint64      // last ticket issued
}

type heapEntry struct {
	prio priority
	seq  uint64
	ts   *TaskState
	tok  uint64 // live iff ts.heapTok == tok
}

func (e *heapEntry) before(f *heapEntry) bool {
	if e.prio != f.prio {
		return e.prio.less(f.prio)
	}
	return e.seq < f.seq
}

func (e *heapEntry) alive() bool { return e.ts.heapTok == e.tok }

func (h *taskHeap) Len() int { return h.live }

func (h *taskHeap) less(i, j int) bool { return h.items[i].before(&h.items[j]) }

func (h *taskHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !h.less(j, i) {
			break
		}
		h.items[i], h.items[j] = h.items[j], h.items[i]
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
		h.items[i], h.items[j] = h.items[j], h.items[i]
		i = j
	}
}

func (h *taskHeap) push(ts *TaskState) {
	if ts.heapTok != 0 {
		return
	}
	h.tok++
	ts.heapTok = h.tok
	h.live++
	e := heapEntry{prio: ts.priority, seq: ts.queueSeq, ts: ts, tok: h.tok}
	switch n := len(h.run); {
	case n == h.head || h.run[n-1].before(&e):
		if n == cap(h.run) {
			h.makeRoom(false)
		}
		h.run = append(h.run, e) // within capacity: makeRoom left room
	case e.before(&h.run[h.head]):
		if h.head == 0 {
			h.makeRoom(true)
		}
		h.head--
		h.run[h.head] = e
	default:
		h.items = appendDoubling(h.items, e)
		h.up(len(h.items) - 1)
	}
	h.bound() // a push can take the entries past the dead entries' bound
}

// makeRoom moves the run within an array that leaves as many free slots
// as the run holds at the end that ran out (atFront: before the run, else
// after it) and a quarter as many at the other, so that pushes at either
// end, or at both in turn, are amortized O(1), and the arrays grow about
// as a doubling slice's would. The array is reused when it is big enough,
// else a new one is made; every slot outside the run is zero, so the array
// pins no task.
func (h *taskHeap) makeRoom(atFront bool) {
	n := len(h.run) - h.head
	few := max(n/4, 8)
	room := max(n, 8)
	arr := h.run[:cap(h.run)]
	reused := len(arr) >= room+n+few
	if !reused {
		arr = make([]heapEntry, room+n+few)
	}
	start := few // the room after the run is the rest of the array
	if atFront {
		start = len(arr) - n - few
	}
	copy(arr[start:], h.run[h.head:])
	if reused {
		clear(arr[:start])
		clear(arr[start+n:])
	}
	h.run, h.head = arr[:start+n], start
}

// emptyRun makes the run empty, keeping its array and starting in its
// middle so that the next pushes need no move at either end.
func (h *taskHeap) emptyRun() {
	mid := cap(h.run) / 2
	h.run, h.head = h.run[:mid], mid
}

// dropTop removes the heap's top entry, live or dead.
func (h *taskHeap) dropTop() {
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items[last] = heapEntry{}
	h.items = h.items[:last]
	if last > 0 {
		h.down(0)
	}
}

// dropHead removes the run's first entry, live or dead. The slot joins
// the free room before the run, which front pushes take again; a run that
// only grows at the back is moved down when it reaches the end of its
// array (makeRoom), so the room a FIFO leaves behind is bounded.
func (h *taskHeap) dropHead() {
	h.run[h.head] = heapEntry{}
	h.head++
	if h.head == len(h.run) {
		h.emptyRun()
	}
}

// front returns the most urgent live entry and whether it is the run's,
// dropping the dead entries it meets; nil when empty.
func (h *taskHeap) front() (*heapEntry, bool) {
	for h.head < len(h.run) && !h.run[h.head].alive() {
		h.dropHead()
	}
	for len(h.items) > 0 && !h.items[0].alive() {
		h.dropTop()
	}
	switch {
	case h.head < len(h.run) && (len(h.items) == 0 || h.run[h.head].before(&h.items[0])):
		return &h.run[h.head], true
	case len(h.items) > 0:
		return &h.items[0], false
	}
	return nil, false
}

// peek returns the most urgent queued task, or nil.
func (h *taskHeap) peek() *TaskState {
	if e, _ := h.front(); e != nil {
		return e.ts
	}
	return nil
}

func (h *taskHeap) remove(ts *TaskState) {
	if ts.heapTok == 0 {
		return
	}
	ts.heapTok = 0
	h.live--
	h.bound()
}

// size counts the entries held, live or dead.
func (h *taskHeap) size() int { return len(h.run) - h.head + len(h.items) }

// emptyMapKeep is the size up to which an emptied map or slice of task
// states keeps its capacity for the next graph; beyond it, it is made anew
// so a forgotten big graph leaves nothing behind.
const emptyMapKeep = 4096

// bound keeps dead entries from piling up (they pin forgotten tasks):
// never more than half of a big queue, none in an empty one.
func (h *taskHeap) bound() {
	switch {
	case h.live == 0 && cap(h.run)+cap(h.items) > emptyMapKeep:
		// the queue of a big graph, now empty: let its arrays go
		h.run, h.head, h.items = nil, 0, nil
	case h.live == 0:
		clear(h.run)
		clear(h.items)
		h.emptyRun()
		h.items = h.items[:0]
	case h.size() > 64 && h.size() > 2*h.live:
		h.compact()
	}
}

// compact drops the dead entries and re-heapifies: O(n), run when more
// than half the entries are dead, so amortized O(1) per removal or pop.
func (h *taskHeap) compact() {
	run := h.run[:0]
	for _, e := range h.run[h.head:] {
		if e.alive() {
			run = append(run, e)
		}
	}
	clear(h.run[len(run):])
	h.run, h.head = run, 0
	keep := h.items[:0]
	for _, e := range h.items {
		if e.alive() {
			keep = append(keep, e)
		}
	}
	clear(h.items[len(keep):])
	h.items = keep
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *taskHeap) has(ts *TaskState) bool { return ts.heapTok != 0 }

// pop removes and returns the most urgent queued task, or nil.
func (h *taskHeap) pop() *TaskState {
	e, inRun := h.front()
	if e == nil {
		return nil
	}
	ts := e.ts
	ts.heapTok = 0
	h.live--
	if inRun {
		h.dropHead()
	} else {
		h.dropTop()
	}
	h.bound()
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
		ws.slot = slotEntry{load: workerLoad(ws), ws: ws} // embedded: no allocation per slot opening
		s.slots.push(&ws.slot)
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
