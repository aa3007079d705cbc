package scheduler

import "math"

// Placement of root-ish tasks: the big groups with few dependencies whose
// tasks would all end up everywhere anyway (dask-protocol.md §6.5, §6.6).

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
	total := 0
	for dg := range tg.dependencies {
		total += dg.size
	}
	return total < s.cfg.RootishTaskgroupDependencies
}

// decideWorkerRootishQueuingEnabled mirrors
// decide_worker_rootish_queuing_enabled: the least busy worker with a free
// slot, or nil (the task gets or stays queued).
func (s *State) decideWorkerRootishQueuingEnabled() *WorkerState {
	var best *WorkerState
	var bestLoad float64
	for _, ws := range s.idleTaskCount.Items() {
		load := float64(ws.processing.Len()) / float64(ws.NThreads)
		if best == nil || load < bestLoad || (load == bestLoad && ws.Address < best.Address) {
			best, bestLoad = ws, load
		}
	}
	return best
}

// decideWorkerRootishQueuingDisabled is the policy hook for root-ish tasks
// when queuing is off (worker-saturation = inf). Today it picks the
// least-loaded worker by worker_objective among idle workers (else all
// running ones). distributed additionally co-assigns sibling tasks to
// tg.lastWorker (decide_worker_rootish_queuing_disabled); that belongs
// here, using TaskGroup.lastWorker/lastWorkerTasksLeft, which the rest of
// the engine already carries.
func (s *State) decideWorkerRootishQueuingDisabled(ts *TaskState) *WorkerState {
	pool := s.idle.Items()
	if len(pool) == 0 {
		pool = s.running.Items()
	}
	return s.minObjective(ts, pool)
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
// expected start time, then stored bytes.
func (s *State) workerObjective(ts *TaskState, ws *WorkerState) objective {
	start := s.occupancy(ws)/float64(ws.NThreads) + s.commCost(ts, ws)
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

// queueSlotsMaybeOpened mirrors stimulus_queue_slots_maybe_opened: move as
// many tasks from the head of the queue to processing as there are free
// slots on workers.
func (s *State) queueSlotsMaybeOpened() {
	if s.queued.Len() == 0 || math.IsInf(s.cfg.WorkerSaturation, 1) {
		return
	}
	slots := 0
	for _, ws := range s.idleTaskCount.Items() {
		slots += taskSlotsAvailable(ws, s.cfg.WorkerSaturation)
	}
	for i := 0; i < slots; i++ {
		qts := s.queued.peek()
		if qts == nil {
			return
		}
		s.transitionTo(qts, StatusProcessing)
		if qts.state == StatusQueued {
			return // no worker took it; stop rather than spin
		}
	}
}
