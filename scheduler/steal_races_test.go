package scheduler

import (
	"fmt"
	"testing"
)

// The steal-request / steal-response exchange (steal_races.go): every
// race distributed's move_task_confirm handles, as deterministic stimulus
// sequences on stealCluster (stealing_test.go): w1 holds slow-0..slow-9,
// w2 is idle, and the first StealTick requests slow-9, slow-8 and slow-7
// (steal-0, steal-1, steal-2).

// TestStealConfirmMovesTask: the victim had not started the task ("ready")
// and released it: the thief gets compute-task with a new run_id, the
// occupancy moves, and the task finishes there.
func TestStealConfirmMovesTask(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	oldRun := s.Task(k("slow-9")).runID
	out := s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	ct := computeTasksTo(out, "w2")
	eq(t, len(ct), 1, "compute-task to the thief")
	eq(t, msgKey(ct[0]), "slow-9", "stolen key")
	if out.Workers.Of(addr("w1")) != nil {
		t.Fatalf("victim got %v", out.Workers.Of(addr("w1")))
	}
	s.wantOn("slow-9", "w2")
	if s.Task(k("slow-9")).runID == oldRun {
		t.Fatal("run_id not renewed")
	}
	eq(t, s.workers[addr("w1")].processing.Len(), 9, "victim processing")
	eq(t, s.workers[addr("w2")].processing.Len(), 1, "thief processing")
	near(t, s.workers[addr("w2")].steal.inOcc, 1.0+2*8/s.bandwidth, "two steals still in flight for the thief")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Confirmed: 1, InFlight: 2})
	s.finish("w2", "slow-9")
	s.wantStatus("slow-9", "memory")
	ev := s.Events("stealing")
	last := ev[len(ev)-1].([]any)[1].([]any)
	eq(t, last[0].(string), "confirm", "confirm event")
}

// TestStealWaitingAndConstrainedConfirm: waiting and constrained are
// confirmations too (_WORKER_STATE_CONFIRM).
func TestStealWaitingAndConstrainedConfirm(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.stealAnswer("w1", "slow-9", "waiting", "steal-0")
	s.stealAnswer("w1", "slow-8", "constrained", "steal-1")
	s.wantOn("slow-9", "w2")
	s.wantOn("slow-8", "w2")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Confirmed: 2, InFlight: 1})
}

// TestStealRejectedWhenStarted: the victim had started the task: it stays,
// and is not requested again (it left the stealable levels with the request).
func TestStealRejectedWhenStarted(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	for i, state := range []string{"executing", "long-running", "memory"} {
		key := fmt.Sprintf("slow-%d", 9-i)
		out := s.stealAnswer("w1", key, state, fmt.Sprintf("steal-%d", i))
		eq(t, len(out.Workers), 0, "no message on a rejection")
		s.wantOn(key, "w1")
		if s.Task(k(key)).stealable() {
			t.Fatalf("%s stealable again after a rejection", key)
		}
	}
	s.wantStats(StealStats{Balances: 1, Requests: 3, Rejected: 3})
	eq(t, s.workers[addr("w1")].steal.inOcc, 0, "occupancy moves undone")
	eq(t, s.workers[addr("w2")].steal.inOcc, 0, "occupancy moves undone")
	out := s.stealTick()
	for _, r := range stealRequests(t, out, "w1") {
		if r.key == "slow-9" || r.key == "slow-8" || r.key == "slow-7" {
			t.Fatalf("rejected task %s requested again", r.key)
		}
	}
	s.finish("w1", "slow-9")
	s.wantStatus("slow-9", "memory")
}

// TestStealResponseAfterTaskFinished: task-finished reached the scheduler
// before the answer ("memory"): the steal ended when the task left
// processing, so the answer is already-aborted and ignored.
func TestStealResponseAfterTaskFinished(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.finish("w1", "slow-9")
	eq(t, s.StealStats().InFlight, 2, "finishing ended the steal")
	out := s.stealAnswer("w1", "slow-9", "memory", "steal-0")
	eq(t, len(out.Workers), 0, "nothing sent")
	s.wantStatus("slow-9", "memory")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Aborted: 1, InFlight: 2})
}

// TestStealResponseAfterTaskErred: same with task-erred first.
func TestStealResponseAfterTaskErred(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.fail("w1", "slow-9")
	out := s.stealAnswer("w1", "slow-9", "error", "steal-0")
	eq(t, len(out.Workers), 0, "nothing sent")
	s.wantStatus("slow-9", "erred")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Aborted: 1, InFlight: 2})
}

// TestStealThiefLeftBeforeResponse: the victim gave the task up, but the
// thief left meanwhile: the task is rescheduled (here back onto w1, the
// only worker), and the other answers for that thief are handled as usual.
func TestStealThiefLeftBeforeResponse(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.handle(&RemoveWorker{Worker: addr("w2")})
	eq(t, s.StealStats().InFlight, 3, "steals to a departed thief stay in flight until answered")
	out := s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	msgs := out.Workers.Of(addr("w1"))
	if len(msgs) != 2 || msgs[0].Get("op") != "free-keys" || msgs[1].Get("op") != "compute-task" || msgKey(msgs[1]) != "slow-9" {
		t.Fatalf("want free-keys then compute-task for slow-9 to w1, got %d messages", len(msgs))
	}
	s.wantOn("slow-9", "w1")
	s.stealAnswer("w1", "slow-8", "executing", "steal-1")
	s.wantOn("slow-8", "w1")
	s.stealAnswer("w1", "slow-7", "waiting", "steal-2")
	s.wantOn("slow-7", "w1")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Rejected: 1, Rescheduled: 2})
	for _, e := range s.Events("stealing") {
		msg := e.([]any)[1].([]any)
		if msg[0] == "reschedule" && msg[1] != true {
			t.Fatalf("reschedule event does not say the thief left: %v", msg)
		}
	}
}

// TestStealThiefRejoinedAtSameAddress: a thief that left and came back is
// another WorkerState; the steal information is stale: reschedule.
func TestStealThiefRejoinedAtSameAddress(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.handle(&RemoveWorker{Worker: addr("w2")})
	s.addWorker("w2", 1)
	s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	eq(t, s.StealStats().Rescheduled, 1, "rescheduled")
	eq(t, s.StealStats().Confirmed, 0, "not moved to the new w2 blindly")
}

// TestStealThiefPausedBeforeResponse (ours): a paused thief would sit on
// the task; it is rescheduled instead.
func TestStealThiefPausedBeforeResponse(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.handle(&WorkerStatusChange{Worker: addr("w2"), Status: "paused"})
	s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	s.wantOn("slow-9", "w1")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Rescheduled: 1, InFlight: 2})
}

// TestStealVictimLeftBeforeResponse: the victim left: remove-worker
// rescheduled its tasks (onto w2, which holds their data), which ended the
// steals; an answer that still arrives is already-aborted.
func TestStealVictimLeftBeforeResponse(t *testing.T) {
	s := stealClusterHeld(t, 10, []string{"w1", "w2"})
	s.stealTick()
	s.handle(&RemoveWorker{Worker: addr("w1")})
	eq(t, s.StealStats().InFlight, 0, "the victim's removal ended every steal")
	eq(t, s.workers[addr("w2")].steal.inOcc, 0, "in-flight occupancy cleared")
	s.wantOn("slow-9", "w2")
	out := s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	eq(t, len(out.Workers), 0, "nothing sent")
	s.wantOn("slow-9", "w2")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Aborted: 1})
}

// TestStealStaleResponse: a new steal of the same key. The first request
// (steal-0) ended without an answer when the worker rescheduled the task;
// the task came back to w1 and was requested again (steal-3). The late
// answer to steal-0 is stale and ignored; steal-3's is enacted.
func TestStealStaleResponse(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.handle(&Reschedule{Worker: addr("w1"), Key: k("slow-9")})
	s.wantOn("slow-9", "w1") // placed on its data again
	eq(t, s.StealStats().InFlight, 2, "the reschedule ended steal-0")
	out := s.stealTick()
	reqs := stealRequests(t, out, "w1")
	if len(reqs) == 0 || reqs[0] != (stealReq{"slow-9", "steal-3"}) {
		t.Fatalf("want slow-9 requested again as steal-3, got %v", reqs)
	}
	out = s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	eq(t, len(out.Workers), 0, "stale answer ignored")
	s.wantOn("slow-9", "w1")
	eq(t, s.StealStats().Stale, 1, "stale")
	s.stealAnswer("w1", "slow-9", "ready", "steal-3")
	s.wantOn("slow-9", "w2")
	eq(t, s.StealStats().Confirmed, 1, "the current request is enacted")
	ev := s.Events("stealing")
	found := false
	for _, e := range ev {
		if msg := e.([]any)[1].([]any); msg[0] == "stale-response" {
			found = msg[4] == "steal-0"
		}
	}
	if !found {
		t.Fatal("no stale-response event for steal-0")
	}
}

// TestStealNoSecondRequestWhileInFlight: tasks with a steal in flight are
// out of the levels, so later balances do not ask for them again, and
// move_task_request itself refuses.
func TestStealNoSecondRequestWhileInFlight(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	out := s.stealTick()
	for _, r := range stealRequests(t, out, "w1") {
		if r.key == "slow-9" || r.key == "slow-8" || r.key == "slow-7" {
			t.Fatalf("%s requested twice", r.key)
		}
	}
	ts := s.Task(k("slow-9"))
	before := s.StealStats().Requests
	s.begin(&Base{ID: "direct"}, &Outbox{})
	if s.stealRequest(ts, s.workers[addr("w1")], s.workers[addr("w2")]) {
		t.Fatal("a second request for a key in flight was sent")
	}
	s.out = nil
	eq(t, s.StealStats().Requests, before, "requests")
}

// TestStealResponseUnknownKey: the key was forgotten (released by its
// client) between request and answer.
func TestStealResponseUnknownKey(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("slow-9")})
	s.wantStatus("slow-9", "forgotten")
	out := s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	eq(t, len(out.Workers), 0, "nothing sent")
	out = s.stealAnswer("w1", "never-heard-of", "ready", "steal-99")
	eq(t, len(out.Workers), 0, "nothing sent")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Unknown: 2, InFlight: 2})
}

// TestStealUndefinedStateReschedules: the worker no longer knows the task
// (None) or has released it: reschedule (_WORKER_STATE_UNDEFINED).
func TestStealUndefinedStateReschedules(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	out := s.stealAnswer("w1", "slow-9", "", "steal-0")
	eq(t, len(computeTasksTo(out, "w1")), 1, "sent again")
	s.wantOn("slow-9", "w1")
	s.stealAnswer("w1", "slow-8", "released", "steal-1")
	s.wantOn("slow-8", "w1")
	s.wantStats(StealStats{Balances: 1, Requests: 3, Rescheduled: 2, InFlight: 1})
}

// TestStealUnexpectedStateKeepsTask: a state distributed does not expect
// (it raises) leaves the task where it is.
func TestStealUnexpectedStateKeepsTask(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	out := s.stealAnswer("w1", "slow-9", "flight", "steal-0")
	eq(t, len(out.Workers), 0, "nothing sent")
	eq(t, len(out.Logs) > 0, true, "logged")
	s.wantOn("slow-9", "w1")
	eq(t, s.StealStats().Unexpected, 1, "unexpected")
}

// TestStealLongRunningNotStolen: a seceded task leaves the levels; if it
// seceded after the request, the worker answers long-running: rejected.
func TestStealLongRunningNotStolen(t *testing.T) {
	s := stealCluster(t, 10)
	s.handle(&LongRunning{Worker: addr("w1"), Key: k("slow-9"), RunID: s.Task(k("slow-9")).runID, ComputeDuration: -1})
	if s.Task(k("slow-9")).stealable() {
		t.Fatal("long-running task stealable")
	}
	out := s.stealTick()
	for _, r := range stealRequests(t, out, "w1") {
		if r.key == "slow-9" {
			t.Fatal("long-running task requested")
		}
	}
}

// TestStealRestrictionChangedInFlight (ours): the task was pinned to its
// victim (as a P2P shuffle pins an output task) after the request: the
// thief no longer fits, so the task is rescheduled onto a valid worker.
func TestStealRestrictionChangedInFlight(t *testing.T) {
	s := stealCluster(t, 10)
	s.stealTick()
	ts := s.Task(k("slow-9"))
	ts.ext().workerRestrictions = []string{addr("w1")}
	s.stealAnswer("w1", "slow-9", "ready", "steal-0")
	s.wantOn("slow-9", "w1")
	eq(t, s.StealStats().Rescheduled, 1, "rescheduled")
}
