package scheduler

import (
	"fmt"
	"math"
)

// validateState checks every invariant of the engine (distributed's
// validate_state, validate_key and validate_task_state, plus the queuing
// invariants). It runs after every Handle when Config.ValidateInvariants is
// set; a broken invariant is an engine bug, so it panics with the recent
// story of the task involved.
func (s *State) validateState() {
	for k, ts := range s.tasks.all() {
		if ts.Key != k {
			s.broken(ts, "indexed under another key %s", k)
		}
		if s.tasks.get(k) != ts {
			s.broken(ts, "held by the task table but not found by its key")
		}
		s.validateTaskEdges(ts)
		s.validateTaskState(ts)
	}
	s.validateWorkers()
	s.replicated.validate(s, "replicated")
	s.validateClients()
	s.validateQueue()
	s.validateGroups()
	s.validateShuffles()
	s.validateStealing()
	s.validateRuns()
	s.validateSegments()
}

// validateSegments checks the task table's segments (checkSegments).
func (s *State) validateSegments() {
	if ts, err := s.tasks.checkSegments(); err != nil {
		s.broken(ts, "%v", err)
	}
}

// validateRuns checks runIndex's invariant (an entry is a task processing
// under that run id, and every processing task has its entry) and
// keyCache's (no forgotten task).
func (s *State) validateRuns() {
	r := &s.runs
	for i, ts := range r.items {
		if ts != nil && (ts.runID != r.base+int64(i) || ts.state != StatusProcessing || s.tasks.get(ts.Key) != ts) {
			s.broken(ts, "run index entry %d is stale (run id %d)", r.base+int64(i), ts.runID)
		}
	}
	for _, ts := range s.recent.slots {
		if ts != nil && s.tasks.get(ts.Key) != ts {
			s.broken(ts, "forgotten task still in the key cache")
		}
	}
	for _, ts := range s.tasks.all() {
		if ts.state == StatusProcessing && r.find(ts.runID, ts.Key) != ts {
			s.broken(ts, "processing under run id %d without its run index entry", ts.runID)
		}
	}
}

func (s *State) broken(ts *TaskState, format string, args ...any) {
	msg := "scheduler invariant broken: " + fmt.Sprintf(format, args...)
	if ts != nil {
		msg += fmt.Sprintf(" [task %s in %s]\n%s", ts.Key, ts.state, s.storyString(ts.Key))
	}
	panic(msg)
}

func (s *State) validateTaskEdges(ts *TaskState) {
	for _, dts := range ts.dependencies.Items() {
		if !dts.dependents.Has(ts) {
			s.broken(ts, "not in dependency %s's dependents", dts.Key)
		}
		if s.tasks.get(dts.Key) != dts {
			s.broken(ts, "dependency %s is not a known task", dts.Key)
		}
		switch ts.state {
		case StatusWaiting, StatusQueued, StatusProcessing, StatusNoWorker:
			if !ts.waitingOn.Has(dts) && dts.whoHas.Len() == 0 {
				s.broken(ts, "dependency %s missing: neither waited on nor in memory", dts.Key)
			}
		}
	}
	for _, dts := range ts.dependents.Items() {
		if !dts.dependencies.Has(ts) {
			s.broken(ts, "not in dependent %s's dependencies", dts.Key)
		}
	}
	for _, dts := range ts.waitingOn.Items() {
		if !ts.dependencies.Has(dts) {
			s.broken(ts, "waiting on non-dependency %s", dts.Key)
		}
		if dts.whoHas.Len() > 0 || dts.state == StatusReleased {
			s.broken(ts, "waiting on %s which is %s with %d replicas", dts.Key, dts.state, dts.whoHas.Len())
		}
	}
	for _, dts := range ts.waiters.Items() {
		if !ts.dependents.Has(dts) {
			s.broken(ts, "waiter %s is not a dependent", dts.Key)
		}
	}
	for _, ws := range ts.whoHas.Items() {
		if !ws.hasWhat.Has(ts) || s.workers[ws.Address] != ws {
			s.broken(ts, "who_has %s asymmetric with has_what", ws.Address)
		}
	}
	for _, cs := range ts.whoWants.Items() {
		if !cs.wantsWhat.Has(ts) {
			s.broken(ts, "who_wants %s asymmetric with wants_what", cs.ID)
		}
	}
}

func (s *State) validateTaskState(ts *TaskState) {
	for r, set := range ts.slotSet {
		pos := ts.slotPos[r]
		if set != nil && (set.slotOf(ts) != r || int(pos) >= len(set.items) || set.items[pos] != ts) {
			s.broken(ts, "stale %d-role set slot at %d", r+1, pos)
		}
	}
	if ts.keyHash != uint32(keyIndexHash(ts.Key)) {
		s.broken(ts, "stored key hash %#x is not the key's", ts.keyHash)
	}
	if ts.state != StatusProcessing && ts.processingOn != nil {
		s.broken(ts, "processing_on set outside processing")
	}
	if (ts.state == StatusQueued) != s.isQueued(ts) {
		s.broken(ts, "queued state and queue membership disagree")
	}
	if (ts.state == StatusNoWorker) != s.unrunnable.Has(ts) {
		s.broken(ts, "no-worker state and unrunnable membership disagree")
	}
	if ts.state != StatusMemory && ts.whoHas.Len() > 0 && !ts.actor {
		s.broken(ts, "has replicas outside memory")
	}
	if (ts.whoHas.Len() > 1) != s.replicated.Has(ts) {
		s.broken(ts, "replicated set and holders disagree")
	}
	if ts.state != StatusWaiting && ts.waitingOn.Len() > 0 {
		s.broken(ts, "waiting_on set outside waiting")
	}
	switch ts.state {
	case StatusReleased:
		for _, dts := range ts.dependencies.Items() {
			if dts.waiters.Has(ts) {
				s.broken(ts, "released but still a waiter of %s", dts.Key)
			}
		}
	case StatusWaiting:
		if ts.waitingOn.Len() == 0 {
			s.broken(ts, "waiting on nothing")
		}
		s.validateWaiterOfDeps(ts)
	case StatusQueued:
		if ts.isRestricted() || math.IsInf(s.cfg.WorkerSaturation, 1) {
			s.broken(ts, "queued while restricted or with queuing off")
		}
		s.validateWaiterOfDeps(ts)
	case StatusProcessing:
		if ts.processingOn == nil || !ts.processingOn.processing.Has(ts) {
			s.broken(ts, "processing but not in its worker's processing")
		}
		s.validateWaiterOfDeps(ts)
	case StatusNoWorker:
		s.validateWaiterOfDeps(ts)
	case StatusMemory:
		if ts.whoHas.Len() == 0 {
			s.broken(ts, "in memory without replicas")
		}
		for _, dts := range ts.dependents.Items() {
			active := dts.state == StatusWaiting || dts.state == StatusQueued || dts.state == StatusProcessing || dts.state == StatusNoWorker
			if ts.waiters.Has(dts) != active {
				s.broken(ts, "waiters disagree with dependent %s in %s", dts.Key, dts.state)
			}
		}
	case StatusErred:
		if ts.blame() == nil {
			s.broken(ts, "erred without exception_blame")
		}
	case StatusForgotten:
		s.broken(ts, "forgotten task still known")
	}
}

func (s *State) validateWaiterOfDeps(ts *TaskState) {
	for _, dts := range ts.dependencies.Items() {
		if !dts.waiters.Has(ts) {
			s.broken(ts, "not a waiter of dependency %s", dts.Key)
		}
		if ts.state != StatusWaiting && dts.whoHas.Len() == 0 {
			s.broken(ts, "ready although dependency %s has no replica", dts.Key)
		}
	}
}

func (s *State) validateWorkers() {
	threads := 0
	var rootHeld int64
	if s.workerOrder.Len() != len(s.workers) {
		panic("scheduler invariant broken: worker order and index disagree")
	}
	for _, ws := range s.workerOrder.Items() {
		threads += ws.NThreads
		rootHeld += ws.coRootBytes
		if ws.closed || s.workers[ws.Address] != ws {
			// reportingWorker and exitProcessingCommon rely on it
			panic(fmt.Sprintf("scheduler invariant broken: worker %s closed or not indexed by its address", ws.Address))
		}
		running := ws.status == "running"
		if running != s.running.Has(ws) {
			panic(fmt.Sprintf("scheduler invariant broken: worker %s status %s vs running set", ws.Address, ws.status))
		}
		if !running && (s.idle.Has(ws) || s.idleTaskCount.Has(ws) || s.saturated.Has(ws)) {
			panic(fmt.Sprintf("scheduler invariant broken: non-running worker %s in idle/saturated sets", ws.Address))
		}
		s.validateWorkerTasks(ws)
	}
	if threads != s.totalNThreads {
		panic(fmt.Sprintf("scheduler invariant broken: total threads %d != %d", s.totalNThreads, threads))
	}
	if rootHeld != s.co.rootBytes {
		panic(fmt.Sprintf("scheduler invariant broken: workers hold %d bytes of co-assigned roots, total %d", rootHeld, s.co.rootBytes))
	}
	for i, set := range []*workerSet{&s.running, &s.idle, &s.idleTaskCount, &s.saturated} {
		set.validate([]string{"running", "idle", "idle_task_count", "saturated"}[i])
		for _, ws := range set.Items() {
			if s.workers[ws.Address] != ws {
				panic(fmt.Sprintf("scheduler invariant broken: removed worker %s still in a worker set", ws.Address))
			}
		}
	}
}

func (s *State) validateWorkerTasks(ws *WorkerState) {
	ws.hasWhat.validate(s, "has_what of "+ws.Address)
	ws.processing.validate(s, "processing of "+ws.Address)
	var rootBytes int64
	for _, ts := range ws.hasWhat.Items() {
		if !ts.whoHas.Has(ws) {
			s.broken(ts, "in has_what of %s but not in who_has", ws.Address)
		}
		if ts.coRoot {
			rootBytes += s.getNBytes(ts)
		}
	}
	if rootBytes != ws.coRootBytes {
		panic(fmt.Sprintf("scheduler invariant broken: %s holds %d bytes of co-assigned roots, counted %d", ws.Address, rootBytes, ws.coRootBytes))
	}
	needs := map[*TaskState]int{}
	var pcs []prefixCount
	rootish := 0
	for _, ts := range ws.processing.Items() {
		if ts.processingOn != ws || ts.state != StatusProcessing {
			s.broken(ts, "in processing of %s but processing_on disagrees", ws.Address)
		}
		for _, dts := range ts.dependencies.Items() {
			if !ws.hasWhat.Has(dts) {
				needs[dts]++
			}
		}
		if !ws.longRunning.Has(ts) {
			pcs = addPrefixCount(pcs, ts.prefix, 1)
			if ts.group.size > 0 && s.queuedAssigned(ts) {
				rootish++
			}
		}
	}
	for _, ts := range ws.longRunning.Items() {
		if !ws.processing.Has(ts) {
			s.broken(ts, "long-running on %s but not processing there", ws.Address)
		}
	}
	if len(needs) != ws.needsWhat.Len() {
		panic(fmt.Sprintf("scheduler invariant broken: needs_what of %s has %d entries, want %d", ws.Address, ws.needsWhat.Len(), len(needs)))
	}
	for dts, n := range needs {
		if ws.needsWhat.get(dts) != n {
			s.broken(dts, "needs_what count on %s is %d, want %d", ws.Address, ws.needsWhat.get(dts), n)
		}
	}
	for _, pc := range pcs {
		if n := prefixCountOf(ws.prefixCount, pc.tp); n != pc.n {
			panic(fmt.Sprintf("scheduler invariant broken: prefix %s count on %s is %d, want %d", pc.tp.Name, ws.Address, n, pc.n))
		}
	}
	if len(pcs) != len(ws.prefixCount) {
		panic(fmt.Sprintf("scheduler invariant broken: %s counts %d prefixes, want %d", ws.Address, len(ws.prefixCount), len(pcs)))
	}
	if sat := s.cfg.WorkerSaturation; !math.IsInf(sat, 1) {
		if limit := max(int(math.Ceil(sat*float64(ws.NThreads))), 1); rootish > limit {
			panic(fmt.Sprintf("scheduler invariant broken: %s runs %d queued-path tasks, slot limit %d", ws.Address, rootish, limit))
		}
	}
}

// queuedAssigned reports tasks placed by the queuing policy (they count
// against the slot limit).
func (s *State) queuedAssigned(ts *TaskState) bool { return ts.viaQueuePolicy }

func prefixCountOf(pcs []prefixCount, tp *TaskPrefix) int {
	for _, pc := range pcs {
		if pc.tp == tp {
			return pc.n
		}
	}
	return 0
}

func (s *State) validateClients() {
	for id, cs := range s.clients {
		if cs.ID != id {
			panic("scheduler invariant broken: client indexed under another id")
		}
		cs.wantsWhat.validate(s, "wants_what of "+id)
		for _, ts := range cs.wantsWhat.Items() {
			if !ts.whoWants.Has(cs) || s.tasks.get(ts.Key) != ts {
				s.broken(ts, "wants_what of %s asymmetric with who_wants", id)
			}
		}
	}
}

func (s *State) validateQueue() {
	s.validateTaskHeap(&s.queued)
	s.validateWithholding()
	if s.queuedLen() > 0 {
		for _, ws := range s.idleTaskCount.Items() {
			if taskSlotsAvailable(ws, s.cfg.WorkerSaturation) > 0 {
				panic(fmt.Sprintf("scheduler invariant broken: %d tasks queued while %s has a free slot", s.queuedLen(), ws.Address))
			}
		}
	}
	for _, ts := range s.unrunnable.Items() {
		if s.tasks.get(ts.Key) != ts {
			s.broken(ts, "unknown task in unrunnable")
		}
	}
}

// validateTaskHeap checks the queue's two stores: the run sorted, the heap
// ordered, every live entry a queued task with its current key, and the
// dead entries bounded.
func (s *State) validateTaskHeap(h *taskHeap) {
	live := 0
	check := func(where string, i int, e *heapEntry) {
		ts := e.ts
		if e.tok == 0 || e.tok > h.tok {
			s.broken(ts, "queue %s slot %d has a ticket never issued", where, i)
		}
		if e.alive() {
			live++
			if ts.state != StatusQueued || e.prio != ts.priority || e.seq != ts.queueSeq || ts.coBlock != nil {
				s.broken(ts, "queue %s slot %d inconsistent", where, i)
			}
		}
	}
	for i := h.head; i < len(h.run); i++ {
		check("run", i, &h.run[i])
		if i > h.head && !h.run[i-1].before(&h.run[i]) {
			s.broken(h.run[i].ts, "queue run out of order at %d", i)
		}
	}
	for i := range h.items {
		check("heap", i, &h.items[i])
		if i > 0 && h.less(i, (i-1)/2) {
			s.broken(h.items[i].ts, "heap order broken at %d", i)
		}
	}
	if live != h.live {
		panic(fmt.Sprintf("scheduler invariant broken: %d live queue entries, %d counted", live, h.live))
	}
	if n := h.size(); (n > 64 && n > 2*h.live) || (n > 0 && h.live == 0) {
		panic(fmt.Sprintf("scheduler invariant broken: queue holds %d entries for %d live tasks", n, h.live))
	}
}

func (s *State) validateGroups() {
	counts := map[*TaskGroup]*[numStatus]int{}
	for _, ts := range s.tasks.all() {
		c := counts[ts.group]
		if c == nil {
			c = &[numStatus]int{}
			counts[ts.group] = c
		}
		c[ts.state]++
	}
	for tg, c := range counts {
		if s.groups[tg.Name] != tg {
			panic(fmt.Sprintf("scheduler invariant broken: group %s of a live task is not registered", tg.Name))
		}
		for st := StatusReleased; st < StatusForgotten; st++ {
			if c[st] != tg.states[st] {
				panic(fmt.Sprintf("scheduler invariant broken: group %s counts %d %s tasks, has %d", tg.Name, tg.states[st], st, c[st]))
			}
		}
	}
}
