package scheduler

import (
	"testing"
	"time"
)

// adaptive_target with work withheld: 100 roots of unknown duration
// (500 ms each) on 2 one-thread workers; 4 are processing (2 slots each at
// saturation 1.1), 96 queued: (4 + 96) * 0.5 s over 5 s is 10 threads, so
// 10 workers of one thread.
func TestAdaptiveTargetCountsWithheldRoots(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"), withSaturation(1.1))
	s.submit("c1", append(rootTasks("x", 100), treeTasks("sum", "x", 100, 10)...), "sum-2-0")
	eq(t, s.Count(StatusQueued), 96, "queued")
	eq(t, s.AdaptiveTarget(5*time.Second), 10, "target")
	eq(t, s.AdaptiveTarget(50*time.Second), 1*2, "target at 50 s: the 2 workers there are (cpu 1, but never fewer than those not closable)")
}

func TestAdaptiveTargetWithoutWorkers(t *testing.T) {
	s := newTestState(t)
	eq(t, s.AdaptiveTarget(0), 0, "nothing to do, nobody there")
	s.submit("c1", []GraphTask{task("a")})
	eq(t, s.Count(StatusQueued)+s.Count(StatusNoWorker), 1, "a waits for a worker")
	eq(t, s.AdaptiveTarget(0), 1, "one worker for the waiting task")
}

// workers_to_close: idle workers holding the least data go first; a
// worker processing a task is kept.
func TestWorkersToClose(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1", "w3:1"), withSaturation(inf))
	s.submit("c1", []GraphTask{annotated(task("big"), "workers", "w1"), annotated(task("small"), "workers", "w2"),
		annotated(task("busy"), "workers", "w3")})
	s.finish("w1", "big")
	s.handle(&TaskFinished{Worker: addr("w2"), Key: k("small"), RunID: s.Task(k("small")).runID, NBytes: 1})
	eqSlice(t, s.WorkersToClose(CloseQuery{N: 1, Target: -1}), []string{addr("w2")}, "n=1")
	eqSlice(t, s.WorkersToClose(CloseQuery{N: -1, Target: 1}), []string{addr("w2"), addr("w1")}, "target=1")
	eqSlice(t, s.WorkersToClose(CloseQuery{N: 3, Target: -1}), []string{addr("w2"), addr("w1"), addr("w3")}, "n=3 closes the busy one too")
	eqSlice(t, s.WorkersToClose(CloseQuery{N: -1, Target: -1}), []string{addr("w2"), addr("w1")}, "by memory: the idle ones")
	eqSlice(t, s.WorkersToClose(CloseQuery{N: 3, Target: -1, Minimum: 2}), []string{addr("w2")}, "minimum 2")
}

// check_idle: busy while tasks run or a transition happened since the last
// tick; idle from the first quiet tick on.
func TestIdleSince(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a")})
	s.handle(&Tick{})
	eq(t, s.IdleSince().IsZero(), true, "busy while a runs")
	s.finish("w1", "a")
	s.handle(&Tick{})
	eq(t, s.IdleSince().IsZero(), true, "a transition since the last tick: busy")
	s.clock = s.clock.Add(time.Second)
	s.handle(&Tick{})
	quiet := s.clock
	eq(t, s.IdleSince(), quiet, "idle from the first quiet tick")
	s.clock = s.clock.Add(time.Second)
	s.handle(&Tick{})
	eq(t, s.IdleSince(), quiet, "still idle since then")
}
