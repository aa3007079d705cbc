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

// placeRootishUnqueued mirrors decide_worker_rootish_queuing_disabled
// (worker-saturation = inf): keep giving a group's tasks to tg.lastWorker
// for about len(group)/total_nthreads*nthreads tasks, so siblings that feed
// the same reduction share a worker; then pick the best worker by
// worker_objective among idle workers (else all running ones). It relies,
// as distributed does, on being called for a batch of ready tasks in
// priority order.
func (s *State) placeRootishUnqueued(ts *TaskState) Placement {
	pool := s.idle.Items()
	if len(pool) == 0 {
		pool = s.running.Items()
	}
	if len(pool) == 0 {
		return noWorker(0)
	}
	tg := ts.group
	var ws *WorkerState
	var why Reason
	// Python tests last_worker_tasks_left for truthiness: a negative count
	// (floor gave 0 for a small data-producer group) keeps the worker too.
	if lws := tg.lastWorker; lws != nil && tg.lastWorkerTasksLeft != 0 && lws.status == "running" && s.workers[lws.Address] == lws {
		ws = lws
		why = Reason{Rule: RuleGroupWorker, N1: float64(tg.lastWorkerTasksLeft - 1)}
	} else {
		ws = s.minObjective(ts, pool)
		tg.lastWorkerTasksLeft = int(math.Floor(float64(tg.size) / float64(s.totalNThreads) * float64(ws.NThreads)))
		why = Reason{Rule: RuleRootishObjective, N1: float64(len(pool))}
	}
	// record last_worker, or clear it on the group's final task (ts itself
	// is still waiting here)
	if tg.states[StatusReleased]+tg.states[StatusWaiting] > 1 {
		tg.lastWorker = ws
	} else {
		tg.lastWorker = nil
	}
	tg.lastWorkerTasksLeft--
	return Placement{Worker: ws, Reason: why}
}

// minObjective picks the worker minimising worker_objective, ties by
// address so the choice is deterministic.
func (s *State) minObjective(ts *TaskState, pool []*WorkerState) *WorkerState {
	return minWorkerBy(ts, pool, s.workerObjective)
}

// minWorkerBy is the worker of pool with the smallest objective of ts,
// ties by address; nil for an empty pool. Placement (worker_objective) and
// stealing (stealing_objective) both choose this way.
func minWorkerBy(ts *TaskState, pool []*WorkerState, of func(*TaskState, *WorkerState) objective) *WorkerState {
	var best *WorkerState
	var bo objective
	for _, ws := range pool {
		o := of(ts, ws)
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
