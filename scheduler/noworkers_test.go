package scheduler

import (
	"bytes"
	"testing"
	"time"

	"daskgo/protocol"
)

func withNoWorkersTimeout(d time.Duration) option {
	return func(c *Config, _ *[]string) { c.NoWorkersTimeout = d }
}

// erredWith returns the exception bytes of the task-erred for key in out
// (nil when there is none).
func erredWith(out Outbox, key string) []byte {
	for _, m := range msgsOp(out.Clients.Of("c1"), "task-erred") {
		if msgKey(m) == key {
			b, _ := m.Get("exception").([]byte)
			return b
		}
	}
	return nil
}

// A task whose restrictions no running worker meets errs with
// NoValidWorkerError once it has been unrunnable for longer than the
// timeout, and not before (_check_unrunnable_task_timeouts).
func TestNoWorkersTimeoutErrsATaskNoWorkerCanRun(t *testing.T) {
	s := newTestState(t, withWorkers("a:1"), withNoWorkersTimeout(time.Second))
	s.submit("c1", []GraphTask{annotated(task("gpu"), "resources", protocol.NewMap("GPU", int64(1)))})
	s.wantStatus("gpu", "no-worker")
	start := s.clock
	if out := s.tickAt(start.Add(900 * time.Millisecond)); erredWith(out, "gpu") != nil {
		t.Fatal("erred before the timeout")
	}
	s.wantStatus("gpu", "no-worker")
	out := s.tickAt(start.Add(1100 * time.Millisecond))
	s.wantStatus("gpu", "erred")
	exc := erredWith(out, "gpu")
	if !bytes.Contains(exc, []byte("NoValidWorkerError")) {
		t.Fatalf("task-erred exception %q, want a NoValidWorkerError pickle", exc)
	}
	events := s.broker.topic("scheduler").ordered()
	last := events[len(events)-1].Msg.(*protocol.Map)
	eq(t, last.Get("action"), any("no-workers-timeout-exceeded"), "scheduler event")
	eqSlice(t, keyStrings(last.Get("keys")), []string{"gpu"}, "its keys")
}

// With no worker at all, a lone task is root-ish and queued; it errs with
// NoWorkerError once no worker has been running for longer than the
// timeout, counted from the first check that saw none
// (_check_queued_task_timeouts). A worker arriving before that runs it.
func TestNoWorkersTimeoutErrsQueuedTasksWhenNoWorkerRuns(t *testing.T) {
	s := newTestState(t, withNoWorkersTimeout(time.Second))
	s.submit("c1", []GraphTask{task("lone")})
	s.wantStatus("lone", "queued")
	start := s.clock
	s.tickAt(start.Add(200 * time.Millisecond)) // no worker since now
	if out := s.tickAt(start.Add(1100 * time.Millisecond)); erredWith(out, "lone") != nil {
		t.Fatal("erred less than the timeout after the first check without workers")
	}
	out := s.tickAt(start.Add(1300 * time.Millisecond))
	s.wantStatus("lone", "erred")
	if exc := erredWith(out, "lone"); !bytes.Contains(exc, []byte("NoWorkerError")) {
		t.Fatalf("task-erred exception %q, want a NoWorkerError pickle", exc)
	}

	s.tickAt(s.clock.Add(500 * time.Millisecond)) // nothing waits: no-workers clock off
	s.submit("c1", []GraphTask{task("later")})
	s.tickAt(s.clock.Add(200 * time.Millisecond))
	s.addWorker("w", 1)
	s.tickAt(s.clock.Add(5 * time.Second))
	s.wantStatus("later", "processing")
}

// Off (dask's null), nothing ever times out.
func TestNoWorkersTimeoutOffLeavesTasksWaiting(t *testing.T) {
	s := newTestState(t, withWorkers("a:1"))
	s.submit("c1", []GraphTask{annotated(task("gpu"), "resources", protocol.NewMap("GPU", int64(1)))})
	s.tickAt(s.clock.Add(time.Hour))
	s.wantStatus("gpu", "no-worker")
}
