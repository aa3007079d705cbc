package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	"daskgo/protocol"
)

// Shuffle cleanup and failure: the plugin's transition, remove_worker and
// restart hooks, and the output-task restrictions they save and restore.
// A run ends when its barrier is released, erred or forgotten (which is
// also how a successful shuffle ends: the barrier is released once every
// output is computed), or when a participant leaves; then every
// participant gets shuffle-fail, so it drops the run's buffers and files.

// setShuffleRestriction mirrors _set_restriction: pin ts to worker, keeping
// the task's own restrictions to restore at cleanup. A task already pinned
// (hash joins pin shared outputs through either shuffle) keeps its pin. A
// queued task is left alone: queued tasks are unrestricted by invariant,
// and one that is queued is not running on the wrong worker any more.
// It reports whether ts was pinned now.
func (s *State) setShuffleRestriction(ts *TaskState, worker string) bool {
	if ts.x().shuffleSaved || ts.state == StatusQueued {
		return false
	}
	e := ts.ext()
	e.shuffleSaved = true
	e.shuffleOrigWorkers = e.workerRestrictions
	e.workerRestrictions = []string{worker}
	return true
}

// unsetShuffleRestriction mirrors _unset_restriction.
func (s *State) unsetShuffleRestriction(ts *TaskState) {
	e := ts.extra
	if e == nil || !e.shuffleSaved {
		return
	}
	e.workerRestrictions = e.shuffleOrigWorkers
	e.shuffleOrigWorkers = nil
	e.shuffleSaved = false
}

// shuffleTransition mirrors ShuffleSchedulerPlugin.transition: called
// after every transition step (also the intermediate released of a
// two-step transition, as distributed's recursive _transition does). Small
// enough to inline: without a shuffle alive it costs one map length on the
// hottest path.
func (s *State) shuffleTransition(ts *TaskState) {
	if len(s.shuffles.last) != 0 {
		s.shuffleTransitionHook(ts)
	}
}

func (s *State) shuffleTransitionHook(ts *TaskState) {
	switch ts.state {
	case StatusReleased, StatusForgotten:
	case StatusErred:
		if s.blameShuffle(ts) {
			return
		}
	default:
		return
	}
	id, ok := shuffleIDFromKey(ts.Key)
	if !ok {
		return
	}
	if r := s.shuffles.active[id]; r != nil {
		s.failOnWorkers(r, fmt.Sprintf("%s forgotten", r))
		s.cleanOnScheduler(r)
	}
	if ts.state == StatusForgotten {
		delete(s.shuffles.last, id)
	}
}

// blameShuffle is the erred branch of the hook: when a task of an active
// shuffle is the root cause of an error, report that shuffle as failed
// once (distributed logs a "p2p-failed" event) and skip the cleanup, as
// distributed does.
func (s *State) blameShuffle(ts *TaskState) bool {
	if ts.blame() != ts {
		return false
	}
	for _, id := range sortedIDs(s.shuffles.active) {
		r := s.shuffles.active[id]
		if r.failed {
			continue
		}
		barrier := s.tasks.get(barrierKey(id))
		if barrier == nil {
			continue
		}
		if ts == barrier || barrier.dependents.Has(ts) || barrier.dependencies.Has(ts) {
			r.failed = true
			s.logf(LogWarn, ts.Key, "", "", "P2P shuffle %s failed: task %s erred", id, ts.Key)
			return true
		}
	}
	return false
}

// failOnWorkers mirrors _fail_on_workers: shuffle-fail to every
// participant still in the cluster.
func (s *State) failOnWorkers(r *shuffleRun, message string) {
	for _, w := range r.participants.Items() {
		if s.workers[w] == nil {
			continue
		}
		s.toWorkerAddr(w, protocol.NewMap("op", "shuffle-fail", "shuffle_id", r.id,
			"run_id", r.runID, "message", message))
	}
}

// cleanOnScheduler mirrors _clean_on_scheduler: deactivate the run,
// remember which stimulus archived it, restore the output tasks'
// restrictions, and answer RPCs still waiting for the run.
func (s *State) cleanOnScheduler(r *shuffleRun) {
	delete(s.shuffles.active, r.id)
	if r.archivedBy == "" {
		r.archivedBy = s.stimulusID
		s.shuffles.archivedNow = append(s.shuffles.archivedNow, r)
	}
	if barrier := s.tasks.get(barrierKey(r.id)); barrier != nil {
		for _, dts := range barrier.dependents.Items() {
			s.unsetShuffleRestriction(dts)
		}
	}
	for _, ts := range r.restricted {
		s.unsetShuffleRestriction(ts)
	}
	r.restricted = nil
	if len(r.waiters) > 0 {
		s.answerWaiters(r, p2pError(fmt.Sprintf("%s was deactivated before its run was created", r)))
	}
	s.logf(LogInfo, "", "", "", "shuffle %s deactivated due to stimulus %s", r.id, s.stimulusID)
	s.requestShuffleRuns() // a run waiting to align with this one may go now
}

// shuffleWorkerLeft mirrors ShuffleSchedulerPlugin.remove_worker, called
// after the removal's own transitions: fail every active shuffle the
// worker took part in, then restart every shuffle archived by this
// stimulus (including those whose barrier the removal itself released).
func (s *State) shuffleWorkerLeft(addr string) {
	if len(s.shuffles.last) == 0 {
		return
	}
	for _, id := range sortedIDs(s.shuffles.active) {
		r := s.shuffles.active[id]
		if r == nil || !r.participants.Has(addr) {
			continue
		}
		s.failOnWorkers(r, fmt.Sprintf("Worker %s left during active %s", addr, r))
		s.cleanOnScheduler(r)
	}
	// restartShuffle's transitions may archive more runs: a snapshot
	archived := slices.Clone(s.shuffles.archivedNow)
	slices.SortFunc(archived, func(a, b *shuffleRun) int { return cmp.Compare(a.id, b.id) })
	for i, r := range archived {
		if i == 0 || r.id != archived[i-1].id {
			s.restartShuffle(r.id)
		}
	}
}

// endShuffleStimulus forgets which runs the stimulus just handled
// archived.
func (s *State) endShuffleStimulus() {
	if len(s.shuffles.archivedNow) > 0 {
		clear(s.shuffles.archivedNow)
		s.shuffles.archivedNow = s.shuffles.archivedNow[:0]
	}
}

// restartShuffle mirrors _restart_shuffle: release the barrier, its
// dependents and its dependencies, so the transfer tasks run again and
// create a new run on the workers that are left. Nothing restarts once an
// output task has erred.
func (s *State) restartShuffle(id string) {
	barrier := s.tasks.get(barrierKey(id))
	if barrier == nil {
		return
	}
	for _, dts := range barrier.dependents.Items() {
		if dts.state == StatusErred {
			return
		}
	}
	if barrier.state == StatusErred {
		s.logf(LogError, barrier.Key, "", "", "shuffle %s: barrier erred but none of its dependents did; not restarting", id)
		return
	}
	// a snapshot: the transitions below edit these sets
	dependents := slices.Clone(barrier.dependents.Items())
	dependencies := slices.Clone(barrier.dependencies.Items())
	for _, dts := range dependents {
		s.recommend(dts, StatusReleased)
	}
	s.recommend(barrier, StatusReleased)
	for _, dts := range dependencies {
		s.recommend(dts, StatusReleased)
	}
	s.runTransitions()
	s.queueSlotsMaybeOpened()
	s.logf(LogWarn, "", "", "", "shuffle %s restarted due to stimulus %s", id, s.stimulusID)
}

// resetShuffles mirrors the plugin's restart hook (Client.restart): every
// barrier has been released by then, so only the bookkeeping is left.
func (s *State) resetShuffles() {
	for _, id := range sortedIDs(s.shuffles.active) {
		r := s.shuffles.active[id]
		s.failOnWorkers(r, fmt.Sprintf("%s forgotten", r))
		s.cleanOnScheduler(r)
	}
	s.shuffles.active = nil
	s.shuffles.last = nil
	s.endShuffleStimulus()
}

// validateShuffles: a run is handed out iff it has a run_spec; only runs
// being built have waiters; every active run is its shuffle's latest.
func (s *State) validateShuffles() {
	for id, r := range s.shuffles.active {
		if r.id != id || s.shuffles.last[id] != r {
			panic(fmt.Sprintf("scheduler invariant broken: active shuffle %s is not its latest run", r))
		}
		if r.runSpec != nil && len(r.waiters) > 0 {
			panic(fmt.Sprintf("scheduler invariant broken: %s has a run_spec and %d waiters", r, len(r.waiters)))
		}
		if r.archivedBy != "" {
			panic(fmt.Sprintf("scheduler invariant broken: %s is active and archived", r))
		}
	}
}
