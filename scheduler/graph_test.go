package scheduler

import (
	"math"
	"testing"
	"time"

	"daskgo/protocol"
)

func TestLostDependenciesCancelSubmission(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	out := s.submit("c1", []GraphTask{task("b", "ghost"), task("c")}, "b", "c")
	ck := msgsOp(out.Clients.Of("c1"), "cancelled-keys")
	eq(t, len(ck), 1, "cancelled-keys")
	eqSlice(t, fieldNames(ck[0]), []string{"op", "keys", "reason", "msg"}, "fields")
	eq(t, ck[0].Get("reason"), any("lost dependencies"), "reason")
	eq(t, len(keyStrings(ck[0].Get("keys"))), 2, "whole submission cancelled")
	eq(t, s.NumTasks(), 0, "nothing created")
	eq(t, countCompute(out), 0, "nothing sent")
}

func TestMaterializerErrorErrsEveryKey(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	out := s.handle(updateGraph("c1", "a", "b"))
	out = s.handle(&GraphMaterialized{RequestID: out.Helper[0].ID, Client: "c1",
		Err: &ErrorInfo{Exception: []byte("E"), Traceback: []byte("T")}})
	te := msgsOp(out.Clients.Of("c1"), "task-erred")
	eq(t, len(te), 2, "task-erred per key")
	eqSlice(t, fieldNames(te[0]), []string{"op", "key", "exception", "traceback"}, "fields")
}

func TestHeldStimuliWaitForMaterialization(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	out := s.handle(updateGraph("c1", "a"))
	req := out.Helper[0]
	eq(t, req.Client, "c1", "request client")
	// the client releases its key before the graph is materialized
	out = s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("a")})
	eq(t, len(out.Workers)+len(out.Clients), 0, "held")
	out2 := s.handle(updateGraph("c1", "b"))
	eq(t, len(out2.Helper), 0, "second graph held too")
	out = s.handle(&GraphMaterialized{RequestID: req.ID, Client: "c1", Tasks: []GraphTask{task("a")}})
	// a was created, sent, then released by the held stimulus, in order
	eq(t, countCompute(out), 1, "a sent")
	eq(t, len(msgsOp(out.Workers.Of(addr("w1")), "free-keys")), 1, "then freed")
	s.wantStatus("a", "forgotten")
	eq(t, len(out.Helper), 1, "held update-graph forwarded")
	eq(t, s.PendingGraphs(), 1, "b in the helper")
	// a stale answer is ignored
	s.handle(&GraphMaterialized{RequestID: req.ID, Client: "c1", Tasks: []GraphTask{task("a")}})
	s.wantStatus("a", "forgotten")
	s.handle(&GraphMaterialized{RequestID: out.Helper[0].ID, Client: "c1", Tasks: []GraphTask{task("b")}})
	s.wantStatus("b", "processing")
}

func TestTwoClientsShareAKey(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.handle(&AddClient{Client: "c2"})
	s.submit("c1", []GraphTask{task("shared")})
	out := s.submit("c2", []GraphTask{task("shared")})
	eq(t, countCompute(out), 0, "not recomputed")
	out = s.finish("w1", "shared")
	eq(t, len(msgsOp(out.Clients.Of("c1"), "key-in-memory")), 1, "c1 told")
	eq(t, len(msgsOp(out.Clients.Of("c2"), "key-in-memory")), 1, "c2 told")
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("shared")})
	s.wantStatus("shared", "memory")
	out = s.handle(&RemoveClient{Client: "c2"})
	s.wantStatus("shared", "forgotten")
	eq(t, len(msgsOp(out.Workers.Of(addr("w1")), "free-keys")), 1, "freed once nobody wants it")
}

func TestResubmittedMemoryKeyIsReReported(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("m")})
	s.finish("w1", "m")
	out := s.submit("c1", []GraphTask{task("m")})
	kim := msgsOp(out.Clients.Of("c1"), "key-in-memory")
	if len(kim) == 0 {
		t.Fatal("memory key not re-reported")
	}
	eqSlice(t, fieldNames(kim[0]), []string{"op", "key"}, "re-report has no type")
	// a new graph on top of the existing future: only the new task runs
	out = s.submit("c1", []GraphTask{task("n", "m")}, "n")
	eq(t, countCompute(out), 1, "n sent")
}

func TestErredDependencyErrsNewSubmission(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("e")})
	s.fail("w1", "e")
	out := s.submit("c1", []GraphTask{task("f", "e")}, "f")
	s.wantStatus("f", "erred")
	// distributed reports f from its transition and again (with e) as a
	// touched erred task
	reported := map[string]int{}
	for _, m := range msgsOp(out.Clients.Of("c1"), "task-erred") {
		reported[msgKey(m)]++
	}
	eq(t, reported["f"], 2, "f reported")
	eq(t, reported["e"], 1, "e re-reported")
}

func TestCancelGoesToAllClients(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.handle(&AddClient{Client: "c2"})
	s.submit("c1", []GraphTask{task("a"), task("b", "a")})
	out := s.handle(&CancelKeys{Client: "c1", Keys: keys("a"), Reason: "user", Msg: "bye"})
	for _, c := range []string{"c1", "c2"} {
		ck := msgsOp(out.Clients.Of(c), "cancelled-keys")
		eq(t, len(ck), 1, "cancelled-keys to "+c)
		eqSlice(t, fieldNames(ck[0]), []string{"op", "keys", "reason", "msg"}, "fields")
		got := keyStrings(ck[0].Get("keys"))
		eq(t, len(got), 2, "dependent cancelled too")
		eq(t, ck[0].Get("msg"), any("bye"), "msg relayed")
	}
	s.wantStatus("a", "forgotten")
	s.wantStatus("b", "forgotten")
	eq(t, len(msgsOp(out.Workers.Of(addr("w1")), "free-keys")), 1, "processing task freed")
}

func TestCancelKeepsKeysOthersWant(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.handle(&AddClient{Client: "c2"})
	s.submit("c1", []GraphTask{task("a")})
	s.submit("c2", []GraphTask{task("a")})
	out := s.handle(&CancelKeys{Client: "c1", Keys: keys("a")})
	s.wantStatus("a", "processing")
	eq(t, len(keyStrings(msgsOp(out.Clients.Of("c2"), "cancelled-keys")[0].Get("keys"))), 0, "nothing cancelled")
}

func TestClientRemovalReleasesOnlyItsKeys(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	s.handle(&AddClient{Client: "c2"})
	s.submit("c1", []GraphTask{task("mine"), task("ours")})
	s.submit("c2", []GraphTask{task("ours")})
	s.handle(&RemoveClient{Client: "c1"})
	s.wantStatus("mine", "forgotten")
	s.wantStatus("ours", "processing")
	eqSlice(t, s.Clients(), []string{"c2"}, "clients")
}

func TestHeartbeatClient(t *testing.T) {
	s := newTestState(t)
	out := s.handle(&HeartbeatClient{Client: "c1"})
	m := out.Clients.Of("c1")[0]
	eqSlice(t, fieldNames(m), []string{"op", "interval"}, "fields")
	eq(t, m.Get("interval"), any(5.0), "interval")
}

func TestRestrictions(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.addWorker("gpu", 1, func(a *AddWorker) { a.Resources = map[string]float64{"GPU": 2} })
	out := s.submit("c1", []GraphTask{
		annotated(task("on-w2"), "workers", []any{addr("w2")}),
		annotated(task("by-name"), "workers", "w1"),
		annotated(task("needs-gpu"), "resources", protocol.NewMap("GPU", int64(1))),
		annotated(task("too-much"), "resources", protocol.NewMap("GPU", int64(4))),
		annotated(task("loose"), "workers", []any{"tcp://gone:1"}, "allow_other_workers", true),
	})
	eqSlice(t, allComputeTasks(out)[addr("w2")][:1], []string{"on-w2"}, "worker restriction")
	if got := allComputeTasks(out)[addr("w1")]; len(got) == 0 || got[0] != "by-name" {
		t.Fatalf("name restriction not honoured: %v", got)
	}
	gpu := computeTasksTo(out, "gpu")
	if len(gpu) == 0 || msgKey(gpu[0]) != "needs-gpu" {
		t.Fatalf("resource restriction not honoured: %v", allComputeTasks(out))
	}
	eq(t, gpu[0].Get("resource_restrictions").(*protocol.Map).Get("GPU"), any(int64(1)), "resources relayed")
	s.wantStatus("too-much", "no-worker")
	s.wantStatus("loose", "processing")
	out = s.addWorker("biggpu", 1, func(a *AddWorker) { a.Resources = map[string]float64{"GPU": 8} })
	eq(t, len(computeTasksTo(out, "biggpu")), 1, "unrunnable task placed on the new worker")
}

func TestDependencyLocality(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"), withSaturation(inf))
	s.submit("c1", []GraphTask{task("big"), task("small")})
	bigOn := s.Task(k("big")).processingOn.Address
	smallOn := s.Task(k("small")).processingOn.Address
	if bigOn == smallOn {
		t.Fatalf("big and small both on %s: the test needs them apart", bigOn)
	}
	s.handle(&TaskFinished{Worker: bigOn, Key: k("big"), RunID: s.Task(k("big")).runID, NBytes: 1 << 20})
	s.handle(&TaskFinished{Worker: smallOn, Key: k("small"), RunID: s.Task(k("small")).runID, NBytes: 10})
	out := s.submit("c1", []GraphTask{task("join", "big", "small")}, "join")
	if got := msgsOp(out.Workers.Of(bigOn), "compute-task"); len(got) != 1 || msgKey(got[0]) != "join" {
		t.Fatalf("join not placed with its large dependency on %s: %v", bigOn, allComputeTasks(out))
	}
	story := s.Story(k("join"))
	last := story[len(story)-1]
	if last.Worker != bigOn || last.Reason.Rule != RuleLocality || last.Reason.N1 != 1<<20 {
		t.Fatalf("join's placement %+v; want locality with the 1 MiB already on %s", last, bigOn)
	}
}

func TestGenerationBumpsAfterFifoTimeout(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("g1")})
	s.submit("c1", []GraphTask{task("g2")})
	p1, p2 := s.Task(k("g1")).priority, s.Task(k("g2")).priority
	eq(t, p1[1], p2[1], "same generation within 100 ms")
	s.clock = s.clock.Add(time5s)
	s.submit("c1", []GraphTask{task("g3")})
	if s.Task(k("g3")).priority[1] != p1[1]+1 {
		t.Fatalf("generation not bumped: %v vs %v", s.Task(k("g3")).priority, p1)
	}
	// a sub-task of a running task gets a better generation
	gt := task("sub")
	g1 := k("g1")
	out := s.handle(&UpdateGraph{Client: "c1", Keys: keys("sub"), FifoTimeout: 100 * time.Millisecond,
		SubmittingTask: &g1})
	s.handle(&GraphMaterialized{RequestID: out.Helper[0].ID, Client: "c1", Tasks: []GraphTask{gt}})
	eq(t, s.Task(k("sub")).priority[1], p1[0]-0.01, "sub-task generation")
}

// A task that existed without a priority (scattered data) gets one from
// the first graph that names it, as _set_priorities gives every task of the
// graph whose priority is None; applying the graph gives it, as each new
// task, its priority where the walk reaches it.
func TestGraphGivesExistingTaskItsPriority(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.handle(&UpdateData{Client: "c1", WhoHas: map[protocol.Key][]string{k("x"): {addr("w1")}},
		NBytes: map[protocol.Key]int64{k("x"): 8}})
	if s.Task(k("x")).hasPriority {
		t.Fatal("scattered data has a priority before any graph names it")
	}
	x, y := task("x"), task("y", "x")
	x.Order, y.Order = 7, 8
	s.submit("c1", []GraphTask{x, y}, "y")
	px, py := s.Task(k("x")), s.Task(k("y"))
	if !px.hasPriority || !py.hasPriority {
		t.Fatalf("priorities set: x %v, y %v", px.hasPriority, py.hasPriority)
	}
	eq(t, px.priority, priority{0, py.priority[1], 7}, "x's priority: the graph's generation, its own order")
	eq(t, py.priority[2], 8.0, "y's order")
}

func TestIdentity(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	id := s.Identity(-1)
	eq(t, id.Get("n_workers"), any(int64(1)), "n_workers")
	eq(t, id.Get("total_threads"), any(int64(2)), "threads")
	w := id.Get("workers").(*protocol.Map).Get(addr("w1")).(*protocol.Map)
	eqSlice(t, fieldNames(w), []string{"type", "id", "host", "resources", "local_directory", "name",
		"nthreads", "memory_limit", "last_seen", "services", "metrics", "status", "nanny"}, "worker identity")
	if _, err := protocol.Encode(id, nil); err != nil {
		t.Fatal(err)
	}
	eq(t, s.NThreads(nil, true)[addr("w1")], int64(2), "ncores")
}

func TestMemoryGuardErrsHugeInputs(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("huge")})
	s.handle(&TaskFinished{Worker: addr("w1"), Key: k("huge"), RunID: s.Task(k("huge")).runID, NBytes: 2 << 30})
	out := s.submit("c1", []GraphTask{task("sum", "huge")}, "sum")
	s.wantStatus("sum", "erred")
	te := msgsOp(out.Clients.Of("c1"), "task-erred")
	eq(t, len(te), 2, "task-erred (transition + touched-task report, as distributed)")
	if _, ok := te[0].Get("exception").([]byte); !ok {
		t.Fatal("MemoryError not a raw pickle")
	}
}

// TestGraphEpochWraps: the four-byte graph mark starts over when it would
// wrap, clearing every task's, and a graph applied across the wrap still
// finds the tasks it touches and only those.
func TestGraphEpochWraps(t *testing.T) {
	s := newTestState(t, withWorkers("a:1"))
	s.submit("c1", []GraphTask{task("x")})
	s.finish("a", "x")
	s.graphEpoch = math.MaxUint32 - 1 // the first of the graph's two marks is the last before the wrap
	s.submit("c1", []GraphTask{task("y", "x"), task("z")}, "y", "z")
	if s.graphEpoch != 1 {
		t.Fatalf("graph mark %d after the wrap, want 1", s.graphEpoch)
	}
	s.wantStatus("x", "memory")
	for _, key := range []string{"y", "z"} {
		if st := s.status(key); st != "processing" && st != "queued" {
			t.Fatalf("%s is %s after a graph applied across the wrap", key, st)
		}
	}
}
