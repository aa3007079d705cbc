package scheduler

import (
	"slices"
	"time"

	"daskgo/protocol"
	"daskgo/protocol/pickle"
)

// no-workers-timeout (distributed.scheduler.no-workers-timeout), as
// Scheduler._check_no_workers has it: a task that has waited in no-worker
// longer than the timeout errs with NoValidWorkerError when workers were
// running all along (its restrictions are what no worker meets), or with
// NoWorkerError when no worker has been running since before it became
// unrunnable; and once no worker has been running for longer than the
// timeout, every queued task errs with NoWorkerError. Python checks every
// 250 ms; here every Tick (500 ms by default), so a task errs within a
// tick of its deadline.
//
// noWorkersSince is distributed's _no_workers_since: set while tasks are
// queued or unrunnable and no worker is running, refreshed where workers
// join, leave or change status, and on every check.

// refreshNoWorkersSince mirrors Scheduler._refresh_no_workers_since.
func (s *State) refreshNoWorkersSince() {
	if s.cfg.NoWorkersTimeout == Never {
		return
	}
	if s.running.Len() > 0 || (s.queuedLen() == 0 && s.unrunnable.Len() == 0) {
		s.noWorkersSince = time.Time{}
		return
	}
	if s.noWorkersSince.IsZero() {
		s.noWorkersSince = s.now
	}
}

// noteUnrunnable records when ts went to no-worker (unrunnable[ts] = now).
func (s *State) noteUnrunnable(ts *TaskState) {
	if s.cfg.NoWorkersTimeout != Never {
		ts.ext().unrunnableSince = s.now
	}
}

// checkNoWorkers mirrors Scheduler._check_no_workers, run on Tick.
func (s *State) checkNoWorkers() {
	timeout := s.cfg.NoWorkersTimeout
	if timeout == Never {
		return
	}
	s.refreshNoWorkersSince()
	var unsatisfied, noWorkers []*TaskState
	for _, ts := range s.unrunnable.Items() {
		since := ts.x().unrunnableSince
		if !s.now.After(since.Add(timeout)) {
			continue
		}
		if s.noWorkersSince.IsZero() || !s.noWorkersSince.Before(since) {
			unsatisfied = append(unsatisfied, ts)
		} else {
			noWorkers = append(noWorkers, ts)
		}
	}
	if !s.noWorkersSince.IsZero() && s.now.After(s.noWorkersSince.Add(timeout)) {
		noWorkers = append(noWorkers, s.queuedTasks()...)
	}
	if len(unsatisfied) == 0 && len(noWorkers) == 0 {
		return
	}
	secs := timeout.Seconds()
	var affected protocol.Set // a set of keys, as Python logs it
	for _, ts := range unsatisfied {
		x := ts.x()
		s.errNoWorkers(ts, pickle.NoValidWorkerError(ts.Key, x.hostRestrictions, x.workerRestrictions, x.resourceRestrictions, secs),
			"task %s marked as failed because it timed out waiting for its restrictions to become satisfied")
		affected = append(affected, ts.Key)
	}
	for _, ts := range noWorkers {
		s.errNoWorkers(ts, pickle.NoWorkerError(ts.Key, secs),
			"task %s marked as failed because it timed out waiting without any running workers")
		affected = append(affected, ts.Key)
	}
	s.runTransitions()
	s.logEvent([]string{"scheduler"}, protocol.NewMap("action", "no-workers-timeout-exceeded", "keys", affected))
}

// errNoWorkers is transition(key, "erred", exception=..., cause=key) for a
// task the check timed out, if it is still where the check found it (an
// earlier one's erring may have released or erred it already).
func (s *State) errNoWorkers(ts *TaskState, exception []byte, why string) {
	if ts.state != StatusNoWorker && ts.state != StatusQueued {
		return
	}
	s.logf(LogError, ts.Key, "", "", why, ts.Key)
	s.transition(ts, StatusErred, &transArgs{cause: ts, exception: exception})
}

// queuedTasks lists the queued tasks, most urgent first.
func (s *State) queuedTasks() []*TaskState {
	var out []*TaskState
	s.eachQueued(func(ts *TaskState) bool { out = append(out, ts); return true })
	slices.SortFunc(out, func(a, b *TaskState) int {
		switch {
		case a.priority.less(b.priority):
			return -1
		case b.priority.less(a.priority):
			return 1
		}
		return 0
	})
	return out
}
