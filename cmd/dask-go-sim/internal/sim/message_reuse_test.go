package sim

import (
	"testing"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// TestReusedMessagesEncodeAsFreshOnes replays a recorded run (a 2,000-leaf
// tree on 20 simulated workers, withholding on) into two engines: one whose
// messages stay fresh, one told after every Handle that its messages are
// written (State.MessagesWritten, as the scheduler's loop tells it once its
// streams have encoded them). Every outbox must encode to the same bytes on
// both, and the second must really have built later compute-tasks and
// free-keys in objects it handed out before.
func TestReusedMessagesEncodeAsFreshOnes(t *testing.T) {
	g, stimuli, ecfg := recordReplay(t, "tree:2000", 20)
	fresh, reused := scheduler.New(ecfg), scheduler.New(ecfg)
	seen := map[*protocol.Map]bool{}
	computeTasks, again := 0, 0
	frees, freesAgain := 0, 0
	for i, st := range stimuli {
		a, b := fresh.Handle(st), reused.Handle(st)
		da, db := newOutboxDigest(), newOutboxDigest()
		da.outbox(&a)
		db.outbox(&b)
		if da.err != nil || db.err != nil {
			t.Fatalf("stimulus %d: %v / %v", i, da.err, db.err)
		}
		if x, y := da.h.Sum(nil), db.h.Sum(nil); string(x) != string(y) {
			t.Fatalf("stimulus %d (%T): the outbox with reused compute-tasks encodes differently", i, st)
		}
		for _, p := range b.Workers {
			for _, m := range p.Msgs {
				switch m.Get("op") {
				case "compute-task":
					computeTasks++
					if seen[m] {
						again++
					}
				case "free-keys":
					frees++
					if seen[m] {
						freesAgain++
					}
				default:
					continue
				}
				seen[m] = true
			}
		}
		fresh.Recycle(&a)
		reused.Recycle(&b)
		reused.MessagesWritten()
	}
	if computeTasks < len(g.Tasks) {
		t.Fatalf("%d compute-tasks for %d tasks: the run did not go through", computeTasks, len(g.Tasks))
	}
	if again < computeTasks/2 {
		t.Fatalf("only %d of %d compute-tasks were built in a reused message", again, computeTasks)
	}
	if frees == 0 || freesAgain < frees/2 {
		t.Fatalf("only %d of %d free-keys were built in a reused message", freesAgain, frees)
	}
	t.Logf("%d compute-tasks, %d in reused messages; %d free-keys, %d reused", computeTasks, again, frees, freesAgain)
}

// TestComputeTasksStayFreshUntilWritten: without MessagesWritten no
// compute-task object is handed out twice, so a caller that keeps
// messages (the simulator, transcripts) sees each one intact.
func TestComputeTasksStayFreshUntilWritten(t *testing.T) {
	_, stimuli, ecfg := recordReplay(t, "tree:500", 5)
	eng := scheduler.New(ecfg)
	seen := map[*protocol.Map]bool{}
	for _, st := range stimuli {
		out := eng.Handle(st)
		for _, p := range out.Workers {
			for _, m := range p.Msgs {
				if m.Get("op") == "compute-task" {
					if seen[m] {
						t.Fatalf("a compute-task message was handed out twice with no MessagesWritten between")
					}
					seen[m] = true
				}
			}
		}
		eng.Recycle(&out)
	}
	if len(seen) == 0 {
		t.Fatal("no compute-task sent")
	}
}
