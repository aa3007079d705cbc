package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"daskgo/protocol"
)

// A P2P graph as dask builds it: transfer tasks, one barrier named after
// the shuffle id, and output tasks that depend on the barrier only.
func p2pGraph(id string, nIn, nOut int) []GraphTask {
	var tasks, transfers []GraphTask
	for i := 0; i < nIn; i++ {
		transfers = append(transfers, task(fmt.Sprintf("transfer-%s-%d", id, i)))
	}
	barrier := GraphTask{Key: k(barrierPrefix + id), Kind: "P2PBarrierTask", RunSpec: BlobSpec{blob("barrier-" + id)}}
	for _, t := range transfers {
		barrier.Deps = append(barrier.Deps, t.Key)
	}
	tasks = append(tasks, transfers...)
	tasks = append(tasks, barrier)
	for j := 0; j < nOut; j++ {
		tasks = append(tasks, task(fmt.Sprintf("unpack-%s-%d", id, j), barrierPrefix+id))
	}
	return tasks
}

func outputKeys(id string, nOut int) []string {
	out := make([]string, nOut)
	for j := range out {
		out[j] = fmt.Sprintf("unpack-%s-%d", id, j)
	}
	return out
}

// replyTo returns the value the outbox answers RPC to with.
func replyTo(t *testing.T, out Outbox, to int64) any {
	t.Helper()
	for _, r := range out.Replies {
		if r.To == to {
			return r.Value
		}
	}
	t.Fatalf("no reply to %d in %+v", to, out.Replies)
	return nil
}

func noReply(t *testing.T, out Outbox, to int64) {
	t.Helper()
	for _, r := range out.Replies {
		if r.To == to {
			t.Fatalf("unexpected reply to %d: %v", to, r.Value)
		}
	}
}

// wantP2PError checks an error_message-style reply and its text.
func wantP2PError(t *testing.T, v any, text string) {
	t.Helper()
	m, ok := v.(*protocol.Map)
	if !ok || m.Get("status") != "error" {
		t.Fatalf("reply %s, want status error", protocol.String(v))
	}
	for _, f := range []string{"exception", "traceback", "exception_text", "traceback_text", "message"} {
		if _, ok := m.Lookup(f); !ok {
			t.Fatalf("error reply lacks %s: %s", f, protocol.String(v))
		}
	}
	if msg, _ := m.Get("message").(string); !strings.Contains(msg, text) {
		t.Fatalf("error message %q lacks %q", msg, text)
	}
	if _, err := protocol.Encode(m, nil); err != nil {
		t.Fatalf("error reply does not encode: %v", err)
	}
}

func wantRunSpec(t *testing.T, v any, spec *protocol.Blob) {
	t.Helper()
	m, ok := v.(*protocol.Map)
	if !ok || m.Get("status") != "OK" || m.Get("run_spec") != spec {
		t.Fatalf("reply %s, want OK with the run_spec", protocol.String(v))
	}
}

func processingOn(s *tstate, key string) string {
	if ts := s.Task(k(key)); ts != nil && ts.processingOn != nil {
		return ts.processingOn.Address
	}
	return ""
}

// runCreated answers the helper request as the helper would: every output
// partition on the request's first worker unless given.
func runCreated(req ShuffleRunRequest, spec *protocol.Blob, workers ...string) *ShuffleRunCreated {
	if len(workers) == 0 {
		workers = req.Workers
	}
	var pairs []any
	for i, w := range workers {
		pairs = append(pairs, []any{int64(i), w})
	}
	return &ShuffleRunCreated{ShuffleID: req.ShuffleID, RunID: req.RunID, RunSpec: spec, WorkerFor: pairs, Workers: workers}
}

var runSpec1 = &protocol.Blob{Pickled: true, Header: []byte{0x80}, Frames: [][]byte{[]byte("run-spec")}}

// requestRun submits a P2P graph and asks for its run through the first
// transfer task (ReplyTo 1); it returns that task's worker and the helper
// request, not yet answered.
func requestRun(t *testing.T, s *tstate, id string, nIn, nOut int) (caller string, req ShuffleRunRequest) {
	t.Helper()
	s.submit("c1", p2pGraph(id, nIn, nOut), outputKeys(id, nOut)...)
	first := fmt.Sprintf("transfer-%s-0", id)
	caller = processingOn(s, first)
	out := s.handle(&ShuffleGetOrCreate{ShuffleID: id, Key: k(first), Worker: caller, ReplyTo: 1})
	noReply(t, out, 1)
	eq(t, len(out.ShuffleRuns), 1, "helper requests")
	return caller, out.ShuffleRuns[0]
}

// startShuffle is requestRun with the helper's answer: the run is active.
func startShuffle(t *testing.T, s *tstate, id string, nIn, nOut int) ShuffleRunRequest {
	t.Helper()
	_, req := requestRun(t, s, id, nIn, nOut)
	out := s.handle(runCreated(req, runSpec1))
	wantRunSpec(t, replyTo(t, out, 1), runSpec1)
	return req
}

func TestShuffleHappyPath(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2", "w2:2"))
	s.submit("c1", p2pGraph("abc", 4, 12), outputKeys("abc", 12)...)
	for i := 0; i < 4; i++ {
		s.wantStatus(fmt.Sprintf("transfer-abc-%d", i), "processing")
	}
	t0 := processingOn(s, "transfer-abc-0")
	out := s.handle(&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-0"), Worker: t0, ReplyTo: 1})
	noReply(t, out, 1)
	eq(t, len(out.ShuffleRuns), 1, "one helper request")
	req := out.ShuffleRuns[0]
	eq(t, req.RunID, int64(1), "run id")
	eq(t, req.Barrier, s.Task(k(barrierPrefix+"abc")).runSpec.Payload(), "barrier blob relayed")
	eqSlice(t, req.Workers, []string{addr("w1"), addr("w2")}, "workers, not rotated the first time")
	for j := 0; j < 12; j++ {
		if !s.Task(k(fmt.Sprintf("unpack-abc-%d", j))).notQueueable {
			t.Fatalf("output %d still queueable", j)
		}
	}

	// requests while the helper works wait for the run, not a second one
	other := addr("w2")
	out = s.handle(&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-1"), Worker: other, ReplyTo: 2})
	noReply(t, out, 2)
	eq(t, len(out.ShuffleRuns), 0, "no second request")
	out = s.handle(&ShuffleGet{ShuffleID: "abc", Worker: other, ReplyTo: 3})
	noReply(t, out, 3)

	out = s.handle(runCreated(req, runSpec1, addr("w1"), addr("w2")))
	for _, to := range []int64{1, 2, 3} {
		wantRunSpec(t, replyTo(t, out, to), runSpec1)
	}
	out = s.handle(&ShuffleGet{ShuffleID: "abc", Worker: other, ReplyTo: 4})
	wantRunSpec(t, replyTo(t, out, 4), runSpec1)

	for i := 0; i < 4; i++ {
		key := fmt.Sprintf("transfer-abc-%d", i)
		s.finish(strings.TrimSuffix(strings.TrimPrefix(processingOn(s, key), "tcp://"), ":8000"), key)
	}
	s.wantStatus(barrierPrefix+"abc", "processing")
	out = s.handle(&ShuffleBarrier{ShuffleID: "abc", RunID: 1, Consistent: true, ReplyTo: 5})
	plan, ok := replyTo(t, out, 5).(ShuffleBarrierPlan)
	if !ok {
		t.Fatalf("barrier reply %v, want a plan", replyTo(t, out, 5))
	}
	slices.Sort(plan.Participants)
	eqSlice(t, plan.Participants, []string{addr("w1"), addr("w2")}, "participants")

	bw := strings.TrimSuffix(strings.TrimPrefix(processingOn(s, barrierPrefix+"abc"), "tcp://"), ":8000")
	s.finish(bw, barrierPrefix+"abc")
	// 12 root-ish outputs on 4 threads would queue 7; non-queueable ones don't
	eq(t, s.Count(StatusQueued), 0, "queued outputs")
	eq(t, s.Count(StatusProcessing), 12, "processing outputs")

	// an output on the wrong worker is pinned and rescheduled
	o := "unpack-abc-0"
	wrong := processingOn(s, o)
	right := addr("w1")
	if wrong == right {
		right = addr("w2")
	}
	out = s.handle(&ShuffleRestrictTask{ShuffleID: "abc", RunID: 1, Key: k(o), Worker: right, ReplyTo: 6})
	eq(t, replyTo(t, out, 6).(*protocol.Map).Get("status"), any("OK"), "restrict reply")
	eqSlice(t, s.Task(k(o)).x().workerRestrictions, []string{right}, "pinned")
	s.handle(&Reschedule{Worker: wrong, Key: k(o)})
	eq(t, processingOn(s, o), right, "rescheduled to its worker")

	// stale and future run ids are refused
	out = s.handle(&ShuffleRestrictTask{ShuffleID: "abc", RunID: 0, Key: k(o), Worker: right, ReplyTo: 7})
	wantP2PError(t, replyTo(t, out, 7), "Request stale")
	out = s.handle(&ShuffleRestrictTask{ShuffleID: "abc", RunID: 2, Key: k(o), Worker: right, ReplyTo: 8})
	wantP2PError(t, replyTo(t, out, 8), "Request invalid")

	// the last output done releases the barrier: the run ends everywhere
	var fails []*protocol.Map
	for j := 0; j < 12; j++ {
		key := fmt.Sprintf("unpack-abc-%d", j)
		w := strings.TrimSuffix(strings.TrimPrefix(processingOn(s, key), "tcp://"), ":8000")
		out = s.finish(w, key)
		for _, p := range out.Workers {
			fails = append(fails, msgsOp(p.Msgs, "shuffle-fail")...)
		}
	}
	eq(t, len(fails), 2, "shuffle-fail to both participants")
	eqSlice(t, fieldNames(fails[0]), []string{"op", "shuffle_id", "run_id", "message"}, "shuffle-fail fields")
	eq(t, fails[0].Get("message"), any("SchedulerShuffleState<abc[1]> forgotten"), "message")
	s.wantStatus(barrierPrefix+"abc", "released")
	eq(t, len(s.ActiveShuffles()), 0, "active shuffles")
	eq(t, len(s.Task(k(o)).x().workerRestrictions), 0, "restriction restored")
}

func TestShuffleWorkerLeavesRestarts(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2", "w2:2", "w3:2"))
	req := startShuffle(t, s, "abc", 6, 6)
	s.handle(&ShuffleGet{ShuffleID: "abc", Worker: addr("w3"), ReplyTo: 9})
	// two transfers done on the survivors
	var done []string
	for i := 0; i < 6 && len(done) < 2; i++ {
		key := fmt.Sprintf("transfer-abc-%d", i)
		if w := processingOn(s, key); w != addr("w3") {
			s.finish(strings.TrimSuffix(strings.TrimPrefix(w, "tcp://"), ":8000"), key)
			done = append(done, key)
		}
	}
	out := s.handle(&RemoveWorker{Worker: addr("w3"), Reason: "killed"})
	for _, w := range []string{"w1", "w2"} {
		f := msgsOp(out.Workers.Of(addr(w)), "shuffle-fail")
		eq(t, len(f), 1, "shuffle-fail to "+w)
		if msg := f[0].Get("message").(string); !strings.Contains(msg, "Worker "+addr("w3")+" left during active") {
			t.Fatalf("shuffle-fail message %q", msg)
		}
	}
	eq(t, len(out.Workers.Of(addr("w3"))), 0, "nothing to the removed worker")
	eq(t, len(s.ActiveShuffles()), 0, "run deactivated")
	// everything runs again: transfers (also the finished ones), barrier waits
	for i := 0; i < 6; i++ {
		s.wantStatus(fmt.Sprintf("transfer-abc-%d", i), "processing")
	}
	s.wantStatus(barrierPrefix+"abc", "waiting")
	// the next transfer creates run 2 on the workers that are left
	w := processingOn(s, "transfer-abc-0")
	out = s.handle(&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-0"), Worker: w, ReplyTo: 10})
	eq(t, len(out.ShuffleRuns), 1, "new run requested")
	eq(t, out.ShuffleRuns[0].RunID, req.RunID+1, "new run id")
	got := slices.Clone(out.ShuffleRuns[0].Workers)
	slices.Sort(got)
	eqSlice(t, got, []string{addr("w1"), addr("w2")}, "workers of run 2")
	// a restrict for the old run is stale now
	out = s.handle(&ShuffleRestrictTask{ShuffleID: "abc", RunID: 1, Key: k("unpack-abc-0"), Worker: addr("w1"), ReplyTo: 11})
	wantP2PError(t, replyTo(t, out, 11), "Request stale")
}

func TestShuffleInconsistentBarrierRestarts(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2", "w2:2"))
	startShuffle(t, s, "abc", 2, 2)
	for i := 0; i < 2; i++ {
		key := fmt.Sprintf("transfer-abc-%d", i)
		s.finish(strings.TrimSuffix(strings.TrimPrefix(processingOn(s, key), "tcp://"), ":8000"), key)
	}
	s.wantStatus(barrierPrefix+"abc", "processing")
	out := s.handle(&ShuffleBarrier{ShuffleID: "abc", RunID: 1, Consistent: false, ReplyTo: 3})
	eq(t, replyTo(t, out, 3), any(nil), "inconsistent barrier reply")
	eq(t, len(s.ActiveShuffles()), 0, "run deactivated")
	s.wantStatus("transfer-abc-0", "processing")
	s.wantStatus(barrierPrefix+"abc", "waiting")
	// a barrier for a run that is gone is an error for the worker to raise
	out = s.handle(&ShuffleBarrier{ShuffleID: "abc", RunID: 1, Consistent: true, ReplyTo: 4})
	if _, ok := replyTo(t, out, 4).(error); !ok {
		t.Fatalf("barrier of a dead run: %v, want an error", replyTo(t, out, 4))
	}
}

func TestShuffleBadRequests(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	s.submit("c1", append(p2pGraph("abc", 2, 2), task("plain")), append(outputKeys("abc", 2), "plain")...)
	w := processingOn(s, "transfer-abc-0")
	cases := []struct {
		st   Stimulus
		to   int64
		want string
	}{
		{&ShuffleGet{ShuffleID: "nope", Worker: w, ReplyTo: 1}, 1, `No active shuffle with id="nope"`},
		{&ShuffleGetOrCreate{ShuffleID: "nope", Key: k("transfer-abc-0"), Worker: w, ReplyTo: 2}, 2, "does not exist"},
		{&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("unpack-abc-0"), Worker: w, ReplyTo: 3}, 3, "to be processing, is waiting"},
		{&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("nokey"), Worker: w, ReplyTo: 4}, 4, "is forgotten"},
		{&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-0"), Worker: "tcp://ghost:1", ReplyTo: 5}, 5, "unaware of this worker"},
		{&ShuffleRestrictTask{ShuffleID: "nope", RunID: 1, Key: k("plain"), Worker: w, ReplyTo: 6}, 6, "No active shuffle"},
	}
	for _, c := range cases {
		wantP2PError(t, replyTo(t, s.handle(c.st), c.to), c.want)
	}
	// a barrier key that is not a P2P barrier
	s.submit("c1", []GraphTask{task(barrierPrefix + "fake")})
	out := s.handle(&ShuffleGetOrCreate{ShuffleID: "fake", Key: k("transfer-abc-0"), Worker: w, ReplyTo: 7})
	wantP2PError(t, replyTo(t, out, 7), "not a P2PBarrierTask")
	out = s.handle(&ShuffleBarrier{ShuffleID: "nope", RunID: 1, Consistent: true, ReplyTo: 8})
	if _, ok := replyTo(t, out, 8).(error); !ok {
		t.Fatal("barrier of an unknown shuffle must be an error")
	}
	eq(t, len(s.ActiveShuffles()), 0, "nothing created by bad requests")

	// the helper fails: every waiter gets its exception, nothing stays active
	out = s.handle(&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-0"), Worker: w, ReplyTo: 9})
	req := out.ShuffleRuns[0]
	out = s.handle(&ShuffleRunCreated{ShuffleID: "abc", RunID: req.RunID, Err: &ErrorInfo{
		Exception: []byte("pickled TypeError"), ExceptionText: "TypeError('malformed spec')"}})
	reply := replyTo(t, out, 9).(*protocol.Map)
	eq(t, reply.Get("status"), any("error"), "status")
	eq(t, string(reply.Get("exception").([]byte)), "pickled TypeError", "exception relayed")
	eq(t, len(s.ActiveShuffles()), 0, "failed run dropped")
	// a late answer for a run that is gone is ignored
	out = s.handle(runCreated(req, runSpec1))
	eq(t, len(out.Replies), 0, "no replies for a stale run")
	eq(t, len(s.ActiveShuffles()), 0, "stale run not activated")
}

func TestShuffleBarrierReleasedWhileCreating(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	_, req := requestRun(t, s, "abc", 2, 2)
	out := s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys(outputKeys("abc", 2)...)})
	wantP2PError(t, replyTo(t, out, 1), "deactivated before its run was created")
	s.wantStatus(barrierPrefix+"abc", "forgotten")
	out = s.handle(runCreated(req, runSpec1))
	eq(t, len(out.Replies), 0, "late helper answer ignored")
	eq(t, len(s.shuffles.last), 0, "forgotten barrier drops the shuffle's history")
}

// Two shuffles feeding the same outputs (a hash join) must place shared
// partitions alike: the second run waits for the first and gets its
// mapping as Existing.
func TestShuffleHashJoinAlignment(t *testing.T) {
	s := newTestState(t, withWorkers("w1:4", "w2:4"))
	var tasks []GraphTask
	for _, id := range []string{"left", "right"} {
		tasks = append(tasks, task("transfer-"+id+"-0"))
		tasks = append(tasks, GraphTask{Key: k(barrierPrefix + id), Kind: "P2PBarrierTask",
			RunSpec: BlobSpec{blob(id)}, Deps: keys("transfer-" + id + "-0")})
	}
	tasks = append(tasks, task("merge-0", barrierPrefix+"left", barrierPrefix+"right"))
	s.submit("c1", tasks, "merge-0")
	wl, wr := processingOn(s, "transfer-left-0"), processingOn(s, "transfer-right-0")
	out := s.handle(&ShuffleGetOrCreate{ShuffleID: "left", Key: k("transfer-left-0"), Worker: wl, ReplyTo: 1})
	eq(t, len(out.ShuffleRuns), 1, "left requested")
	left := out.ShuffleRuns[0]
	out = s.handle(&ShuffleGetOrCreate{ShuffleID: "right", Key: k("transfer-right-0"), Worker: wr, ReplyTo: 2})
	eq(t, len(out.ShuffleRuns), 0, "right waits for left's mapping")
	created := runCreated(left, runSpec1, addr("w2"))
	out = s.handle(created)
	wantRunSpec(t, replyTo(t, out, 1), runSpec1)
	eq(t, len(out.ShuffleRuns), 1, "right requested once left exists")
	right := out.ShuffleRuns[0]
	eq(t, protocol.String(right.Existing), protocol.String(created.WorkerFor), "left's mapping passed on")
	eq(t, right.Workers[0], addr("w2"), "the worker list rotates per run")
}

func TestShuffleRestrictionRestoresOriginal(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	graph := p2pGraph("abc", 1, 1)
	graph[2] = annotated(graph[2], "workers", []any{addr("w1"), addr("w2")})
	s.submit("c1", graph, "unpack-abc-0")
	startShuffleRun := func() {
		w := processingOn(s, "transfer-abc-0")
		out := s.handle(&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-0"), Worker: w, ReplyTo: 1})
		s.handle(runCreated(out.ShuffleRuns[0], runSpec1))
	}
	startShuffleRun()
	o := s.Task(k("unpack-abc-0"))
	s.handle(&ShuffleRestrictTask{ShuffleID: "abc", RunID: 1, Key: o.Key, Worker: addr("w2"), ReplyTo: 2})
	eqSlice(t, o.x().workerRestrictions, []string{addr("w2")}, "pinned")
	// a second pin (the other side of a join) keeps the first
	s.handle(&ShuffleRestrictTask{ShuffleID: "abc", RunID: 1, Key: o.Key, Worker: addr("w1"), ReplyTo: 3})
	eqSlice(t, o.x().workerRestrictions, []string{addr("w2")}, "first pin kept")
	s.handle(&RemoveWorker{Worker: addr("w2")})
	eqSlice(t, o.x().workerRestrictions, []string{addr("w1"), addr("w2")}, "original restrictions back")
}

func TestShuffleIDFromKey(t *testing.T) {
	long := strings.Repeat("f", 300)
	tuple, err := protocol.KeyOf([]any{barrierPrefix + "abc", int64(0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  protocol.Key
		id   string
		isID bool
	}{
		{k(barrierPrefix + "abc"), "abc", true},
		{k(barrierPrefix + long), long, true}, // a str16 key
		{k(barrierPrefix), "", false},
		{k("shuffle-transfer-abc"), "", false},
		{tuple, "", false}, // only str keys name a barrier
	} {
		id, ok := shuffleIDFromKey(c.key)
		if id != c.id || ok != c.isID {
			t.Errorf("shuffleIDFromKey(%.40s) = %q, %v", c.key.String(), id, ok)
		}
	}
}
