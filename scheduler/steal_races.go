package scheduler

import (
	"strconv"

	"daskgo/protocol"
)

// The steal exchange with stock workers (distributed/stealing.py:
// WorkStealing.move_task_request, move_task_confirm, _add_to_in_flight,
// _remove_from_in_flight; the worker's side is
// worker_state_machine.WorkerState._handle_steal_request).
//
// The scheduler never takes a task away on its own: it asks the victim
// with {"op": "steal-request", "key", "stimulus_id": "steal-<n>"}. The
// worker answers {"op": "steal-response", "key", "state", "stimulus_id"}
// with the task's state on its side, and releases the task if that state
// was waiting, ready or constrained (it had not started). Between the two
// messages anything may happen, and each race ends as distributed ends it:
//
//   - the task finished, erred or was released before the answer: leaving
//     processing ended the steal (stealTransition), so the answer finds no
//     steal in flight: "already-aborted", ignored;
//   - the victim left: remove-worker rescheduled its tasks, which ended the
//     steal the same way;
//   - the task started: the answer says executing (or long-running,
//     memory, cancelled, resumed): "already-computing", it stays;
//   - the thief left (or, ours, is no longer running or no longer satisfies
//     the task's restrictions) while the victim gave the task up: the task
//     is rescheduled (processing -> released -> waiting -> decide_worker);
//   - the worker no longer knows the task (state None or released): it is
//     rescheduled too;
//   - a later steal of the same key is in flight (the first one ended and
//     the task was requested again): the older answer carries the older
//     stimulus id, "stale-response", ignored;
//   - the key was forgotten: ignored.
//
// A steal in flight moves occupancy: the victim's in-flight occupancy
// drops by the task's duration there and the thief's grows by its duration
// there (compute + transfer), so the same balance and the next ones see
// the move already made. The adjustment is undone when the steal ends,
// whatever the outcome; when no steal is in flight the accumulated sums
// are reset to zero so float drift cannot build up.

// stealInFlight is InFlightInfo: one steal request awaiting its answer.
type stealInFlight struct {
	victim, thief                 *WorkerState
	victimDuration, thiefDuration float64
	stimulusID                    string
}

// Worker task states as _WORKER_STATE_CONFIRM / _REJECT / _UNDEFINED.
var (
	stealConfirmStates = map[string]bool{"ready": true, "constrained": true, "waiting": true}
	stealRejectStates  = map[string]bool{"memory": true, "executing": true, "long-running": true, "cancelled": true, "resumed": true}
)

// StealStats counts work stealing's decisions and the outcome of every
// answer: WorkStealing.count and .metrics, and the events it logs.
type StealStats struct {
	// Balances is WorkStealing.count: balance passes that sent requests.
	Balances int64
	// Requests: steal-request messages sent.
	Requests int64
	// Confirmed: the victim gave the task up and the thief got it.
	Confirmed int64
	// Rejected: the victim had already started it ("already-computing").
	Rejected int64
	// Rescheduled: the victim gave it up but the thief is gone or invalid,
	// or the victim did not know the task: rescheduled.
	Rescheduled int64
	// Aborted: the task left the victim before the answer ("already-aborted").
	Aborted int64
	// Stale: the answer was for an older request of the key ("stale-response").
	Stale int64
	// Unknown: the key was forgotten before the answer.
	Unknown int64
	// Unexpected: the answer named a state distributed does not expect.
	Unexpected int64
	// InFlight: requests awaiting an answer now.
	InFlight int
	// RequestsByLevel and CostByLevel are metrics["request_count_total"]
	// and ["request_cost_total"]: requests and their cost (compute +
	// transfer on the victim, seconds) by level.
	RequestsByLevel [stealLevels]int64
	CostByLevel     [stealLevels]float64
}

// StealStats returns the work-stealing counters.
func (s *State) StealStats() StealStats {
	st := s.steal.stats
	st.InFlight = len(s.steal.inFlight)
	return st
}

// stealIdentity is the "stealing" entry of identity (scheduler_info): the
// setting and the counters, for clients and the benchmarks.
func (s *State) stealIdentity() *protocol.Map {
	st := s.StealStats()
	counts := make([]any, stealLevels)
	costs := make([]any, stealLevels)
	for i := range counts {
		counts[i] = st.RequestsByLevel[i]
		costs[i] = st.CostByLevel[i]
	}
	return protocol.NewMap(
		"enabled", s.stealOn(),
		"interval", s.cfg.WorkStealingInterval.Seconds(),
		"balances", st.Balances,
		"requests", st.Requests,
		"confirmed", st.Confirmed,
		"rejected", st.Rejected,
		"rescheduled", st.Rescheduled,
		"aborted", st.Aborted,
		"stale", st.Stale,
		"unknown", st.Unknown,
		"unexpected", st.Unexpected,
		"in_flight", int64(st.InFlight),
		"request_count_total", counts,
		"request_cost_total", costs,
	)
}

// stealRequest mirrors WorkStealing.move_task_request: ask victim to give
// ts up for thief. It reports false when a steal of ts is in flight.
func (s *State) stealRequest(ts *TaskState, victim, thief *WorkerState) bool {
	e := &s.steal
	if e.inFlight[ts] != nil {
		return false
	}
	// the response is matched against this id: it must be unique
	sid := "steal-" + strconv.FormatInt(e.requests, 10)
	e.requests++
	s.stealRemove(ts)
	compute := s.prefixDuration(ts.prefix)
	info := &stealInFlight{
		victim: victim, thief: thief,
		victimDuration: compute + s.commCost(ts, victim),
		thiefDuration:  compute + s.commCost(ts, thief),
		stimulusID:     sid,
	}
	s.toWorker(victim, protocol.NewMap("op", "steal-request", "key", ts.keyAny(), "stimulus_id", sid))
	if e.inFlight == nil {
		e.inFlight = map[*TaskState]*stealInFlight{}
	}
	e.inFlight[ts] = info
	victim.steal.inOcc -= info.victimDuration
	thief.steal.inOcc += info.thiefDuration
	victim.steal.inTasks--
	thief.steal.inTasks++
	e.stats.Requests++
	return true
}

// stealEndInFlight mirrors WorkStealing._remove_from_in_flight: the steal
// of ts (if any) is over; undo its occupancy move.
func (s *State) stealEndInFlight(ts *TaskState) *stealInFlight {
	e := &s.steal
	info := e.inFlight[ts]
	if info == nil {
		return nil
	}
	delete(e.inFlight, ts)
	info.thief.steal.inOcc -= info.thiefDuration
	info.victim.steal.inOcc += info.victimDuration
	info.victim.steal.inTasks++
	info.thief.steal.inTasks--
	if len(e.inFlight) == 0 {
		// in_flight_occupancy.clear(): drop the float residue. Workers
		// that left keep theirs; nothing reads it any more.
		for _, ws := range s.workerOrder.Items() {
			ws.steal.inOcc = 0
		}
		info.thief.steal.inOcc, info.victim.steal.inOcc = 0, 0
	}
	return info
}

// handleStealResponse mirrors WorkStealing.move_task_confirm.
func (s *State) handleStealResponse(x *StealResponse) {
	e := &s.steal
	if !s.stealOn() {
		// distributed registers no steal-response handler then; we never
		// sent a request, so there is nothing to answer
		s.logf(LogDebug, x.Key, x.Worker, "", "steal-response ignored: work stealing is off")
		return
	}
	ts := s.tasks.get(x.Key)
	if ts == nil {
		e.stats.Unknown++
		s.logf(LogDebug, x.Key, x.Worker, "", "key released between steal request and confirm")
		return
	}
	state := any(x.State)
	if x.State == "" {
		state = nil
	}
	info := e.inFlight[ts]
	if info == nil {
		e.stats.Aborted++
		s.logEvent([]string{"stealing"}, []any{"already-aborted", any(ts.Key), state, x.Worker, x.ID})
		return
	}
	if info.stimulusID != x.ID {
		e.stats.Stale++
		s.logEvent([]string{"stealing"}, []any{"stale-response", any(ts.Key), state, x.Worker, x.ID})
		return
	}
	s.stealEndInFlight(ts)
	thief, victim := info.thief, info.victim
	defer func() {
		s.checkIdleSaturated(thief)
		s.checkIdleSaturated(victim)
	}()
	if ts.processingOn != victim {
		// unreachable: leaving the victim ends the steal
		e.stats.Unexpected++
		s.logf(LogError, ts.Key, x.Worker, "", "steal-response for %s, which is not processing on the victim %s", ts.Key, victim.Address)
		return
	}
	event := func(what string, extra ...any) {
		msg := append([]any{what}, extra...)
		msg = append(msg, any(ts.Key), state, victim.Address, thief.Address, x.ID)
		s.logEvent([]string{"stealing"}, msg)
	}
	thiefGone := thief.closed || s.workers[thief.Address] != thief
	switch {
	case x.State == "" || x.State == "released" ||
		stealConfirmStates[x.State] && (thiefGone || !s.stealThiefStillFits(ts, thief)):
		// the worker no longer has the task, or our steal information is
		// stale: let decide_worker place it again (Scheduler._reschedule)
		e.stats.Rescheduled++
		event("reschedule", thiefGone)
		s.transitionTo(ts, StatusReleased)
	case stealRejectStates[x.State]:
		e.stats.Rejected++
		event("already-computing")
	case stealConfirmStates[x.State]:
		s.stealMove(ts, victim, thief)
		e.stats.Confirmed++
		event("confirm")
	default:
		// distributed raises ValueError here; the task stays on the victim
		e.stats.Unexpected++
		s.logf(LogError, ts.Key, x.Worker, "", "steal-response for %s with unexpected task state %q", ts.Key, x.State)
	}
}

// stealThiefStillFits: ours, part of the "stale steal information" check.
// The thief must be running (a paused thief would sit on the task) and
// still satisfy the task's restrictions (a P2P shuffle may have pinned the
// task to a worker since the request).
func (s *State) stealThiefStillFits(ts *TaskState, thief *WorkerState) bool {
	if thief.status != "running" {
		return false
	}
	if !ts.isRestricted() || ts.x().looseRestrictions {
		return true
	}
	valid, restricted := s.validWorkers(ts)
	return !restricted || containsWorker(valid, thief)
}

// stealMove is move_task_confirm's success branch: the victim gave the
// task up, so it moves to the thief with a fresh run_id. Unlike
// distributed, resources and actor membership move with it.
func (s *State) stealMove(ts *TaskState, victim, thief *WorkerState) {
	why := Reason{Rule: RuleStolen, Other: victim.Address, N1: s.occupancy(victim), N2: s.occupancy(thief)}
	s.stealRemove(ts)
	s.wsRemoveFromProcessing(victim, ts)
	s.releaseResources(ts, victim)
	if ts.actor {
		victim.actors.Remove(ts)
		thief.actors.Add(ts)
	}
	ts.processingOn = thief
	s.wsAddToProcessing(thief, ts)
	s.acquireResources(ts, thief)
	s.stealPut(ts)
	s.toWorker(thief, s.taskToMsg(ts))
	// not a state change, but a placement: the story shows it
	s.log.add(Transition{Key: ts.Key, From: StatusProcessing, To: StatusProcessing, StimulusID: s.stimulusID,
		At: s.now, Worker: thief.Address, Reason: why})
}

// validateStealing checks the work-stealing invariants (steal.go).
func (s *State) validateStealing() {
	e := &s.steal
	if !s.stealOn() {
		if len(e.inFlight) > 0 {
			panic("scheduler invariant broken: steals in flight with stealing off")
		}
		return
	}
	for _, ts := range s.tasks.all() {
		if ts.stealable() && (ts.state != StatusProcessing || ts.processingOn.steal == nil ||
			ts.slotSet[roleStealable-1].role != roleStealable) {
			s.broken(ts, "stealable outside processing")
		}
	}
	occ := map[*WorkerState]float64{}
	ntasks := map[*WorkerState]int{}
	for ts, info := range e.inFlight {
		if ts.state != StatusProcessing || ts.processingOn != info.victim {
			s.broken(ts, "steal in flight but not processing on its victim %s", info.victim.Address)
		}
		if ts.stealable() {
			s.broken(ts, "stealable while a steal of it is in flight")
		}
		occ[info.victim] -= info.victimDuration
		occ[info.thief] += info.thiefDuration
		ntasks[info.victim]--
		ntasks[info.thief]++
	}
	for _, ws := range s.workerOrder.Items() {
		sw := ws.steal
		if sw == nil {
			panic("scheduler invariant broken: worker " + ws.Address + " without stealing state")
		}
		if sw.inTasks != ntasks[ws] {
			panic("scheduler invariant broken: in-flight steal count of " + ws.Address + " is " +
				strconv.Itoa(sw.inTasks) + ", want " + strconv.Itoa(ntasks[ws]))
		}
		if d := sw.inOcc - occ[ws]; d > 1e-6 || d < -1e-6 {
			panic("scheduler invariant broken: in-flight steal occupancy of " + ws.Address + " is " +
				strconv.FormatFloat(sw.inOcc, 'g', -1, 64) + ", want " + strconv.FormatFloat(occ[ws], 'g', -1, 64))
		}
		for level := range sw.levels {
			set := &sw.levels[level]
			set.validate(s, "stealable level of "+ws.Address)
			for _, ts := range set.Items() {
				switch {
				case ts.state != StatusProcessing || ts.processingOn != ws:
					s.broken(ts, "stealable on %s but not processing there", ws.Address)
				case ws.longRunning.Has(ts) || ts.viaQueuePolicy || ts.prefix.fast:
					s.broken(ts, "stealable on %s although long-running, queue-placed or fast", ws.Address)
				}
			}
		}
	}
}
