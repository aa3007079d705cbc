package scheduler

import "math"

// Placement of root-ish tasks: the big groups with few dependencies whose
// tasks would all end up everywhere anyway (distributed/scheduler.py:
// SchedulerState.is_rootish, decide_worker_rootish_queuing_disabled and
// decide_worker_rootish_queuing_enabled).

// isRootish mirrors SchedulerState.is_rootish.
func (s *State) isRootish(ts *TaskState) bool {
	if ts.isRestricted() {
		return false
	}
	if ts.runSpec != nil && ts.dataProducer {
		return true
	}
	tg := ts.group
	if tg.size <= 2*s.totalNThreads || len(tg.dependencies) >= s.cfg.RootishTaskgroup {
		return false
	}
	if len(tg.dependencies) == 0 {
		return 0 < s.cfg.RootishTaskgroupDependencies // skip the range: a map iterator costs even when empty
	}
	total := 0
	for dg := range tg.dependencies {
		total += dg.size
	}
	return total < s.cfg.RootishTaskgroupDependencies
}

// queuingOff: worker-saturation is inf, so root-ish tasks are never withheld.
func (s *State) queuingOff() bool { return math.IsInf(s.cfg.WorkerSaturation, 1) }

// decideWorkerRootishQueuingEnabled mirrors
// decide_worker_rootish_queuing_enabled: the least busy worker
// (len(processing)/nthreads, ties by address) with a free slot, or nil (the
// task gets or stays queued). The slot heap makes it O(log workers).
func (s *State) decideWorkerRootishQueuingEnabled() *WorkerState {
	return s.slotTop()
}

// decideWorkerRootishQueuingDisabled mirrors
// decide_worker_rootish_queuing_disabled (worker-saturation = inf): keep
// giving a group's tasks to tg.lastWorker for about
// len(group)/total_nthreads*nthreads tasks, so siblings that feed the same
// reduction share a worker; then pick the best worker by worker_objective
// among idle workers (else all running ones). It relies, as distributed
// does, on being called for a batch of ready tasks in priority order.
func (s *State) decideWorkerRootishQueuingDisabled(ts *TaskState) *WorkerState {
	pool := s.idle.Items()
	if len(pool) == 0 {
		pool = s.running.Items()
	}
	if len(pool) == 0 {
		return nil
	}
	tg := ts.group
	var ws *WorkerState
	// Python tests last_worker_tasks_left for truthiness: a negative count
	// (floor gave 0 for a small data-producer group) keeps the worker too.
	if lws := tg.lastWorker; lws != nil && tg.lastWorkerTasksLeft != 0 && lws.status == "running" && s.workers[lws.Address] == lws {
		ws = lws
	} else {
		ws = s.minObjective(ts, pool)
		tg.lastWorkerTasksLeft = int(math.Floor(float64(tg.size) / float64(s.totalNThreads) * float64(ws.NThreads)))
	}
	// record last_worker, or clear it on the group's final task (ts itself
	// is still waiting here)
	if tg.states[StatusReleased]+tg.states[StatusWaiting] > 1 {
		tg.lastWorker = ws
	} else {
		tg.lastWorker = nil
	}
	tg.lastWorkerTasksLeft--
	return ws
}

// minObjective picks the worker minimising worker_objective, ties by
// address so the choice is deterministic.
func (s *State) minObjective(ts *TaskState, pool []*WorkerState) *WorkerState {
	var best *WorkerState
	var bo objective
	for _, ws := range pool {
		o := s.workerObjective(ts, ws)
		if best == nil || o.less(bo) || (o == bo && ws.Address < best.Address) {
			best, bo = ws, o
		}
	}
	return best
}

// objective is worker_objective's tuple.
type objective struct {
	actors    int
	startTime float64
	nbytes    int64
}

func (o objective) less(p objective) bool {
	if o.actors != p.actors {
		return o.actors < p.actors
	}
	if o.startTime != p.startTime {
		return o.startTime < p.startTime
	}
	return o.nbytes < p.nbytes
}

// workerObjective mirrors SchedulerState.worker_objective: minimise the
// expected start time, then stored bytes. With co-assignment a transfer
// counts coTransferWeight times its time (see there).
func (s *State) workerObjective(ts *TaskState, ws *WorkerState) objective {
	comm := s.commCost(ts, ws)
	if s.coOn() {
		comm *= coTransferWeight
	}
	start := s.occupancy(ws)/float64(ws.NThreads) + comm
	o := objective{startTime: start, nbytes: ws.nbytes}
	if ts.actor {
		o.actors = ws.actors.Len()
	}
	return o
}

// commCost mirrors get_comm_cost: seconds to fetch the dependencies ws lacks.
func (s *State) commCost(ts *TaskState, ws *WorkerState) float64 {
	var nb int64
	for _, dts := range ts.dependencies.Items() {
		if !ws.hasWhat.Has(dts) {
			nb += s.getNBytes(dts)
		}
	}
	if nb == 0 {
		return 0
	}
	return float64(nb) / s.bandwidth
}

// queueSlotsMaybeOpened mirrors stimulus_queue_slots_maybe_opened: while
// a running worker has a free slot and tasks are queued, move the most
// urgent queued task to the least busy such worker (or, with co-assignment,
// the next task of that worker's runs). distributed first sums the free
// slots over idle_task_count; filling until none is left is the same
// result without the O(workers) sum, and each turn costs O(log n).
func (s *State) queueSlotsMaybeOpened() {
	if s.queuedLen() == 0 || s.queuingOff() {
		return
	}
	if s.coOn() {
		s.coFill()
		return
	}
	for s.queued.Len() > 0 {
		if s.slotTop() == nil {
			return
		}
		qts := s.queued.peek()
		s.transitionTo(qts, StatusProcessing)
		if qts.state == StatusQueued {
			return // no worker took it; stop rather than spin
		}
	}
}
