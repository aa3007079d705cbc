package scheduler

import (
	"testing"
	"time"

	"daskgo/protocol"
)

func TestWorkerLossRecomputesAndReportsLostData(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("x")})
	holder, other := "w1", "w2"
	if s.Task(k("x")).processingOn.Address == addr("w2") {
		holder, other = "w2", "w1"
	}
	s.finish(holder, "x")
	out := s.handle(&RemoveWorker{Worker: addr(holder)})
	lost := msgsOp(out.Clients.Of("c1"), "lost-data")
	eq(t, len(lost), 1, "lost-data")
	eqSlice(t, fieldNames(lost[0]), []string{"op", "key"}, "lost-data fields")
	eq(t, len(computeTasksTo(out, other)), 1, "recomputed on the survivor")
	rw := msgsOp(out.Workers.Of(addr(other)), "remove-worker")
	eq(t, len(rw), 1, "remove-worker to survivors")
	eqSlice(t, fieldNames(rw[0]), []string{"op", "worker", "stimulus_id"}, "remove-worker fields")
	eq(t, rw[0].Get("worker"), any(addr(holder)), "removed address")
	if out.Workers.Of(addr(holder)) != nil {
		t.Fatal("messages to the removed worker")
	}
	s.wantStatus("x", "processing")
	eq(t, s.TotalThreads(), 1, "threads")
}

func TestScatteredDataLostIsForgotten(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	out := s.handle(&UpdateData{Client: "c1", WhoHas: map[protocol.Key][]string{k("d"): {addr("w1")}},
		NBytes: map[protocol.Key]int64{k("d"): 100}, ReplyTo: 3})
	eq(t, len(out.Replies), 1, "update_data reply")
	eq(t, out.Replies[0].Value, any(nil), "reply value")
	kim := msgsOp(out.Clients.Of("c1"), "key-in-memory")
	eq(t, len(kim), 1, "key-in-memory")
	eqSlice(t, fieldNames(kim[0]), []string{"op", "key"}, "scatter key-in-memory has no type")
	s.wantStatus("d", "memory")
	out = s.handle(&RemoveWorker{Worker: addr("w1")})
	s.wantStatus("d", "forgotten")
	eq(t, len(msgsOp(out.Clients.Of("c1"), "cancelled-keys")), 1, "client told the key is gone")
}

func TestKilledWorkerAfterAllowedFailures(t *testing.T) {
	s := newTestState(t, withAllowedFailures(1), withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("boom")})
	s.handle(&RemoveWorker{Worker: addr("w1")})
	// with no threads in the cluster every task looks root-ish: queued
	s.wantStatus("boom", "queued")
	eq(t, s.Task(k("boom")).x().suspicious, 1, "suspicious")
	s.addWorker("w2", 1)
	s.wantStatus("boom", "processing")
	out := s.handle(&RemoveWorker{Worker: addr("w2")})
	s.wantStatus("boom", "erred")
	te := msgsOp(out.Clients.Of("c1"), "task-erred")
	eq(t, len(te), 1, "task-erred")
	if _, ok := te[0].Get("exception").([]byte); !ok {
		t.Fatalf("KilledWorker exception is %T, want raw pickle bytes", te[0].Get("exception"))
	}
	eq(t, te[0].Get("traceback"), any(nil), "traceback")
}

func TestExpectedRemovalIsNotSuspicious(t *testing.T) {
	s := newTestState(t, withAllowedFailures(0), withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("t")})
	s.handle(&RemoveWorker{Worker: s.Task(k("t")).processingOn.Address, Expected: true, Close: true})
	s.wantStatus("t", "processing")
	eq(t, s.Task(k("t")).x().suspicious, 0, "suspicious")
}

func TestStaleRunID(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("x")})
	ts := s.Task(k("x"))
	cur := ts.processingOn.Address
	other := addr("w1")
	if cur == other {
		other = addr("w2")
	}
	// a finished message from another worker with an old run_id: free it there
	out := s.handle(&TaskFinished{Worker: other, Key: k("x"), RunID: ts.runID - 1, NBytes: 1})
	eq(t, len(msgsOp(out.Workers.Of(other), "free-keys")), 1, "free-keys to the stale sender")
	s.wantStatus("x", "processing")
	// stale run on the current worker: released and re-run
	out = s.handle(&TaskFinished{Worker: cur, Key: k("x"), RunID: ts.runID + 100, NBytes: 1})
	s.wantStatus("x", "processing")
	eq(t, countCompute(out), 1, "re-sent after a stale result")
	// stale erred is ignored unless from the current worker
	cur = ts.processingOn.Address
	other = addr("w1")
	if cur == other {
		other = addr("w2")
	}
	before := s.Task(k("x")).runID
	s.handle(&TaskErred{Worker: other, Key: k("x"), RunID: 1})
	eq(t, s.Task(k("x")).runID, before, "stale erred ignored")
	// finished for an unknown key
	out = s.handle(&TaskFinished{Worker: cur, Key: k("nope"), RunID: 1})
	eq(t, len(msgsOp(out.Workers.Of(cur), "free-keys")), 1, "free-keys for unknown key")
}

func TestLongRunningFreesASlot(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), withSaturation(1.0))
	out := s.submit("c1", rootTasks("r", 10))
	eq(t, len(computeTasksTo(out, "w1")), 1, "one slot")
	eq(t, s.Count(StatusQueued), 9, "queued")
	var running string
	for _, ts := range s.tasks.all() {
		if ts.state == StatusProcessing {
			running = ts.Key.String()
		}
	}
	ts := s.Task(k(running))
	out = s.handle(&LongRunning{Worker: addr("w1"), Key: k(running), RunID: ts.runID, ComputeDuration: 2})
	eq(t, len(computeTasksTo(out, "w1")), 1, "seceded task freed a slot")
	eq(t, s.Count(StatusQueued), 8, "queued")
	eq(t, ts.prefix.durationAverage, 2.0, "duration from compute_duration")
	// duplicate/stale long-running is ignored, never a panic
	s.handle(&LongRunning{Worker: addr("w1"), Key: k(running), RunID: ts.runID})
	s.handle(&LongRunning{Worker: addr("w9"), Key: k(running), RunID: ts.runID})
}

func TestReschedule(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("p")})
	cur := s.Task(k("p")).processingOn.Address
	other := addr("w1")
	if other == cur {
		other = addr("w2")
	}
	out := s.handle(&Reschedule{Worker: other, Key: k("p")})
	eq(t, len(out.Workers), 0, "reschedule from a non-owner ignored")
	out = s.handle(&Reschedule{Worker: cur, Key: k("p")})
	eq(t, len(msgsOp(out.Workers.Of(cur), "free-keys")), 1, "free-keys to the old worker")
	eq(t, countCompute(out), 1, "sent again")
	s.wantStatus("p", "processing")
	s.handle(&Reschedule{Worker: cur, Key: k("unknown")})
}

func TestNoWorkerThenWorkerJoins(t *testing.T) {
	s := newTestState(t)
	s.submit("c1", []GraphTask{annotated(task("a"), "workers", "w1"), task("b")})
	s.wantStatus("a", "no-worker") // restricted: never root-ish
	s.wantStatus("b", "queued")    // no threads: root-ish, held back
	// a worker registering as init is not schedulable
	out := s.addWorker("w1", 1, func(a *AddWorker) { a.Status = "init" })
	eq(t, countCompute(out), 0, "init worker gets nothing")
	out = s.handle(&WorkerStatusChange{Worker: addr("w1"), Status: "running"})
	eq(t, len(computeTasksTo(out, "w1")), 2, "both tasks go to the new worker")
	eqSlice(t, s.RunningWorkers(), []string{addr("w1")}, "running")
}

func TestPausedWorkerLeavesRunningSet(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.handle(&WorkerStatusChange{Worker: addr("w1"), Status: "paused"})
	eqSlice(t, s.RunningWorkers(), []string{addr("w2")}, "running")
	out := s.submit("c1", []GraphTask{task("a"), task("b")})
	eq(t, len(computeTasksTo(out, "w1")), 0, "paused worker gets nothing")
	eq(t, len(computeTasksTo(out, "w2")), 2, "running worker gets both")
	s.handle(&WorkerStatusChange{Worker: addr("w1"), Status: "bogus"})
	eq(t, s.Worker(addr("w1")).Status(), "paused", "unknown status ignored")
}

func TestHeartbeatAndTTL(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	out := s.handle(&WorkerHeartbeat{Worker: addr("w1"), ReplyTo: 5,
		Metrics: protocol.NewMap("bandwidth", protocol.NewMap("total", 50e6)), Bandwidth: 50e6, HasBandwidth: true,
		Executing: map[protocol.Key]float64{}})
	eq(t, len(out.Replies), 1, "reply")
	r := out.Replies[0].Value.(*protocol.Map)
	eqSlice(t, fieldNames(r), []string{"status", "time", "heartbeat-interval"}, "reply fields")
	eq(t, r.Get("status"), any("OK"), "status")
	eq(t, r.Get("heartbeat-interval"), any(0.5), "interval")
	eq(t, r.Get("time"), any(unixSeconds(s.clock)), "logical time")
	out = s.handle(&WorkerHeartbeat{Worker: addr("zz"), ReplyTo: 6})
	eq(t, out.Replies[0].Value.(*protocol.Map).Get("status"), any("missing"), "unknown worker")

	// w2 never heartbeats again; w1 keeps going
	s.clock = s.clock.Add(4 * time.Minute)
	s.handle(&WorkerHeartbeat{Worker: addr("w1"), ReplyTo: 7})
	s.clock = s.clock.Add(2 * time.Minute)
	out = s.handle(&Tick{})
	eqSlice(t, out.Disconnect, []string{addr("w2")}, "disconnect")
	cl := msgsOp(out.Workers.Of(addr("w2")), "close")
	eq(t, len(cl), 1, "close to the silent worker")
	eqSlice(t, fieldNames(cl[0]), []string{"op", "reason"}, "close fields")
	eqSlice(t, s.WorkerAddresses(), []string{addr("w1")}, "workers left")
}

func TestBadWorkerInputNeverPanics(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a")})
	for _, st := range []Stimulus{
		&TaskFinished{Worker: addr("ghost"), Key: k("a")},
		&TaskErred{Worker: addr("w1"), Key: k("nope")},
		&ReleaseWorkerData{Worker: addr("w1"), Key: k("a")},
		&AddKeys{Worker: addr("ghost"), Keys: keys("a")},
		&RequestRefreshWhoHas{Worker: addr("ghost"), Keys: keys("a")},
		&RemoveWorker{Worker: addr("ghost")},
		&WorkerStatusChange{Worker: addr("ghost"), Status: "running"},
		&AddWorker{Address: addr("w1"), Name: "dup", NThreads: 1, Status: "running"},
		&AddWorker{Address: addr("w9"), Name: "w1", NThreads: 1, Status: "running"},
		&AddWorker{Address: addr("w8"), Name: "w8", NThreads: 0, Status: "running"},
		&GraphMaterialized{RequestID: 99, Client: "c1"},
		&CancelKeys{Client: "nobody", Keys: keys("a")},
		&Retry{Client: "c1", Keys: keys("nope"), ReplyTo: 1},
	} {
		s.handle(st)
	}
	s.wantStatus("a", "processing")
	eq(t, len(s.WorkerAddresses()), 1, "no bogus workers")
	if err := s.CheckNewWorker(addr("w1"), "x"); err == nil {
		t.Fatal("duplicate address accepted")
	}
}

func TestRefreshWhoHas(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("a")})
	holder := s.Task(k("a")).processingOn.Address
	s.handle(&TaskFinished{Worker: holder, Key: k("a"), RunID: s.Task(k("a")).runID, NBytes: 1})
	out := s.handle(&RequestRefreshWhoHas{Worker: addr("w1"), Keys: keys("a", "gone")})
	msgs := out.Workers.Of(addr("w1"))
	eq(t, len(msgs), 2, "refresh-who-has and free-keys")
	eqSlice(t, fieldNames(msgs[0]), []string{"op", "who_has", "stimulus_id"}, "refresh-who-has fields")
	eqSlice(t, msgs[0].Get("who_has").(map[protocol.Key][]string)[k("a")], []string{holder}, "who_has")
	eqSlice(t, keyStrings(msgs[1].Get("keys")), []string{"gone"}, "free-keys for unknown")
}

func TestReleaseWorkerDataLastReplicaRecomputes(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a")})
	s.finish("w1", "a")
	out := s.handle(&ReleaseWorkerData{Worker: addr("w1"), Key: k("a")})
	eq(t, len(msgsOp(out.Clients.Of("c1"), "lost-data")), 1, "lost-data")
	eq(t, len(computeTasksTo(out, "w1")), 1, "recomputed")
	s.wantStatus("a", "processing")
}

func TestReleasingNoWorkerTask(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{annotated(task("pinned"), "workers", []any{"tcp://elsewhere:1"})})
	s.wantStatus("pinned", "no-worker")
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("pinned")})
	s.wantStatus("pinned", "forgotten")
}

func TestScatterOverRunningTask(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("a"), task("b", "a")}, "b")
	out := s.handle(&UpdateData{WhoHas: map[protocol.Key][]string{k("a"): {addr("w2")}}})
	s.wantStatus("a", "memory")
	eq(t, countCompute(out), 1, "b became runnable")
	s.wantStatus("b", "processing")
	// the original run finishing later just adds a replica
	s.handle(&TaskFinished{Worker: addr("w1"), Key: k("a"), RunID: s.Task(k("a")).runID, NBytes: 1})
	s.wantStatus("a", "memory")
}

func TestActorTaskPlacedAndMarked(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	out := s.handle(&UpdateGraph{Client: "c1", Keys: keys("counter"), AllActors: true})
	out = s.handle(&GraphMaterialized{RequestID: out.Helper[0].ID, Client: "c1", Tasks: []GraphTask{task("counter")}})
	ct := computeTasksTo(out, "w1")
	eq(t, len(ct), 1, "sent")
	eq(t, ct[0].Get("actor"), any(true), "actor flag")
	s.finish("w1", "counter")
	out = s.handle(&RemoveWorker{Worker: addr("w1")})
	s.wantStatus("counter", "erred")
	eq(t, len(msgsOp(out.Clients.Of("c1"), "task-erred")), 1, "actor loss reported")
}

// TestWorkerTTLRestartsThroughNanny: check_worker_ttl → restart_workers. A
// silent worker with a nanny is restarted through it, once (the next ticks
// do not ask again); one without a nanny is closed and removed.
func TestWorkerTTLRestartsThroughNanny(t *testing.T) {
	s := newTestState(t, func(c *Config, _ *[]string) { c.WorkerTTL = 5 * time.Second })
	s.addWorker("nannied", 1, func(aw *AddWorker) { aw.Nanny = "tcp://nanny:9000" })
	s.addWorker("bare", 1)
	s.clock = s.clock.Add(10 * time.Second)
	out := s.handle(&Tick{})
	eq(t, len(out.RestartViaNanny), 1, "restarts asked")
	eq(t, out.RestartViaNanny[0], NannyRestart{Worker: addr("nannied"), Nanny: "tcp://nanny:9000", Reason: out.RestartViaNanny[0].Reason}, "restart")
	if out.RestartViaNanny[0].Reason == "" {
		t.Fatal("the restart carries the tick's stimulus id as its reason")
	}
	eqSlice(t, out.Disconnect, []string{addr("bare")}, "the worker without a nanny is closed")
	if s.Worker(addr("bare")) != nil || s.Worker(addr("nannied")) == nil {
		t.Fatal("the bare worker is removed; the nannied one stays until its stream closes")
	}
	s.clock = s.clock.Add(time.Second)
	out = s.handle(&Tick{})
	eq(t, len(out.RestartViaNanny), 0, "no second restart while the first runs")
}
