package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"daskgo/protocol"
)

// The failure paths of P2P shuffles: workers leaving before, during and
// after a run, errors in shuffle tasks, cancellation and Client.restart.
// Each test checks the messages workers get (shuffle-fail), the replies to
// waiting RPCs, and which tasks run again.

// wname turns a test worker address back into its name for finish/fail.
func wname(address string) string {
	return strings.TrimSuffix(strings.TrimPrefix(address, "tcp://"), ":8000")
}

// shuffleFails collects the shuffle-fail messages of out by worker.
func shuffleFails(out Outbox) map[string][]*protocol.Map {
	got := map[string][]*protocol.Map{}
	for _, p := range out.Workers {
		if f := msgsOp(p.Msgs, "shuffle-fail"); len(f) > 0 {
			got[p.Peer] = f
		}
	}
	return got
}

func wantShuffleFails(t *testing.T, out Outbox, runID int64, text string, workers ...string) {
	t.Helper()
	got := shuffleFails(out)
	var names []string
	for w, msgs := range got {
		names = append(names, w)
		eq(t, len(msgs), 1, "shuffle-fail messages to "+w)
		eq(t, msgs[0].Get("run_id"), any(runID), "shuffle-fail run_id")
		if msg, _ := msgs[0].Get("message").(string); !strings.Contains(msg, text) {
			t.Fatalf("shuffle-fail message %q lacks %q", msg, text)
		}
	}
	slices.Sort(names)
	want := slices.Clone(workers)
	slices.Sort(want)
	eqSlice(t, names, want, "workers told shuffle-fail")
}

// other returns a worker of ws that is not a.
func other(ws []string, a string) string {
	for _, w := range ws {
		if w != a {
			return w
		}
	}
	return ""
}

// A worker that is no participant yet leaves while the helper builds the
// run: the helper's answer names it, so the run is built again on the
// workers that are left before anyone sees it; nothing fails or restarts.
func TestShuffleWorkerLeavesWhileRunIsCreated(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1", "w3:1"))
	caller, req := requestRun(t, s, "abc", 3, 3)
	eq(t, len(req.Workers), 3, "all workers offered")
	victim := other(req.Workers, caller)

	out := s.handle(&RemoveWorker{Worker: victim, Reason: "killed"})
	noReply(t, out, 1)
	eq(t, len(shuffleFails(out)), 0, "no run to fail yet")
	eqSlice(t, s.ActiveShuffles(), []string{"abc"}, "run still being created")

	out = s.handle(runCreated(req, runSpec1))
	noReply(t, out, 1)
	eq(t, len(shuffleFails(out)), 0, "nothing handed out, nothing to fail")
	eq(t, len(out.ShuffleRuns), 1, "asked again")
	again := out.ShuffleRuns[0]
	eq(t, again.RunID, req.RunID+1, "a fresh run id")
	if slices.Contains(again.Workers, victim) {
		t.Fatalf("the departed worker is offered again: %v", again.Workers)
	}
	eq(t, len(again.Workers), 2, "the workers that are left")

	out = s.handle(runCreated(req, runSpec1)) // a duplicate late answer
	eq(t, len(out.Replies), 0, "stale run id ignored")
	out = s.handle(runCreated(again, runSpec1))
	wantRunSpec(t, replyTo(t, out, 1), runSpec1)
	out = s.handle(&ShuffleRestrictTask{ShuffleID: "abc", RunID: again.RunID, Key: k("unpack-abc-0"), Worker: caller, ReplyTo: 2})
	eq(t, replyTo(t, out, 2).(*protocol.Map).Get("status"), any("OK"), "the new run is the active one")
}

// The worker that asked for the run leaves before it exists: its RPC gets
// an error, the shuffle restarts, and the helper's late answer is stale.
func TestShuffleCallerLeavesWhileRunIsCreated(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	caller, req := requestRun(t, s, "abc", 2, 2)

	out := s.handle(&RemoveWorker{Worker: caller, Reason: "killed"})
	wantP2PError(t, replyTo(t, out, 1), "deactivated before its run was created")
	wantShuffleFails(t, out, req.RunID, "") // the only participant is gone
	eq(t, len(s.ActiveShuffles()), 0, "run deactivated")
	survivor := other([]string{addr("w1"), addr("w2")}, caller)
	for i := 0; i < 2; i++ {
		eq(t, processingOn(s, fmt.Sprintf("transfer-abc-%d", i)), survivor, "transfers restarted on the survivor")
	}
	s.wantStatus(barrierPrefix+"abc", "waiting")

	out = s.handle(runCreated(req, runSpec1))
	eq(t, len(out.Replies), 0, "late answer ignored")
	eq(t, len(s.ActiveShuffles()), 0, "late answer not activated")

	out = s.handle(&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-0"), Worker: survivor, ReplyTo: 2})
	eq(t, len(out.ShuffleRuns), 1, "run 2 requested")
	eq(t, out.ShuffleRuns[0].RunID, req.RunID+1, "run id")
	eqSlice(t, out.ShuffleRuns[0].Workers, []string{survivor}, "only the survivor")
}

// A participant leaves after the barrier, while outputs run: every output
// (also those already in memory), the barrier and the transfers run
// again; the survivors hear shuffle-fail, the departed worker nothing.
func TestShuffleWorkerLeavesDuringOutputs(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	req := startShuffle(t, s, "abc", 2, 4)
	for i := 0; i < 2; i++ {
		key := fmt.Sprintf("transfer-abc-%d", i)
		s.finish(wname(processingOn(s, key)), key)
	}
	out := s.handle(&ShuffleBarrier{ShuffleID: "abc", RunID: req.RunID, Consistent: true, ReplyTo: 2})
	if _, ok := replyTo(t, out, 2).(ShuffleBarrierPlan); !ok {
		t.Fatalf("barrier reply %v", replyTo(t, out, 2))
	}
	bw := processingOn(s, barrierPrefix+"abc")
	s.finish(wname(bw), barrierPrefix+"abc")
	victim := other([]string{addr("w1"), addr("w2")}, bw) // keeps the barrier's result alive elsewhere
	var done string
	for j := 0; j < 4 && done == ""; j++ {
		key := fmt.Sprintf("unpack-abc-%d", j)
		if processingOn(s, key) == bw {
			s.finish(wname(bw), key)
			done = key
		}
	}
	if done == "" {
		t.Fatal("no output ran on the barrier's worker")
	}
	s.wantStatus(done, "memory")

	out = s.handle(&RemoveWorker{Worker: victim, Reason: "killed"})
	wantShuffleFails(t, out, req.RunID, "left during active", bw)
	eq(t, len(s.ActiveShuffles()), 0, "run deactivated")
	s.wantStatus(done, "waiting")
	s.wantStatus(barrierPrefix+"abc", "waiting")
	for i := 0; i < 2; i++ {
		eq(t, processingOn(s, fmt.Sprintf("transfer-abc-%d", i)), bw, "transfer runs again")
	}
	for j := 0; j < 4; j++ {
		if ts := s.Task(k(fmt.Sprintf("unpack-abc-%d", j))); ts.x().shuffleSaved {
			t.Fatalf("output %d still pinned", j)
		}
	}
}

// A worker that takes no part in the run leaves: the run goes on.
func TestShuffleNonParticipantLeaves(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1", "w3:1"))
	caller, req := requestRun(t, s, "abc", 3, 3)
	bystander := other(req.Workers, caller)
	owner := other(slices.DeleteFunc(slices.Clone(req.Workers), func(w string) bool { return w == bystander }), caller)
	out := s.handle(runCreated(req, runSpec1, caller, owner))
	wantRunSpec(t, replyTo(t, out, 1), runSpec1)

	out = s.handle(&RemoveWorker{Worker: bystander, Reason: "killed"})
	eq(t, len(shuffleFails(out)), 0, "no shuffle-fail")
	eqSlice(t, s.ActiveShuffles(), []string{"abc"}, "run still active")
	for i := 0; i < 3; i++ {
		if w := processingOn(s, fmt.Sprintf("transfer-abc-%d", i)); w == bystander || w == "" {
			t.Fatalf("transfer %d on %q", i, w)
		}
	}
}

// A transfer task errs: the barrier and outputs err, the participants drop
// the run, and nothing restarts (not even when a participant leaves
// afterwards).
func TestShuffleTransferErredFailsRun(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	req := startShuffle(t, s, "abc", 2, 2)
	s.handle(&ShuffleGet{ShuffleID: "abc", Worker: addr("w2"), ReplyTo: 2})
	out := s.fail(wname(processingOn(s, "transfer-abc-0")), "transfer-abc-0")
	wantShuffleFails(t, out, req.RunID, "forgotten", addr("w1"), addr("w2"))
	eq(t, len(s.ActiveShuffles()), 0, "run deactivated")
	s.wantStatus(barrierPrefix+"abc", "erred")
	s.wantStatus("unpack-abc-0", "erred")
	if got := logText(out); !strings.Contains(got, "P2P shuffle abc failed: task transfer-abc-0 erred") {
		t.Fatalf("no p2p-failed log in %q", got)
	}

	out = s.handle(&RemoveWorker{Worker: addr("w2"), Reason: "killed"})
	eq(t, len(shuffleFails(out)), 0, "nothing active to fail")
	s.wantStatus(barrierPrefix+"abc", "erred")
	s.wantStatus("unpack-abc-1", "erred")
}

// The client lets go of a shuffle mid-way: the barrier is forgotten, the
// participants drop the run, pinned outputs are unpinned first.
func TestShuffleCancelledMidShuffle(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	req := startShuffle(t, s, "abc", 2, 2)
	s.handle(&ShuffleGet{ShuffleID: "abc", Worker: addr("w2"), ReplyTo: 2})
	out := s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys(outputKeys("abc", 2)...)})
	wantShuffleFails(t, out, req.RunID, "SchedulerShuffleState<abc[1]> forgotten", addr("w1"), addr("w2"))
	s.wantStatus(barrierPrefix+"abc", "forgotten")
	eq(t, len(s.ActiveShuffles()), 0, "run deactivated")
	eq(t, len(s.shuffles.last), 0, "history dropped with the barrier")
	out = s.handle(&ShuffleGet{ShuffleID: "abc", Worker: addr("w1"), ReplyTo: 3})
	wantP2PError(t, replyTo(t, out, 3), "No active shuffle")
}

// Client.restart drops every run and tells the participants.
func TestShuffleClientRestart(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	req := startShuffle(t, s, "abc", 2, 2)
	out := s.handle(&Restart{})
	wantShuffleFails(t, out, req.RunID, "forgotten", req.Workers...)
	eq(t, len(s.ActiveShuffles()), 0, "no active run")
	eq(t, len(s.shuffles.last), 0, "no history")
	// the next graph starts from a clean slate, with a larger run id
	s.submit("c1", p2pGraph("abc", 2, 2), outputKeys("abc", 2)...)
	w := processingOn(s, "transfer-abc-0")
	out = s.handle(&ShuffleGetOrCreate{ShuffleID: "abc", Key: k("transfer-abc-0"), Worker: w, ReplyTo: 4})
	eq(t, out.ShuffleRuns[0].RunID, req.RunID+1, "run ids never repeat (workers keep stale ids)")
}

// A finished shuffle ends by its barrier's release; a later removal of a
// worker must not restart it (its run was archived by another stimulus).
func TestShuffleFinishedNotRestartedByLaterRemoval(t *testing.T) {
	s := newTestState(t, withWorkers("w1:1", "w2:1"))
	req := startShuffle(t, s, "abc", 2, 2)
	for i := 0; i < 2; i++ {
		key := fmt.Sprintf("transfer-abc-%d", i)
		s.finish(wname(processingOn(s, key)), key)
	}
	s.handle(&ShuffleBarrier{ShuffleID: "abc", RunID: req.RunID, Consistent: true, ReplyTo: 2})
	s.finish(wname(processingOn(s, barrierPrefix+"abc")), barrierPrefix+"abc")
	var holders []string
	for j := 0; j < 2; j++ {
		key := fmt.Sprintf("unpack-abc-%d", j)
		holders = append(holders, processingOn(s, key))
		s.finish(wname(processingOn(s, key)), key)
	}
	s.wantStatus(barrierPrefix+"abc", "released")
	eq(t, len(s.ActiveShuffles()), 0, "finished")
	keep := holders[0]
	gone := other([]string{addr("w1"), addr("w2")}, keep)
	out := s.handle(&RemoveWorker{Worker: gone, Reason: "killed"})
	eq(t, len(shuffleFails(out)), 0, "no shuffle-fail")
	for j := 0; j < 2; j++ {
		if holders[j] == keep {
			s.wantStatus(fmt.Sprintf("unpack-abc-%d", j), "memory")
		}
	}
}

func logText(out Outbox) string {
	var b strings.Builder
	for _, l := range out.Logs {
		b.WriteString(l.Msg)
		b.WriteByte('\n')
	}
	return b.String()
}
