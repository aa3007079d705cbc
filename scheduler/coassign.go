package scheduler

// Withholding with co-assignment (Config.RootTaskCoAssignment with a
// finite worker-saturation): root-ish tasks wait on the scheduler as with
// plain withholding, but each running worker owns contiguous runs of queued
// priorities and fills its free slots from its own runs, so siblings that
// feed the same reduction end up on the same worker. WITHHOLDING.md has the
// design, the invariants (checked by validateCoAssign) and the complexity.
//
// Queued tasks live in one of two places:
//
//	s.queued      the unowned pool: a priority heap (tasks queued since the
//	              last partition, or handed back by a worker that left/paused)
//	coRun         a range [lo, hi) of a coBlock: tasks of one partition round,
//	              in priority order, owned by one running worker
//
// A popped or released task leaves a nil in its block; runs are kept
// trimmed so that their first and last entries are live.

// coBlock holds the tasks of one partition round in priority order.
type coBlock struct {
	tasks []*TaskState
	gen   uint64
	// Pacing (coassign_pace.go), families only. byRank: the partition's tasks in
	// priority order; front: the rank of the most urgent task still queued
	// in this block; paceScan: ranks below it hold no family to move;
	// window: how far (in ranks) a worker's next task may be ahead of the
	// front before it takes an unstarted family instead (0: off). front
	// and paceScan only move forward: each rank is passed once.
	byRank   []*TaskState
	front    int
	paceScan int
	window   int
	fams     *coFamTable
}

// coRun is a contiguous range [lo, hi) of a block, owned by one worker.
// Its heap keys are stored, not computed: a task released from the queue
// only leaves a nil in the block (O(1)), which can make a stored key stale
// in one direction only (the head priority can only grow, the span only
// shrink), so both heaps stay valid and the stale key is corrected when the
// run reaches the top (see coTopRun).
type coRun struct {
	id      uint64
	block   *coBlock
	lo, hi  int
	owner   *WorkerState
	ownIdx  int // index in owner.coRuns
	sizeIdx int // index in State.co.bySize
	headKey heapEntry
	sizeKey int
}

func (r *coRun) span() int { return r.hi - r.lo }

// trim moves lo and hi past nils so both ends are live, or lo == hi. Each
// nil is stepped over once by the run whose range holds it, so trimming is
// amortized O(1) per task.
func (r *coRun) trim() {
	t := r.block.tasks
	for r.lo < r.hi && t[r.lo] == nil {
		r.lo++
	}
	for r.hi > r.lo && t[r.hi-1] == nil {
		r.hi--
	}
}

// rekey stores the run's current keys; it returns false when they changed.
func (r *coRun) rekey() bool {
	hk := heapEntry{}
	if r.lo < r.hi {
		h := r.block.tasks[r.lo]
		hk = heapEntry{prio: h.priority, seq: h.queueSeq}
	}
	same := hk.prio == r.headKey.prio && hk.seq == r.headKey.seq && r.sizeKey == r.span()
	r.headKey, r.sizeKey = hk, r.span()
	return same
}

// coAssign is the state of withholding with co-assignment.
type coAssign struct {
	// bySize holds every run, largest stored span first: steal victims.
	bySize ixheap[*coRun]
	owned  int // live tasks in runs
	runSeq uint64
	genSeq uint64
	cursor int // rotates which worker gets the first chunk of a partition

	// rootBytes: Σ WorkerState.coRootBytes, the outputs of co-assigned
	// roots the workers hold (pacing's memory bound, coassign_pace.go)
	rootBytes int64
}

func newCoAssign() coAssign {
	return coAssign{bySize: ixheap[*coRun]{
		less: func(a, b *coRun) bool {
			if a.sizeKey != b.sizeKey {
				return a.sizeKey > b.sizeKey
			}
			return a.id < b.id
		},
		setIdx: func(r *coRun, i int) { r.sizeIdx = i },
	}}
}

// runHeapOf returns ws's runs, most urgent head first.
func runHeapOf(ws *WorkerState) *ixheap[*coRun] {
	if ws.coRuns == nil {
		ws.coRuns = &ixheap[*coRun]{
			less: func(a, b *coRun) bool {
				ha, hb := a.headKey, b.headKey
				if ha.prio != hb.prio {
					return ha.prio.less(hb.prio)
				}
				if ha.seq != hb.seq {
					return ha.seq < hb.seq
				}
				return a.id < b.id
			},
			setIdx: func(r *coRun, i int) { r.ownIdx = i },
		}
	}
	return ws.coRuns
}

func (s *State) coOn() bool { return s.cfg.RootTaskCoAssignment && !s.queuingOff() }

// queuedLen counts queued tasks, pooled or owned.
func (s *State) queuedLen() int { return s.queued.Len() + s.co.owned }

// isQueued reports whether ts sits in the pool or in a run.
func (s *State) isQueued(ts *TaskState) bool {
	return s.queued.has(ts) || (ts.coBlock != nil && ts.coBlock.tasks[ts.coPos] == ts)
}

// unqueue takes ts out of the pool (O(log n)) or out of its run (O(1): a
// nil stays behind in the block; see coRun).
func (s *State) unqueue(ts *TaskState) {
	if ts.coBlock == nil {
		s.queued.remove(ts)
		return
	}
	b, pos := ts.coBlock, ts.coPos
	ts.coBlock = nil
	if b.tasks[pos] == ts {
		b.tasks[pos] = nil
		s.co.owned--
		if s.co.owned == 0 {
			s.coDropEmptyRuns()
		}
	}
}

// coDropEmptyRuns drops every run once no task is owned (the graph was
// cancelled or released while queued). Runs are otherwise trimmed lazily,
// when their worker looks for work; a run nobody looks at again would keep
// its block, one pointer per task of a forgotten graph. O(runs).
func (s *State) coDropEmptyRuns() {
	for s.co.bySize.Len() > 0 {
		s.coDropRun(s.co.bySize.items[0])
	}
}

// coRefresh trims r and brings its stored keys and heap places up to date;
// an empty run is dropped. It returns false when r is gone.
func (s *State) coRefresh(r *coRun) bool {
	r.trim()
	if r.span() == 0 {
		s.coDropRun(r)
		return false
	}
	if !r.rekey() {
		runHeapOf(r.owner).fix(r.ownIdx)
		s.co.bySize.fix(r.sizeIdx)
	}
	return true
}

func (s *State) coAddRun(b *coBlock, lo, hi int, ws *WorkerState) *coRun {
	s.co.runSeq++
	r := &coRun{id: s.co.runSeq, block: b, lo: lo, hi: hi, owner: ws}
	r.trim()
	if r.span() == 0 {
		return nil
	}
	r.rekey()
	runHeapOf(ws).push(r)
	s.co.bySize.push(r)
	return r
}

func (s *State) coDropRun(r *coRun) {
	if r.ownIdx >= 0 && r.owner.coRuns != nil {
		r.owner.coRuns.removeAt(r.ownIdx)
	}
	if r.sizeIdx >= 0 {
		s.co.bySize.removeAt(r.sizeIdx)
	}
}

// coTopRun returns the top run of h whose stored keys are current. Stale
// keys only err towards the top (a head that grew, a span that shrank), so
// the first run found current is the true top. Each retry consumes a nil
// left by a released task: amortized O(log runs).
func (s *State) coTopRun(h *ixheap[*coRun]) *coRun {
	for {
		r, ok := h.top()
		if !ok {
			return nil
		}
		r.trim()
		if r.span() == 0 {
			s.coDropRun(r)
			continue
		}
		if r.rekey() {
			return r
		}
		runHeapOf(r.owner).fix(r.ownIdx)
		s.co.bySize.fix(r.sizeIdx)
	}
}

// coPartition hands the unowned pool to the running workers as runs: by
// families dealt in priority order (coassign_family.go), or, with families off,
// one contiguous run of priorities per worker, proportional to its threads
// (the withheld form of distributed's len(group)/total_nthreads*nthreads).
// Fewer tasks than workers go one each, round-robin. O(u log u) for u
// pooled tasks (their heap pops), plus the families' O(u × depth) or
// O(min(u, workers)) for ranges.
func (s *State) coPartition() {
	n := s.queued.Len()
	workers := s.running.Items()
	w := len(workers)
	if n == 0 || w == 0 {
		return
	}
	s.co.genSeq++
	b := &coBlock{tasks: make([]*TaskState, 0, n), gen: s.co.genSeq}
	for ts := s.queued.pop(); ts != nil; ts = s.queued.pop() {
		b.tasks = append(b.tasks, ts)
	}
	s.co.owned += n
	start := s.co.cursor % w
	// the workers from the rotating cursor on: who gets the first run
	order := append(append(make([]*WorkerState, 0, w), workers[start:]...), workers[:start]...)
	switch {
	case n < w:
		s.coPlace(b)
		for i := 0; i < n; i++ {
			s.coAddRun(b, i, i+1, order[i])
		}
		s.co.cursor = (start + n) % w
		return
	case s.coFamilyDepth() > 0:
		s.coPartitionFamilies(b, order)
	default:
		s.coPlace(b)
		lo := 0
		for j, share := range threadShares(n, order) {
			if share > 0 {
				s.coAddRun(b, lo, lo+share, order[j])
				lo += share
			}
		}
	}
	s.co.cursor = (start + 1) % w
}

// threadShares splits n tasks over workers proportionally to their
// threads, each share rounded up from what is left, so the shares add up
// to n and the last workers may get 0.
func threadShares(n int, workers []*WorkerState) []int {
	threads := 0
	for _, ws := range workers {
		threads += ws.NThreads
	}
	shares := make([]int, len(workers))
	for j, ws := range workers {
		shares[j] = (n*ws.NThreads + threads - 1) / threads
		n -= shares[j]
		threads -= ws.NThreads
	}
	return shares
}

// coPlace points every task of b at its position.
func (s *State) coPlace(b *coBlock) {
	for i, ts := range b.tasks {
		ts.coBlock, ts.coPos = b, int32(i)
	}
}

// coNext picks the task ws runs next, and says why: the head of its most
// urgent run, or, when ws has run dry, the first task of the far half of
// the largest run anywhere; or, when that task is too far ahead of the
// front, what pacing gives it instead. nil means no task is owned.
func (s *State) coNext(ws *WorkerState) (*TaskState, Reason) {
	why := Reason{Rule: RuleCoFamily, N2: float64(ws.processing.Len())}
	r := s.coTopRun(runHeapOf(ws))
	if r == nil {
		victim := s.coTopRun(&s.co.bySize)
		if r = s.coSteal(ws); r == nil {
			return nil, why
		}
		why = Reason{Rule: RuleCoTakenOver, Other: victim.owner.Address}
	}
	if nr, paced := s.coPace(r, ws); nr != nil {
		r, why = nr, paced
	}
	ts := r.block.tasks[r.lo]
	if t := r.block.fams; t != nil {
		t.started[ts.coFam] = true
		if why.Rule == RuleCoFamily {
			why.N1 = float64(ts.coFam)
		}
	} else if why.Rule == RuleCoFamily {
		why.N1 = -1
	}
	r.block.tasks[r.lo] = nil
	ts.coBlock = nil
	ts.coRoot = true
	s.co.owned--
	s.coRefresh(r)
	return ts, why
}

// coSteal gives ws the far half (rounded up) of the largest run: its least
// urgent end, so the victim keeps the tasks it is about to run and the
// siblings of its next reductions. O(log runs), amortized.
func (s *State) coSteal(ws *WorkerState) *coRun {
	victim := s.coTopRun(&s.co.bySize)
	if victim == nil {
		return nil
	}
	mid := victim.lo + victim.span()/2
	hi := victim.hi
	victim.hi = mid
	s.coRefresh(victim)
	return s.coAddRun(victim.block, mid, hi, ws)
}

// coHandBack returns every run of ws to the unowned pool (ws left, paused
// or stopped); the next coPartition spreads them over the running workers.
// O(k log n) for the k tasks handed back.
func (s *State) coHandBack(ws *WorkerState) {
	if ws.slotPos > 0 {
		s.slots.removeAt(ws.slotPos - 1)
	}
	h := ws.coRuns
	if h == nil {
		return
	}
	for h.Len() > 0 {
		r := h.items[0]
		for i := r.lo; i < r.hi; i++ {
			if ts := r.block.tasks[i]; ts != nil {
				r.block.tasks[i] = nil
				ts.coBlock = nil
				s.co.owned--
				s.queued.push(ts)
			}
		}
		r.lo = r.hi
		s.coDropRun(r)
	}
	ws.coRuns = nil
}

// coDisband returns every run to the pool (co-assignment switched off).
func (s *State) coDisband() {
	for s.co.bySize.Len() > 0 {
		s.coHandBack(s.co.bySize.items[0].owner)
	}
}

// coFill is stimulus_queue_slots_maybe_opened with co-assignment: every
// free slot takes the next task of its worker's runs. Each loop turn
// fills one slot or ends the loop: O(log n) per decision, amortized.
func (s *State) coFill() {
	s.coPartition()
	for s.queuedLen() > 0 {
		ws := s.slotTop()
		if ws == nil {
			return
		}
		ts, why := s.coNext(ws)
		if ts == nil {
			return
		}
		s.transitionWith(ts, StatusProcessing, &transArgs{placement: Placement{Worker: ws, Reason: why, ViaQueue: true}})
		if ts.state == StatusQueued {
			return // unreachable: the target had a free slot
		}
	}
}
