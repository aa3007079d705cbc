package scheduler

import (
	"strings"
	"testing"

	"daskgo/protocol"
)

func TestSubmitComputeFinishKeyInMemory(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	out := s.submit("c1", []GraphTask{task("inc-1")})
	ct := computeTasksTo(out, "w1")
	eq(t, len(ct), 1, "compute-tasks to w1")
	eq(t, msgKey(ct[0]), "inc-1", "key")
	s.wantStatus("inc-1", "processing")

	out = s.finish("w1", "inc-1")
	s.wantStatus("inc-1", "memory")
	msgs := out.Clients.Of("c1")
	eq(t, len(msgs), 1, "client messages")
	eqSlice(t, fieldNames(msgs[0]), []string{"op", "key", "type"}, "key-in-memory fields")
	eq(t, string(msgs[0].Get("type").([]byte)), "pickled-int", "type forwarded")
	eqSlice(t, s.WhoHas(keys("inc-1"))[k("inc-1")], []string{addr("w1")}, "who_has")
	// the prefix learned a duration from startstops
	eq(t, s.Task(k("inc-1")).prefix.durationAverage, 0.5, "duration estimate")
}

func TestComputeTaskExactFields(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a")})
	s.finish("w1", "a")
	out := s.submit("c1", []GraphTask{annotated(task("b", "a"), "retries", int64(2))}, "b")
	ct := computeTasksTo(out, "w1")
	eq(t, len(ct), 1, "compute-tasks")
	m := ct[0]
	eqSlice(t, fieldNames(m), []string{"op", "key", "run_id", "priority", "stimulus_id", "who_has",
		"nbytes", "run_spec", "resource_restrictions", "actor", "annotations", "span_id"}, "compute-task fields")
	prio := m.Get("priority").([]any)
	eq(t, len(prio), 3, "priority length")
	for _, p := range prio {
		if _, ok := p.(int64); !ok {
			t.Fatalf("priority element %v (%T) not an int", p, p)
		}
	}
	eq(t, m.Get("run_id").(int64), s.Task(k("b")).runID, "run_id")
	wh, _ := m.Get("who_has").(*protocol.KeyList[[]string]).Get(k("a"))
	eqSlice(t, wh, []string{addr("w1")}, "who_has")
	nb, _ := m.Get("nbytes").(*protocol.KeyList[int64]).Get(k("a"))
	eq(t, nb, int64(8), "nbytes")
	eq(t, m.Get("run_spec").(*protocol.Blob), s.Task(k("b")).runSpec.Payload(), "run_spec is the blob")
	eq(t, m.Get("resource_restrictions"), any(nil), "resource_restrictions")
	eq(t, m.Get("actor"), any(false), "actor")
	eq(t, m.Get("annotations").(*protocol.Map).Get("retries"), any(int64(2)), "annotations relayed")
	if _, err := protocol.Encode(m, nil); err != nil {
		t.Fatalf("compute-task does not encode: %v", err)
	}
	// a root task's maps are empty but present and encodable
	root := computeTasksTo(s.submit("c1", []GraphTask{task("c")}), "w1")
	if len(root) != 1 {
		t.Fatalf("the root task c gave %d compute-tasks to w1, want 1", len(root))
	}
	for _, f := range []string{"who_has", "nbytes"} {
		if root[0].Get(f) == nil {
			t.Fatalf("root compute-task lacks %s (it must be an empty dict)", f)
		}
	}
	if _, err := protocol.Encode(root[0], nil); err != nil {
		t.Fatalf("root compute-task does not encode: %v", err)
	}
}

func TestRunIDIsNewForEverySend(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("x")})
	first := s.Task(k("x")).runID
	s.handle(&Reschedule{Worker: addr("w1"), Key: k("x")})
	s.wantStatus("x", "processing")
	if s.Task(k("x")).runID == first {
		t.Fatal("re-sent compute-task reused its run_id")
	}
}

func TestDependencyChainSendsWhoHas(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	out := s.submit("c1", []GraphTask{task("a"), task("b", "a"), task("c", "b")}, "c")
	eq(t, countCompute(out), 1, "only the root is runnable")
	s.wantStatus("b", "waiting")
	holder := "w1"
	if len(computeTasksTo(out, "w2")) == 1 {
		holder = "w2"
	}
	out = s.finish(holder, "a")
	ct := computeTasksTo(out, holder)
	eq(t, len(ct), 1, "b goes where a is")
	wh, _ := ct[0].Get("who_has").(*protocol.KeyList[[]string]).Get(k("a"))
	eqSlice(t, wh, []string{addr(holder)}, "b who_has")
	out = s.finish(holder, "b")
	// a is no longer needed: released (kept as a task while b exists)
	s.wantStatus("a", "released")
	eqSlice(t, keyStrings(msgsOp(out.Workers.Of(addr(holder)), "free-keys")[0].Get("keys")), []string{"a"}, "free-keys a")
	s.finish(holder, "c")
	s.wantStatus("c", "memory")
	s.wantStatus("b", "released")
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("c")})
	for _, key := range []string{"a", "b", "c"} {
		s.wantStatus(key, "forgotten")
	}
	eq(t, s.NumTasks(), 0, "tasks left")
}

func TestReleaseFreesEveryHolderIncludingAddKeys(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", []GraphTask{task("x")})
	holder, other := "w1", "w2"
	if s.Task(k("x")).processingOn.Address == addr("w2") {
		holder, other = "w2", "w1"
	}
	s.finish(holder, "x")
	out := s.handle(&AddKeys{Worker: addr(other), Keys: keys("x", "unknown")})
	rr := msgsOp(out.Workers.Of(addr(other)), "remove-replicas")
	eq(t, len(rr), 1, "remove-replicas for the unknown key")
	eqSlice(t, keyStrings(rr[0].Get("keys")), []string{"unknown"}, "remove-replicas keys")
	eqSlice(t, fieldNames(rr[0]), []string{"op", "keys", "stimulus_id"}, "remove-replicas fields")
	eq(t, len(s.WhoHas(keys("x"))[k("x")]), 2, "replicas tracked")

	out = s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("x")})
	s.wantStatus("x", "forgotten")
	for _, w := range []string{"w1", "w2"} {
		fk := msgsOp(out.Workers.Of(addr(w)), "free-keys")
		eq(t, len(fk), 1, "free-keys to "+w)
		eqSlice(t, fieldNames(fk[0]), []string{"op", "keys", "stimulus_id"}, "free-keys fields")
	}
}

func TestErrorReachesClientAndDependents(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a"), task("b", "a"), task("c", "b")}, "c", "a")
	out := s.fail("w1", "a")
	s.wantStatus("a", "erred")
	s.wantStatus("b", "erred")
	s.wantStatus("c", "erred")
	te := msgsOp(out.Clients.Of("c1"), "task-erred")
	got := map[string]bool{}
	for _, m := range te {
		eqSlice(t, fieldNames(m), []string{"op", "key", "exception", "traceback"}, "task-erred fields")
		eq(t, string(m.Get("exception").([]byte)), "exc", "exception relayed")
		got[msgKey(m)] = true
	}
	if !got["a"] || !got["c"] || got["b"] {
		t.Fatalf("task-erred went to keys %v, want a and c", got)
	}
	eq(t, s.Task(k("c")).blame().Key, k("a"), "blame")
}

func TestRetriesAnnotationRerunsSilently(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{annotated(task("flaky"), "retries", int64(1))})
	out := s.fail("w1", "flaky")
	eq(t, len(out.Clients.Of("c1")), 0, "no client message on a retried failure")
	eq(t, len(computeTasksTo(out, "w1")), 1, "re-sent")
	s.wantStatus("flaky", "processing")
	out = s.fail("w1", "flaky")
	s.wantStatus("flaky", "erred")
	eq(t, len(msgsOp(out.Clients.Of("c1"), "task-erred")), 1, "second failure reported")
}

func TestRetryRPC(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a"), task("b", "a")}, "b")
	s.fail("w1", "a")
	s.wantStatus("b", "erred")
	out := s.handle(&Retry{Client: "c1", Keys: keys("b"), ReplyTo: 7})
	eq(t, len(out.Replies), 1, "reply")
	eq(t, out.Replies[0].To, int64(7), "reply id")
	got := keyStrings(out.Replies[0].Value)
	if len(got) != 2 {
		t.Fatalf("retry replied %v, want b and a", got)
	}
	s.wantStatus("a", "processing")
	s.wantStatus("b", "waiting")
	tr := msgsOp(out.Clients.Of("c1"), "task-retried")
	eq(t, len(tr), 1, "task-retried for the wanted key")
	eq(t, msgKey(tr[0]), "b", "retried key")
	eqSlice(t, fieldNames(tr[0]), []string{"op", "key"}, "task-retried fields")
	s.finish("w1", "a")
	s.finish("w1", "b")
	s.wantStatus("b", "memory")
}

// A Retry acts and answers in the same outbox: the keys named, erred
// dependencies first walked, and the erred root sent back to a worker.
func TestRetryActsAndAnswersTheKeysNamed(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("a"), task("b", "a")}, "b")
	s.fail("w1", "a")
	out := s.handle(&Retry{Client: "c1", Keys: keys("b"), ReplyTo: 7})
	eq(t, len(out.Replies), 1, "replies")
	eqSlice(t, keyStrings(out.Replies[0].Value), []string{"b", "a"}, "keys named")
	s.wantStatus("a", "processing")
	s.wantStatus("b", "waiting")
}

// Every Replier is answered exactly once: a stimulus whose handler sends
// no reply of its own (UpdateData, as Scheduler.update_data returns None)
// gets None; one without a reply slot (ReplyTo 0) gets nothing; a parked
// call is answered only by the stimulus that settles it.
func TestEveryReplierIsAnsweredOnce(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	out := s.handle(&UpdateData{Client: "c1", WhoHas: map[protocol.Key][]string{k("x"): {addr("w1")}},
		NBytes: map[protocol.Key]int64{k("x"): 8}, ReplyTo: 3})
	eq(t, len(out.Replies), 1, "replies to an UpdateData")
	eq(t, out.Replies[0], Reply{To: 3, Value: nil}, "the reply")
	out = s.handle(&UpdateData{Client: "c1", WhoHas: map[protocol.Key][]string{k("y"): {addr("w1")}},
		NBytes: map[protocol.Key]int64{k("y"): 8}})
	eq(t, len(out.Replies), 0, "replies without a reply slot")
	out = s.handle(&ShuffleGet{ShuffleID: "nope", Worker: addr("w1"), ReplyTo: 4})
	eq(t, len(out.Replies), 1, "replies to a shuffle_get of an unknown shuffle")
	if out.Replies[0].Value == nil {
		t.Fatal("a shuffle_get of an unknown shuffle was answered None, not its error")
	}
}

func TestFireAndForgetReleasesWhenDone(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.submit("c1", []GraphTask{task("ff")})
	s.handle(&ClientDesiresKeys{Client: fireAndForget, Keys: keys("ff")})
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("ff")})
	s.wantStatus("ff", "processing")
	s.finish("w1", "ff")
	s.wantStatus("ff", "forgotten")
}

func TestTransitionLogIsBounded(t *testing.T) {
	s := New(Config{ValidateInvariants: true, TransitionLogSize: 4})
	s.Handle(&AddWorker{Address: addr("w1"), Name: "w1", NThreads: 1, Status: "running"})
	s.Handle(&AddClient{Client: "c1"})
	out := s.Handle(updateGraph("c1", "a", "b", "c"))
	s.Handle(&GraphMaterialized{RequestID: out.Helper[0].ID, Client: "c1",
		Tasks: []GraphTask{task("a"), task("b"), task("c")}})
	log := s.TransitionLog()
	eq(t, len(log), 4, "log length")
	// the newest four are kept, oldest first: c's released -> waiting ->
	// processing is the last thing that happened
	last := log[len(log)-1]
	if last.Key != k("c") || last.To != StatusProcessing {
		t.Fatalf("the log's last entry is %s -> %s of %s; want c reaching processing (the newest kept)", last.From, last.To, last.Key)
	}
	for i := 1; i < len(log); i++ {
		if log[i].At.Before(log[i-1].At) {
			t.Fatalf("log not oldest first at %d", i)
		}
	}
	for _, e := range log {
		if e.Key == k("a") && e.From == StatusReleased && e.To == StatusWaiting {
			t.Fatal("a's first transition, the oldest, is still in a log of 4: the oldest entries were kept")
		}
	}
}

// TestTransitionCascadeCap: a stimulus that causes more transitions than
// Config.TransitionCounterMax fails with the story of the task it was on
// (the guard against a recommendation cycle hanging the engine; the cap
// is set low here so that an ordinary graph crosses it).
func TestTransitionCascadeCap(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"), func(c *Config, _ *[]string) { c.TransitionCounterMax = 10 })
	defer func() {
		r := recover()
		msg, _ := r.(string)
		if !strings.Contains(msg, "caused more than 10 transitions") || !strings.Contains(msg, "story of") {
			t.Fatalf("recovered %v; want the cap's panic with a story", r)
		}
	}()
	s.submit("c1", rootTasks("x", 20))
	t.Fatal("20 tasks released -> waiting -> processing in one stimulus passed a cap of 10")
}

// TestReleasingABigGraphStaysUnderTheCap: the default cap counts the most
// tasks held during the stimulus, not those left: releasing a graph that
// is still running forgets its tasks as the cascade goes: 65,535 tasks,
// one transition each, which a cap of 16 * (tasks left + 1024) stops near
// the end (invariant checks off: they are O(tasks) per stimulus).
func TestReleasingABigGraphStaysUnderTheCap(t *testing.T) {
	s := newTestState(t, withWorkers("w1:4"), withSaturation(inf), func(c *Config, _ *[]string) { c.ValidateInvariants = false })
	g := append(rootTasks("x", 32768), treeTasks("sum", "x", 32768, 2)...)
	s.submit("c1", g, "sum-15-0")
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys("sum-15-0")})
	eq(t, s.NumTasks(), 0, "tasks left after the release")
	eq(t, s.transitions, 65535, "transitions of the release")
}
