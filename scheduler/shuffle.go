package scheduler

import (
	"fmt"
	"slices"
	"sort"

	"daskgo/protocol"
	"daskgo/protocol/pickle"
)

// P2P shuffle and rechunk: the scheduler half of distributed's
// ShuffleSchedulerPlugin (distributed/shuffle/_scheduler_plugin.py).
// Workers exchange the shards among themselves; the scheduler only hands out
// runs (which worker owns which output partition), runs the barrier, pins
// output tasks to their owners, and fails and restarts a shuffle when a
// participant leaves.
//
// Python objects stay in the helper: a run's ShuffleRunSpec pickle and its
// partition -> worker map come from the materializer's shuffle_run op
// (Outbox.ShuffleRuns, answered by ShuffleRunCreated), so creating a run is
// two stimuli where distributed has one call. Requests that arrive while a
// run is being created wait for it (shuffleRun.waiters). Run ids are the
// engine's, never the helper's.

// ---- stimuli ---------------------------------------------------------------

// ---- outputs ---------------------------------------------------------------

// ShuffleBarrierPlan is the engine's reply to a consistent ShuffleBarrier.
type ShuffleBarrierPlan struct {
	Participants []string
}

// ---- state -----------------------------------------------------------------

const barrierPrefix = "shuffle-barrier-"

// shuffleExt is the plugin's state. last keeps each shuffle's latest run,
// active or archived, until its barrier is forgotten (distributed's
// _shuffles). archivedNow are the runs deactivated by the stimulus being
// handled, which a remove-worker restarts: distributed finds them by
// stimulus id in _archived_by_stimulus; a list emptied after every
// stimulus cannot match a run of an earlier stimulus whose id happens to
// be equal (ids are made from the clock).
type shuffleExt struct {
	active      map[string]*shuffleRun
	last        map[string]*shuffleRun
	archivedNow []*shuffleRun
	runIDs      int64 // ShuffleRunSpec's run_id counter
	shift       int   // _shift_counter: rotates the worker list per run
}

// shuffleRun is SchedulerShuffleState. While runSpec is nil the helper is
// (or will be, once requested) building it and RPCs wait in waiters.
type shuffleRun struct {
	id           string
	runID        int64
	runSpec      *protocol.Blob
	workerFor    []any
	participants oset[string]
	waiters      []shuffleWaiter
	requested    bool
	restricted   []*TaskState // output tasks pinned through this run
	archivedBy   string
	failed       bool
}

type shuffleWaiter struct {
	to     int64
	worker string
}

func (r *shuffleRun) String() string {
	return fmt.Sprintf("SchedulerShuffleState<%s[%d]>", r.id, r.runID)
}

func barrierKey(id string) protocol.Key { return protocol.StrKey(barrierPrefix + id) }

// shuffleIDFromKey mirrors id_from_key: only str keys name a barrier. It
// runs on every release while a shuffle is alive, so tuple keys are
// rejected by their first byte instead of being decoded.
func shuffleIDFromKey(k protocol.Key) (string, bool) {
	str, plain := keyStr(k)
	if !plain {
		if len(k) == 0 || (k[0] != 0xda && k[0] != 0xdb) { // str16, str32
			return "", false
		}
		str, plain = k.Value().(string)
	}
	if !plain || len(str) <= len(barrierPrefix) || str[:len(barrierPrefix)] != barrierPrefix {
		return "", false
	}
	return str[len(barrierPrefix):], true
}

// ActiveShuffles lists the ids of the active shuffles, sorted.
func (s *State) ActiveShuffles() []string { return sortedIDs(s.shuffles.active) }

func sortedIDs(m map[string]*shuffleRun) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// p2pError is error_message(P2PConsistencyError(msg)) with the "message"
// that ShuffleRun._ensure_output_worker reads on a failed restrict.
func p2pError(msg string) *protocol.Map {
	return protocol.NewMap("status", "error",
		"exception", pickle.Exception("distributed.shuffle._exceptions", "P2PConsistencyError", msg),
		"traceback", nil,
		"exception_text", fmt.Sprintf("P2PConsistencyError(%q)", msg),
		"traceback_text", "",
		"message", msg)
}

// helperError relays a Python exception from the helper to the worker.
func helperError(info *ErrorInfo) *protocol.Map {
	return protocol.NewMap("status", "error",
		"exception", info.Exception, "traceback", info.Traceback,
		"exception_text", info.ExceptionText, "traceback_text", info.TracebackText,
		"message", info.ExceptionText)
}

func runSpecMsg(r *shuffleRun) *protocol.Map {
	return protocol.NewMap("status", "OK", "run_spec", r.runSpec)
}

// ---- RPC stimuli -------------------------------------------------------------

// handleShuffleGetOrCreate mirrors ShuffleSchedulerPlugin.get_or_create.
func (s *State) handleShuffleGetOrCreate(x *ShuffleGetOrCreate) {
	if s.unknownShuffleWorker(x.Worker, x.ReplyTo) {
		return
	}
	if r := s.shuffles.active[x.ShuffleID]; r != nil {
		s.shuffleGet(r, x.Worker, x.ReplyTo)
		return
	}
	if msg := s.shuffleCreate(x); msg != "" {
		s.reply(x.ReplyTo, p2pError(msg))
	}
}

// handleShuffleGet mirrors ShuffleSchedulerPlugin.get.
func (s *State) handleShuffleGet(x *ShuffleGet) {
	if s.unknownShuffleWorker(x.Worker, x.ReplyTo) {
		return
	}
	r := s.shuffles.active[x.ShuffleID]
	if r == nil {
		s.reply(x.ReplyTo, p2pError(fmt.Sprintf("No active shuffle with id=%q found", x.ShuffleID)))
		return
	}
	s.shuffleGet(r, x.Worker, x.ReplyTo)
}

// unknownShuffleWorker answers an RPC from a worker the scheduler does
// not know (it left while the RPC was on its way) with distributed's error.
func (s *State) unknownShuffleWorker(worker string, to int64) bool {
	if s.workers[worker] != nil {
		return false
	}
	s.reply(to, p2pError(fmt.Sprintf("Scheduler is unaware of this worker %q", worker)))
	return true
}

// shuffleGet mirrors _get: the caller becomes a participant.
func (s *State) shuffleGet(r *shuffleRun, worker string, to int64) {
	r.participants.Add(worker)
	if r.runSpec == nil {
		r.waiters = append(r.waiters, shuffleWaiter{to: to, worker: worker})
		return
	}
	s.reply(to, runSpecMsg(r))
}

// shuffleCreate mirrors _create up to the helper request; it returns the
// P2PConsistencyError text when no run can be created.
func (s *State) shuffleCreate(x *ShuffleGetOrCreate) string {
	bk := barrierKey(x.ShuffleID)
	barrier := s.tasks.get(bk)
	if barrier == nil {
		return fmt.Sprintf("Barrier task with key %q does not exist. This may be caused by task fusion "+
			"during graph generation. Please let us know that you ran into this by leaving a comment at "+
			"distributed#7816.", barrierPrefix+x.ShuffleID)
	}
	if barrier.runSpec == nil || s.kindName(barrier) != "P2PBarrierTask" {
		return fmt.Sprintf("Task %s is a %s, not a P2PBarrierTask", bk, s.kindName(barrier))
	}
	ts := s.tasks.get(x.Key)
	if ts == nil || ts.state != StatusProcessing {
		state := "forgotten"
		if ts != nil {
			state = ts.state.String()
		}
		return fmt.Sprintf("Expected <TaskState %s> to be processing, is %s.", x.Key, state)
	}
	s.shuffles.runIDs++
	r := &shuffleRun{id: x.ShuffleID, runID: s.shuffles.runIDs}
	r.participants.Add(x.Worker)
	r.waiters = []shuffleWaiter{{to: x.ReplyTo, worker: x.Worker}}
	if s.shuffles.active == nil {
		s.shuffles.active = map[string]*shuffleRun{}
		s.shuffles.last = map[string]*shuffleRun{}
	}
	s.shuffles.active[r.id] = r
	s.shuffles.last[r.id] = r
	// _ensure_output_tasks_are_non_rootish: outputs first run anywhere just
	// to learn their worker and Reschedule; queuing them would make that
	// round trip the bottleneck.
	for _, dts := range barrier.dependents.Items() {
		dts.notQueueable = true
	}
	s.logf(LogInfo, x.Key, x.Worker, "", "shuffle %s initialized by task %s executed on worker %s", r.id, x.Key, x.Worker)
	s.requestShuffleRuns()
	return ""
}

// requestShuffleRuns asks the helper for every run still to be built whose
// output mapping does not depend on a run the helper is building now. Of
// two such runs sharing outputs, the first (by id) goes first and the
// other follows with its mapping as Existing (_calculate_worker_for).
func (s *State) requestShuffleRuns() {
	for _, id := range sortedIDs(s.shuffles.active) {
		r := s.shuffles.active[id]
		if r.runSpec != nil || r.requested {
			continue
		}
		barrier := s.tasks.get(barrierKey(id))
		if barrier == nil { // cleanup ends runs whose barrier goes; never here
			s.abandonRun(r, p2pError(fmt.Sprintf("Barrier of shuffle %s is gone", id)))
			continue
		}
		existing, blocked := s.alignedOutputs(barrier)
		if blocked {
			continue
		}
		workers := s.shuffleWorkers(barrier)
		if len(workers) == 0 {
			s.abandonRun(r, p2pError(fmt.Sprintf("No workers to run shuffle %s on", id)))
			continue
		}
		r.requested = true
		s.out.ShuffleRuns = append(s.out.ShuffleRuns, ShuffleRunRequest{
			ShuffleID: id, RunID: r.runID, Barrier: barrier.runSpec.Payload(), Workers: workers, Existing: existing,
		})
	}
}

// alignedOutputs collects the partition -> worker pairs of the active
// shuffles whose barriers feed the same output tasks; blocked means one of
// them is still with the helper.
func (s *State) alignedOutputs(barrier *TaskState) (existing []any, blocked bool) {
	seen := map[*TaskState]bool{barrier: true}
	for _, dts := range barrier.dependents.Items() {
		for _, other := range dts.dependencies.Items() {
			if seen[other] {
				continue
			}
			seen[other] = true
			id, ok := shuffleIDFromKey(other.Key)
			if !ok {
				continue
			}
			r := s.shuffles.active[id]
			switch {
			case r == nil:
			case r.runSpec == nil && r.requested:
				return nil, true
			case r.runSpec != nil:
				existing = append(existing, r.workerFor...)
			}
		}
	}
	return existing, false
}

// shuffleWorkers is the worker list of _calculate_worker_for: the
// barrier's worker restrictions or every worker, rotated by the counter so
// that many small shuffles spread over the cluster.
func (s *State) shuffleWorkers(barrier *TaskState) []string {
	workers := slices.Clone(barrier.x().workerRestrictions)
	if len(workers) == 0 {
		workers = s.WorkerAddresses()
	}
	if len(workers) == 0 {
		return nil
	}
	shift := s.shuffles.shift % len(workers)
	s.shuffles.shift++
	return append(workers[shift:], workers[:shift]...)
}

// handleShuffleRunCreated activates the run the helper built and answers
// the RPCs waiting for it.
func (s *State) handleShuffleRunCreated(x *ShuffleRunCreated) {
	r := s.shuffles.active[x.ShuffleID]
	if r == nil || r.runID != x.RunID || r.runSpec != nil {
		s.logf(LogDebug, "", "", "", "stale shuffle run %s[%d] from the helper ignored", x.ShuffleID, x.RunID)
		return
	}
	switch {
	case x.Err != nil:
		s.logf(LogError, "", "", "", "shuffle %s: the helper could not create run %d: %s", r.id, r.runID, x.Err.ExceptionText)
		s.abandonRun(r, helperError(x.Err))
		s.requestShuffleRuns()
		return
	case x.RunSpec == nil:
		s.abandonRun(r, p2pError(fmt.Sprintf("the helper returned no run_spec for shuffle %s", r.id)))
		s.requestShuffleRuns()
		return
	}
	for _, w := range x.Workers {
		if s.workers[w] == nil {
			// A worker left while the helper picked workers. Nobody has
			// seen this run, so ask again with the workers that are left
			// (and a fresh run id, so that the late answer is stale)
			// rather than hand it out and restart it at once.
			s.logf(LogInfo, "", w, "", "shuffle %s: worker %s left while run %d was created; creating it again", r.id, w, r.runID)
			s.shuffles.runIDs++
			r.runID, r.requested = s.shuffles.runIDs, false
			s.requestShuffleRuns()
			return
		}
	}
	r.runSpec, r.workerFor = x.RunSpec, x.WorkerFor
	for _, w := range x.Workers {
		r.participants.Add(w)
	}
	s.answerWaiters(r, runSpecMsg(r))
	s.requestShuffleRuns()
}

// abandonRun drops a run that was never handed out, answering its waiters
// with reply.
func (s *State) abandonRun(r *shuffleRun, reply *protocol.Map) {
	if s.shuffles.active[r.id] == r {
		delete(s.shuffles.active, r.id)
	}
	if r.archivedBy == "" {
		r.archivedBy = s.stimulusID
	}
	s.answerWaiters(r, reply)
}

// answerWaiters answers every RPC waiting for r's run with reply.
func (s *State) answerWaiters(r *shuffleRun, reply any) {
	for _, w := range r.waiters {
		s.reply(w.to, reply)
	}
	r.waiters = nil
}

// handleShuffleBarrier mirrors ShuffleSchedulerPlugin.barrier up to the
// broadcast, which the outer ring makes.
func (s *State) handleShuffleBarrier(x *ShuffleBarrier) {
	r := s.shuffles.active[x.ShuffleID]
	switch {
	case r == nil:
		s.reply(x.ReplyTo, fmt.Errorf("shuffle_barrier: no active shuffle with id %q", x.ShuffleID))
	case r.runID != x.RunID:
		s.reply(x.ReplyTo, fmt.Errorf("run_id=%d does not match %s", x.RunID, r))
	case r.runSpec == nil:
		s.reply(x.ReplyTo, fmt.Errorf("shuffle_barrier: %s has not been created yet", r))
	case !x.Consistent:
		s.logf(LogWarn, "", "", "", "shuffle %s restarted due to data inconsistency during barrier", r.id)
		s.restartShuffle(r.id)
		s.reply(x.ReplyTo, nil)
	default:
		s.reply(x.ReplyTo, ShuffleBarrierPlan{Participants: slices.Clone(r.participants.Items())})
	}
}

// handleShuffleRestrictTask mirrors ShuffleSchedulerPlugin.restrict_task.
func (s *State) handleShuffleRestrictTask(x *ShuffleRestrictTask) {
	r := s.shuffles.active[x.ShuffleID]
	var msg string
	switch {
	case r == nil:
		msg = fmt.Sprintf("No active shuffle with id=%q found", x.ShuffleID)
	case r.runID > x.RunID:
		msg = fmt.Sprintf("Request stale, expected run_id=%d for %s", x.RunID, r)
	case r.runID < x.RunID:
		msg = fmt.Sprintf("Request invalid, expected run_id=%d for %s", x.RunID, r)
	case s.tasks.get(x.Key) == nil:
		msg = fmt.Sprintf("Task %s is unknown to the scheduler", x.Key)
	}
	if msg != "" {
		s.reply(x.ReplyTo, p2pError(msg))
		return
	}
	ts := s.tasks.get(x.Key)
	if s.setShuffleRestriction(ts, x.Worker) {
		r.restricted = append(r.restricted, ts)
	}
	s.reply(x.ReplyTo, protocol.NewMap("status", "OK"))
}

// shuffleParked reports whether the RPC id waits for a run the helper is
// building (its waiters are answered by ShuffleRunCreated). Only active
// runs wait, and few shuffles are active at once.
func (s *State) shuffleParked(id int64) bool {
	for _, r := range s.shuffles.active {
		for _, w := range r.waiters {
			if w.to == id {
				return true
			}
		}
	}
	return false
}
