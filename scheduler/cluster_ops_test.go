package scheduler

import (
	"testing"

	"daskgo/protocol"
)

// Engine tests for the cluster ops beyond computing a graph: the task
// stream, the event log, plugins, and the replica plans behind replicate, rebalance and
// retire_workers.

// Nothing is recorded until the plugin exists (the first get_task_stream or
// get_task_stream_index), as in distributed without a dashboard.
func TestTaskStreamRecordsOnlyOnceStarted(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	s.submit("c1", []GraphTask{task("a"), task("b")})
	s.finish("w1", "a")
	eq(t, s.TaskStreamIndex(), 0, "index before the plugin exists")
	s.handle(&StartTaskStream{})
	s.finish("w1", "b")
	eq(t, s.TaskStreamIndex(), 1, "index once started")
	eq(t, s.TaskStream(TaskStreamQuery{})[0].Get("key").(protocol.Key).String(), "b", "the record")
}

func TestTaskStreamRecordsFinishedAndErredRuns(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"))
	s.handle(&StartTaskStream{})
	s.submit("c1", []GraphTask{task("a"), task("b")})
	s.finish("w1", "a")
	s.fail("w1", "b") // fail() sends no startstops: not recorded, as the plugin asserts them
	eq(t, s.TaskStreamIndex(), 1, "index")
	recs := s.TaskStream(TaskStreamQuery{})
	eq(t, len(recs), 1, "records")
	r := recs[0]
	eq(t, r.Get("key").(protocol.Key).String(), "a", "key")
	eq(t, r.Get("worker").(string), addr("w1"), "worker")
	eq(t, r.Get("status").(string), "OK", "status")
	ss := r.Get("startstops").([]any)[0].(*protocol.Map)
	eq(t, ss.Get("action").(string), "compute", "action")
	eq(t, ss.Get("start").(float64), 1.0, "start")
	eq(t, ss.Get("stop").(float64), 1.5, "stop")
}

func TestTaskStreamErredAndQueries(t *testing.T) {
	s := newTestState(t, withWorkers("w1:4"))
	s.handle(&StartTaskStream{})
	s.submit("c1", []GraphTask{task("a"), task("b"), task("c"), task("d")})
	for i, key := range []string{"a", "b", "c"} {
		ts := s.Task(k(key))
		s.handle(&TaskFinished{Worker: addr("w1"), Key: k(key), RunID: ts.runID, NBytes: 8, TypeName: "int",
			StartStops: []StartStop{{Action: "compute", Start: float64(10 * i), Stop: float64(10*i + 5)}}})
	}
	ts := s.Task(k("d"))
	s.handle(&TaskErred{Worker: addr("w1"), Key: k("d"), RunID: ts.runID, ExceptionText: "ValueError()",
		StartStops: []StartStop{{Action: "compute", Start: 30, Stop: 31}}})
	eq(t, s.TaskStreamIndex(), 4, "index")
	last := s.TaskStream(TaskStreamQuery{Count: ptr(1)})
	eq(t, last[0].Get("status").(string), "error", "erred record status")
	eq(t, last[0].Get("exception_text").(string), "ValueError()", "exception text")
	eq(t, len(s.TaskStream(TaskStreamQuery{StartIndex: ptr(2)})), 2, "records from cursor 2")
	eq(t, len(s.TaskStream(TaskStreamQuery{Start: ptr(14.0)})), 3, "records stopping at or after 14")
	eq(t, len(s.TaskStream(TaskStreamQuery{Start: ptr(0.0), Count: ptr(2)})), 2, "start+count")
}

func TestTaskStreamIsBounded(t *testing.T) {
	s := newTestState(t, withWorkers("w1:8"), func(c *Config, _ *[]string) { c.TaskStreamLength = 3 })
	s.handle(&StartTaskStream{})
	s.submit("c1", rootTasks("x", 5))
	for i := 0; i < 5; i++ {
		key := protocol.StrKey("x-" + itoa(i))
		if ts := s.Task(key); ts != nil && ts.state == StatusProcessing {
			s.handle(&TaskFinished{Worker: addr("w1"), Key: key, RunID: ts.runID, NBytes: 8,
				StartStops: []StartStop{{Action: "compute", Start: float64(i), Stop: float64(i)}}})
		}
	}
	recs := s.TaskStream(TaskStreamQuery{})
	eq(t, len(recs), 3, "kept records (maxlen)")
	eq(t, s.TaskStreamIndex(), 5, "index counts every append")
	eq(t, len(s.TaskStream(TaskStreamQuery{StartIndex: ptr(0)})), 3, "cursor before the ring clamps")
	eq(t, len(s.TaskStream(TaskStreamQuery{StartIndex: ptr(4)})), 1, "cursor in the ring")
}

func TestEventLogSubscribersAndBound(t *testing.T) {
	s := newTestState(t, func(c *Config, _ *[]string) { c.EventLogLength = 2 })
	s.handle(&AddClient{Client: "c2"})
	s.handle(&SubscribeTopic{Topic: "t", Client: "c2"})
	out := s.handle(&LogEvent{Topics: []string{"t", "u"}, Msg: "hello"})
	ev := msgsOp(out.Clients.Of("c2"), "event")
	eq(t, len(ev), 1, "events to the subscriber")
	eq(t, ev[0].Get("topic").(string), "t", "topic")
	eq(t, ev[0].Get("event").([]any)[1].(string), "hello", "payload")
	eq(t, len(out.Clients.Of("c1")), 0, "no event to a non-subscriber")
	s.handle(&LogEvent{Topics: []string{"t"}, Msg: "two"})
	s.handle(&LogEvent{Topics: []string{"t"}, Msg: "three"})
	evs := s.Events("t")
	eq(t, len(evs), 2, "deque bounded by low-level-log-length")
	eq(t, evs[0].([]any)[1].(string), "two", "oldest kept")
	eq(t, s.AllEvents().Len(), 2, "topics with events")
	s.handle(&UnsubscribeTopic{Topic: "t", Client: "c2"})
	out = s.handle(&LogEvent{Topics: []string{"t"}, Msg: "four"})
	eq(t, len(out.Clients.Of("c2")), 0, "no event after unsubscribe")
	eq(t, len(s.Events("nope")), 0, "unknown topic")
}

func TestWorkerLogEventAddsWorker(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1"))
	s.handle(&LogEvent{Topics: []string{"mine"}, Msg: protocol.NewMap("x", int64(1)), Worker: addr("w1")})
	m := s.Events("mine")[0].([]any)[1].(*protocol.Map)
	eq(t, m.Get("worker").(string), addr("w1"), "worker added to dict msg")
	s.handle(&LogEvent{Topics: []string{addr("w1")}, Msg: protocol.NewMap("x", int64(1)), Worker: addr("w1")})
	m = s.Events(addr("w1"))[0].([]any)[1].(*protocol.Map)
	eq(t, m.Get("worker"), any(nil), "topic == worker: msg untouched")
}

func TestPluginsStoredInOrder(t *testing.T) {
	s := newTestState(t)
	s.handle(&RegisterPlugin{Kind: WorkerPlugin, Name: "b", Pickle: []byte("pb")})
	s.handle(&RegisterPlugin{Kind: WorkerPlugin, Name: "a", Pickle: []byte("pa")})
	s.handle(&RegisterPlugin{Kind: NannyPlugin, Name: "n", Pickle: []byte("pn")})
	eq(t, s.Plugins(WorkerPlugin).Len(), 2, "worker plugins")
	eq(t, s.Plugins(WorkerPlugin).Entries[0].Key.(string), "b", "registration order")
	eq(t, s.HasPlugin(NannyPlugin, "n"), true, "nanny plugin")
	eq(t, s.HasPlugin(WorkerPlugin, "n"), false, "kinds are separate")
	s.handle(&UnregisterPlugin{Kind: WorkerPlugin, Name: "b"})
	eq(t, s.Plugins(WorkerPlugin).Len(), 1, "after unregister")
}

// scattered puts key on the named workers with nbytes.
func (s *tstate) scattered(key string, nbytes int64, workers ...string) {
	who := make([]string, len(workers))
	for i, w := range workers {
		who[i] = addr(w)
	}
	s.handle(&UpdateData{Client: "c1", WhoHas: map[protocol.Key][]string{k(key): who},
		NBytes: map[protocol.Key]int64{k(key): nbytes}})
}

func TestRetirePlanMovesUniqueKeysToLeastLoaded(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1", "w3:1"))
	s.scattered("big", 100, "w2")
	s.scattered("u1", 10, "w1")
	s.scattered("u2", 10, "w1")
	s.scattered("shared", 10, "w1", "w3")
	p := s.PlanRetire([]string{addr("w1")})
	eq(t, p.Unique, 2, "unique keys (shared has a copy elsewhere)")
	eq(t, p.NoRecipients, false, "recipients exist")
	eq(t, len(p.Acquire[addr("w3")]), 2, "both go to w3 (10+10+10 < 100)")
	eqSlice(t, p.Acquire[addr("w3")][k("u1")], []string{addr("w1")}, "fetch from the retiring worker")
	msgs := s.AcquireReplicasMsgs(p.Acquire, "retire-1")
	eq(t, msgs[addr("w3")].Get("op").(string), "acquire-replicas", "op")
	eq(t, msgs[addr("w3")].Get("nbytes").(map[protocol.Key]int64)[k("u1")], int64(10), "nbytes")

	s.handle(&AddKeys{Worker: addr("w3"), Keys: keys("u1", "u2")})
	eq(t, s.PlanRetire([]string{addr("w1")}).Done(), true, "done once replicated")
}

func TestRetirePlanNoRecipients(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.scattered("a", 10, "w1")
	s.scattered("b", 10, "w2")
	p := s.PlanRetire([]string{addr("w1"), addr("w2")})
	eq(t, p.NoRecipients, true, "every worker retiring")
	eq(t, p.Unique, 2, "unique keys")
	s.handle(&WorkerStatusChange{Worker: addr("w2"), Status: "closing_gracefully"})
	p = s.PlanRetire([]string{addr("w1")})
	eq(t, p.NoRecipients, true, "a closing_gracefully worker is no recipient")
}

func TestReplicatePlan(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1", "w3:1", "w4:1"))
	s.scattered("a", 10, "w1")
	p, err := s.PlanReplicate(keys("a"), 4, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, who := range p.Gather {
		n += len(who)
	}
	eq(t, n, 2, "branching 2 x 1 holder copies in round one")
	eq(t, p.Done, false, "not done")
	for w := range p.Gather {
		s.handle(&AddKeys{Worker: w, Keys: keys("a")})
	}
	p, _ = s.PlanReplicate(keys("a"), 4, nil, 2)
	eq(t, len(p.Gather), 1, "the last copy")
	p, _ = s.PlanReplicate(keys("a"), 1, nil, 2)
	eq(t, len(p.Delete), 2, "n=1 deletes the extra replicas")
	_, err = s.PlanReplicate(keys("zzz"), 2, nil, 2)
	if err == nil {
		t.Fatal("unknown key must fail")
	}
}

func TestRebalancePlanEvensManagedMemory(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	for i := 0; i < 10; i++ {
		s.scattered("x-"+itoa(i), 100, "w1")
	}
	moves, err := s.PlanRebalance(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, len(moves), 5, "half the bytes move")
	for _, m := range moves {
		eq(t, m.From, addr("w1"), "from the full worker")
		eq(t, m.To, addr("w2"), "to the empty one")
	}
	moves, _ = s.PlanRebalance(keys("x-0"), nil)
	eq(t, len(moves), 1, "only the keys asked for")
}

func ptr[T any](v T) *T { return &v }

func itoa(i int) string { return protocol.String(int64(i)) }
