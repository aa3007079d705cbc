package scheduler

import (
	"math"
	"sort"
)

// Work stealing: distributed/stealing.py's WorkStealing extension, as a
// policy over the engine's state. Placement (decide_worker) is made once,
// with the occupancy known at the time; when a worker later runs dry while
// another still has a backlog, stealing moves tasks that have not started
// from the backlog to the idle worker. It runs on its own periodic stimulus,
// StealTick (work-stealing-interval, 1s by default), as distributed's
// PeriodicCallback does, and talks to stock workers with steal-request /
// steal-response (steal_races.go).
//
// Bookkeeping, kept on every transition while stealing is on (the
// extension's transition hook, stealTransition):
//
//   - every task entering processing is put in one of its worker's 15
//     stealable levels by its cost multiplier (transfer time of its inputs
//     plus a 100 ms latency, over its compute time): level 0 holds tasks
//     without dependencies, higher levels tasks ever costlier to move, and
//     a task whose move would cost more than 2^8.5 times its compute time is
//     never stealable. balance walks the levels in order, so cheap-to-move
//     tasks go first;
//   - a task leaving processing leaves its level and ends any steal in
//     flight for it (so a steal-response arriving later finds nothing);
//   - a task put while its prefix had no measured duration is re-levelled
//     when the prefix's first task finishes.
//
// Invariants (validateStealing): a task is in at most one level set, of
// the worker it is processing on; it is then not long-running, not placed
// by the queuing policy, not of a fast prefix, and no steal of it is in
// flight. A task with a steal in flight is processing on its victim. The
// in-flight occupancy and task counts of every worker are the sums over
// the requests in flight; with none in flight they are zero.
//
// Never stolen:
//
//   - queued tasks (withheld roots): they are not processing, so they are
//     in no level; a worker gets them from the queue when it has a slot;
//   - tasks placed by the queuing policy (viaQueuePolicy: withholding, with
//     or without co-assignment). A deliberate difference from distributed,
//     which would steal such a root once it is processing: the queue
//     already hands a root to whichever worker frees a slot first and
//     gives each worker at most ceil(saturation × nthreads) of them, so a
//     steal gains at most one root's duration at the tail, while with
//     co-assignment it would split the siblings a run keeps together (the
//     reductions would then fetch them: the transfers co-assignment exists
//     to avoid). With worker-saturation inf, roots co-located by
//     tg.last_worker are stealable as in distributed;
//   - with co-assignment, tasks whose inputs on their worker would take more
//     than a quarter of their compute time to move (coLocalCheap);
//   - tasks of prefixes at or under 1 ms in default-task-durations
//     (stealing.fast_tasks), long-running (seceded) tasks, and tasks whose
//     restrictions no idle worker satisfies (_get_thief), unless loose.

// stealLatency is stealing.LATENCY: a steal costs several network bounces
// and a task submission, so small tasks are priced as if moving them took
// at least 100 ms.
const stealLatency = 0.1

// stealLevels is len(WorkStealing.cost_multipliers).
const stealLevels = 15

// stealCostMultipliers mirrors WorkStealing.cost_multipliers: (1.0,) +
// (1 + 2**(i-6) for i in 1..14).
var stealCostMultipliers = func() (m [stealLevels]float64) {
	m[0] = 1
	for i := 1; i < stealLevels; i++ {
		m[i] = 1 + math.Pow(2, float64(i-6))
	}
	return m
}()

// stealWorker is one worker's work-stealing state.
type stealWorker struct {
	// levels are stealable[worker]: the worker's stealable tasks by level.
	levels [stealLevels]taskSet
	// inOcc and inTasks are in_flight_occupancy and in_flight_tasks: what
	// the requests in flight will add (as thief) or take away (as victim).
	inOcc   float64
	inTasks int
	// snap is the worker's occupancy at the start of the running balance
	// (balance's occupancies dict).
	snap float64
}

func newStealWorker() *stealWorker {
	sw := &stealWorker{}
	for i := range sw.levels {
		sw.levels[i].role = roleStealable
	}
	return sw
}

// stealExt is WorkStealing's scheduler-wide state.
type stealExt struct {
	// inFlight is WorkStealing.in_flight: the steal requests sent and not
	// answered (or aborted) yet.
	inFlight map[*TaskState]*stealInFlight
	// requests is _request_counter: the n of the "steal-n" stimulus ids.
	requests int64
	stats    StealStats
	// scratch buffers of balance, reused between ticks
	thieves, victims []*WorkerState
	tasks            []*TaskState
}

// stealOn reports whether work stealing is on (work-stealing: true).
func (s *State) stealOn() bool { return !s.cfg.NoWorkStealing }

// ---- bookkeeping -------------------------------------------------------------

// stealTransition mirrors WorkStealing.transition, run after every
// transition while stealing is on: start is the state the task left,
// ts.state the one it reached.
func (s *State) stealTransition(ts *TaskState, start Status) {
	if start == StatusProcessing {
		s.stealRemove(ts)
		s.stealEndInFlight(ts)
		if ts.state == StatusMemory {
			s.stealRelevel(ts.prefix)
		}
	}
	if ts.state == StatusProcessing {
		s.stealPut(ts)
	}
}

// stealPut mirrors WorkStealing.put_key_in_stealable, plus the exclusions
// above (queuing-policy roots, long-running tasks).
func (s *State) stealPut(ts *TaskState) {
	ws := ts.processingOn
	if ws == nil || ws.steal == nil || ts.viaQueuePolicy || ws.longRunning.Has(ts) {
		return
	}
	level, ok := s.stealLevel(ts)
	if !ok || (s.coOn() && !s.coLocalCheap(ts, ws)) {
		return
	}
	ws.steal.levels[level].addNew(ts) // absent: a task is in at most one level
	if ts.prefix.durationAverage < 0 {
		// _get_prefix_duration is a guess (unknown-task-duration or twice
		// the longest execution seen): re-level once it is measured
		ts.prefix.addStealUnknown(ts)
	}
}

// coStealMaxLocalRatio bounds, with co-assignment on, the time to move a
// task's inputs that its worker holds locally, relative to its compute time.
const coStealMaxLocalRatio = 0.25

// coLocalCheap (ours, co-assignment only) reports whether the inputs ws
// holds locally for ts would take at most a quarter of its compute time to
// move. Co-assignment puts a reduction where its inputs are; distributed's
// cost model prices only the input transfer and ignores that the output of
// a stolen task must usually travel back to the worker of the run for the
// next reduction, so on the seed workloads it moved reductions of
// co-assigned chunks for no gain: in the simulator (vorticity, 20 workers,
// seed 1) stealing took transfers from 121 to 174 GiB at the same
// makespan. With this bound, over seeds 0-3, 113-127 GiB against 109-130
// without stealing (the holder choice alone moves a run by +-10 %); on
// anom-mean, climactic-mean and basic-sum at 5, 20 and 100 workers at most
// one GiB in ten more, makespans within 3 % (scheduler/WITHHOLDING.md).
// Tasks whose local inputs are small stay stealable, with distributed's
// levels. The duration is the prefix's estimate at the time, re-checked
// when a guessed one is first measured (stealRelevel).
func (s *State) coLocalCheap(ts *TaskState, ws *WorkerState) bool {
	var local int64
	for _, dts := range ts.dependencies.Items() {
		if ws.hasWhat.Has(dts) {
			local += s.getNBytes(dts)
		}
	}
	return float64(local)/s.bandwidth <= coStealMaxLocalRatio*s.prefixDuration(ts.prefix)
}

// stealRemove mirrors WorkStealing.remove_key_from_stealable.
func (s *State) stealRemove(ts *TaskState) {
	if set := ts.slotSet[roleStealable-1]; set != nil {
		set.Remove(ts)
	}
}

// stealable reports whether ts sits in a stealable level (key_stealable).
func (ts *TaskState) stealable() bool { return ts.slotSet[roleStealable-1] != nil }

// stealLevel mirrors WorkStealing.steal_time_ratio; ok is false for tasks
// that are never stolen.
func (s *State) stealLevel(ts *TaskState) (level int, ok bool) {
	if ts.prefix.fast {
		return 0, false
	}
	if ts.dependencies.Len() == 0 {
		return 0, true // nothing to move but the task itself
	}
	compute := s.prefixDuration(ts.prefix)
	if compute <= 0 {
		return 0, false // a zero estimate is a long-running task's
	}
	var nbytes int64
	for _, dts := range ts.dependencies.Items() {
		nbytes += s.getNBytes(dts)
	}
	transfer := float64(nbytes)/s.bandwidth + stealLatency
	// Python's round() rounds halves to even
	level = int(math.RoundToEven(math.Log2(transfer/compute) + 6))
	if level < 1 {
		level = 1
	} else if level >= stealLevels {
		return 0, false
	}
	return level, true
}

// addStealUnknown appends ts to the prefix's unknown-duration tasks. Tasks
// that left processing, or sit there twice, are dropped whenever the list
// outgrows twice the prefix's processing tasks (and 64), so it stays
// proportional to them: amortized O(1) per task.
func (tp *TaskPrefix) addStealUnknown(ts *TaskState) {
	if n := len(tp.stealUnknown); n >= 64 && n >= 2*tp.states[StatusProcessing] {
		seen := make(map[*TaskState]struct{}, tp.states[StatusProcessing])
		keep := tp.stealUnknown[:0]
		for _, x := range tp.stealUnknown {
			if _, dup := seen[x]; !dup && x.state == StatusProcessing {
				seen[x] = struct{}{}
				keep = append(keep, x)
			}
		}
		clear(tp.stealUnknown[len(keep):])
		tp.stealUnknown = keep
	}
	tp.stealUnknown = append(tp.stealUnknown, ts)
}

// stealRelevel mirrors the memory branch of WorkStealing.transition: the
// prefix now has a measured duration, so its tasks put under a guess are
// levelled again (recalculate_cost), unless a steal of them is in flight.
func (s *State) stealRelevel(tp *TaskPrefix) {
	list := tp.stealUnknown
	if list == nil {
		return
	}
	tp.stealUnknown = nil
	for _, ts := range list {
		if ts.state != StatusProcessing || ts.processingOn == nil || s.steal.inFlight[ts] != nil {
			continue
		}
		s.stealRemove(ts)
		s.stealPut(ts)
	}
}

// stealRequeueAll levels every processing task not in flight again, under
// the mode a configuration change just set: roots whose viaQueuePolicy it
// cleared become ordinary processing tasks, and co-assignment's locality
// bound starts or stops applying.
func (s *State) stealRequeueAll() {
	if !s.stealOn() {
		return
	}
	for _, ws := range s.workerOrder.Items() {
		for _, ts := range ws.processing.Items() {
			if s.steal.inFlight[ts] == nil {
				s.stealRemove(ts)
				s.stealPut(ts)
			}
		}
	}
}

// stealRestart mirrors WorkStealing.restart: restart released every task
// (so the levels are empty); forget the unknown-duration lists too.
func (s *State) stealRestart() {
	for _, tp := range s.prefixes {
		tp.stealUnknown = nil
	}
}

// ---- balance -------------------------------------------------------------------

// combinedOcc is WorkStealing._combined_occupancy: the occupancy at the
// start of the balance plus what the requests in flight move.
func combinedOcc(ws *WorkerState) float64 { return ws.steal.snap + ws.steal.inOcc }

// combinedNProcessing is WorkStealing._combined_nprocessing.
func combinedNProcessing(ws *WorkerState) int { return ws.processing.Len() + ws.steal.inTasks }

// stealBalance mirrors WorkStealing.balance: idle workers are the thieves;
// the victims are the saturated workers or, when none is, the ten most
// occupied ones that have more tasks than threads. Level by level (cheap
// to move first), victim by victim (most occupied first), each stealable
// task goes to the thief that would start it soonest if that thief would
// still be less busy than the victim after the move:
//
//	occ(thief) + comm(thief) + compute <= occ(victim) - (comm(victim) + compute)/2
//
// A thief stops being one once it is no longer unoccupied. Where
// distributed iterates sets (in hash order), this walks workers sorted by
// occupancy then address, and a level from its most recently added task:
// the victim runs its tasks in priority order, so the last ones added are
// usually the ones it would start last. The result is deterministic.
func (s *State) stealBalance() {
	if !s.stealOn() {
		return
	}
	e := &s.steal
	thieves := append(e.thieves[:0], s.idle.Items()...)
	defer func() { clear(thieves); e.thieves = thieves[:0] }()
	if len(thieves) == 0 || len(thieves) == len(s.workers) {
		return
	}
	for _, ws := range s.workerOrder.Items() {
		ws.steal.snap = s.occupancy(ws)
	}
	byOcc := func(v []*WorkerState) {
		sort.Slice(v, func(i, j int) bool {
			if oi, oj := combinedOcc(v[i]), combinedOcc(v[j]); oi != oj {
				return oi > oj
			}
			return v[i].Address < v[j].Address
		})
	}
	victims := append(e.victims[:0], s.saturated.Items()...)
	defer func() { clear(victims[:cap(victims)]); e.victims = victims[:0] }()
	if len(victims) == 0 {
		victims = append(victims, s.workerOrder.Items()...)
		byOcc(victims)
		victims = victims[:min(10, len(victims))] // topk(10)
		keep := victims[:0]
		for _, ws := range victims {
			if combinedOcc(ws) > 0.2 && combinedNProcessing(ws) > ws.NThreads && !containsWorker(thieves, ws) {
				keep = append(keep, ws)
			}
		}
		victims = keep
		if len(victims) == 0 {
			return
		}
	}
	byOcc(victims)
	now := s.unixNow()
	var log []any
	for level := 0; level < stealLevels && len(thieves) > 0; level++ {
		for _, victim := range victims {
			set := &victim.steal.levels[level]
			if set.Len() == 0 || len(thieves) == 0 {
				continue
			}
			tasks := append(e.tasks[:0], set.Items()...)
			for i := len(tasks) - 1; i >= 0 && len(thieves) > 0; i-- {
				ts := tasks[i]
				if ts.slotSet[roleStealable-1] != set {
					continue // unreachable: only ts itself leaves set below
				}
				thief := s.stealThief(ts, thieves)
				if thief == nil {
					continue
				}
				occThief, occVictim := combinedOcc(thief), combinedOcc(victim)
				commThief, commVictim := s.commCost(ts, thief), s.commCost(ts, victim)
				compute := s.prefixDuration(ts.prefix)
				if occThief+commThief+compute > occVictim-(commVictim+compute)/2 {
					continue
				}
				s.stealRequest(ts, victim, thief)
				cost := compute + commVictim
				log = append(log, []any{now, int64(level), any(ts.Key), cost, victim.Address, occVictim, thief.Address, occThief})
				e.stats.RequestsByLevel[level]++
				e.stats.CostByLevel[level] += cost
				if !s.isUnoccupied(thief, combinedOcc(thief), combinedNProcessing(thief)) {
					thieves = removeWorker(thieves, thief)
				}
			}
			clear(tasks)
			e.tasks = tasks[:0]
			s.checkIdleSaturatedOcc(victim, combinedOcc(victim))
		}
	}
	if len(log) > 0 {
		s.logEvent([]string{"stealing"}, []any{"request", log})
		e.stats.Balances++
	}
}

// stealThief mirrors WorkStealing._get_thief: among the thieves valid for
// ts (all of them when ts is unrestricted; any when its restrictions are
// loose and none is valid), the one minimising stealing_objective, ties by
// address.
func (s *State) stealThief(ts *TaskState, thieves []*WorkerState) *WorkerState {
	pool := thieves
	if ts.isRestricted() {
		valid, restricted := s.validWorkers(ts)
		if restricted {
			if vt := intersectWorkers(thieves, valid); len(vt) > 0 {
				pool = vt
			} else if !ts.x().looseRestrictions {
				return nil
			}
		}
	}
	return minWorkerBy(ts, pool, s.stealObjective)
}

// stealObjective mirrors WorkStealing.stealing_objective: worker_objective
// with the in-flight requests counted.
func (s *State) stealObjective(ts *TaskState, ws *WorkerState) objective {
	o := objective{startTime: combinedOcc(ws)/float64(ws.NThreads) + s.commCost(ts, ws), nbytes: ws.nbytes}
	if ts.actor {
		o.actors = ws.actors.Len()
	}
	return o
}

func removeWorker(list []*WorkerState, ws *WorkerState) []*WorkerState {
	for i, w := range list {
		if w == ws {
			copy(list[i:], list[i+1:])
			list[len(list)-1] = nil
			return list[:len(list)-1]
		}
	}
	return list
}
