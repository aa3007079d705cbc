package scheduler

import (
	"testing"

	"daskgo/protocol"
	"daskgo/scheduler/coord"
)

// nbytes: all measured tasks (or the given keys, -1 for unmeasured),
// summed per key_split with summary; an unknown key is KeyError.
func TestNBytesAsGetNBytes(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	s.submit("c1", []GraphTask{task("inc-1"), task("inc-2"), task("dec-1")})
	s.finish("w1", "inc-1")
	s.finish("w1", "inc-2")
	all, err := s.NBytes(nil, false)
	eq(t, err, error(nil), "all")
	eq(t, all.Len(), 2, "measured tasks only")
	sum, _ := s.NBytes(nil, true)
	eq(t, sum.Get("inc"), any(int64(16)), "summary by key_split")
	some, _ := s.NBytes(keys("dec-1"), false)
	eq(t, some.Entries[0].Value, any(int64(-1)), "unmeasured")
	_, err = s.NBytes(keys("nope"), true)
	eq(t, err.(*coord.RemoteException).Class, "KeyError", "unknown key")
}

func TestTaskStatusesAndPrefixStates(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("inc-1"), task("inc-2", "inc-1")})
	st := s.TaskStatuses(keys("inc-1", "inc-2", "gone"))
	eq(t, st.Entries[0].Value, any("processing"), "inc-1")
	eq(t, st.Entries[1].Value, any("waiting"), "inc-2")
	eq(t, st.Entries[2].Value, any(nil), "unknown: None")
	ps := s.PrefixStates()
	inc := ps.Get("inc").(*protocol.Map)
	eq(t, inc.Get("processing"), any(int64(1)), "processing")
	eq(t, inc.Get("waiting"), any(int64(1)), "waiting")
	eqSlice(t, fieldNames(inc), []string{"memory", "erred", "released", "processing", "waiting"}, "fields")
}

// call_stack's targets: a waiting key leads to its processing
// dependencies, grouped by their worker.
func TestCallStackTargetsWalkWaitingTasks(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	s.submit("c1", []GraphTask{task("a"), task("b"), task("c", "a", "b")})
	got, err := s.CallStackTargets(keys("c"))
	eq(t, err, error(nil), "no error")
	eq(t, len(got[addr("w1")]), 2, "a and b run on w1")
	_, err = s.CallStackTargets(keys("zz"))
	eq(t, err.(*coord.RemoteException).Class, "KeyError", "unknown key")
}

// get_error_cause blames the root of an erred chain; get_runspec returns
// the task's pickled run_spec as compute-task carries it.
func TestErrorCauseAndRunSpec(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a"), task("b", "a")})
	s.fail("w1", "a")
	s.wantStatus("b", "erred")
	cause, ok := s.ErrorCause(keys("ok-key", "b"))
	eq(t, ok, true, "found")
	eq(t, cause, k("a"), "b's error is a's")
	_, ok = s.ErrorCause(keys("nope"))
	eq(t, ok, false, "none erred")
	spec, err := s.RunSpecOf(k("a"))
	eq(t, err, error(nil), "run_spec")
	eq(t, string(spec.Frames[0]), "spec:a", "the task's pickle")
	_, err = s.RunSpecOf(k("zz"))
	eq(t, err.(*coord.RemoteException).Class, "KeyError", "unknown key")
}

// amm_handler: stop stops the ticks, start restarts them, run_once runs
// the policy while stopped; running says which.
func TestAMMControlStartStopRunOnce(t *testing.T) {
	s := ammReplicas(t)
	s.finish("w2", "c")
	s.wantReply(s.handle(&AMMControl{Method: "running", ReplyTo: 1}), 1, true)
	s.handle(&AMMControl{Method: "stop", ReplyTo: 2})
	s.wantReply(s.handle(&AMMControl{Method: "running", ReplyTo: 3}), 3, false)
	eq(t, len(removed(s.handle(&AMMTick{}), "w2")), 0, "a stopped manager's tick drops nothing")
	eq(t, len(removed(s.handle(&AMMControl{Method: "run_once", ReplyTo: 4}), "w2")), 1, "run_once drops the replica")
	s.handle(&AMMControl{Method: "start", ReplyTo: 5})
	s.wantReply(s.handle(&AMMControl{Method: "running", ReplyTo: 6}), 6, true)
	s.wantReply(s.handle(&AMMControl{Method: "bogus", ReplyTo: 7}), 7, "AssertionError")

	off := ammReplicas(t, func(c *Config, _ *[]string) { c.NoActiveMemoryManager = true })
	off.wantReply(off.handle(&AMMControl{Method: "running", ReplyTo: 1}), 1, false)
	off.finish("w2", "c")
	off.handle(&AMMControl{Method: "start", ReplyTo: 2})
	eq(t, len(removed(off.handle(&AMMTick{}), "w2")), 1, "started at run time, the ticks drop")
}

// set_resources updates the worker's resources and schedules what they
// now admit.
func TestSetResourcesAdmitsWaitingTasks(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{annotated(task("g"), "resources", protocol.NewMap("GPU", int64(1)))})
	s.wantStatus("g", "no-worker")
	out := s.handle(&SetResources{Worker: addr("w1"), Resources: map[string]float64{"GPU": 1}, ReplyTo: 1})
	s.wantReply(out, 1, "OK")
	eq(t, len(computeTasksTo(out, "w1")), 1, "g sent to w1")
	eq(t, s.Worker(addr("w1")).Resources["GPU"], 1.0, "resources")
}
