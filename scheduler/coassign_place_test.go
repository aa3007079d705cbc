package scheduler

import "testing"

// consumerPlacement runs roots "big" (20 MB) on w1 and "small" (8 bytes) on
// w2, keeps w1 busy with a root of a known prefix (0.5 s expected), and
// returns where the task taking big and small is sent.
func consumerPlacement(t *testing.T, m mode) string {
	sm := newSimWith(t, m, "x", []string{"w1:1", "w2:1"})
	sm.record(sm.submit("c1", []GraphTask{
		annotated(task("big"), "workers", []any{addr("w1")}),
		annotated(task("small"), "workers", []any{addr("w2")}),
		annotated(task("busy-0"), "workers", []any{addr("w1")}),
		annotated(task("busy-1"), "workers", []any{addr("w1")}),
	}))
	done := func(w, key string, nbytes int64) {
		ts := sm.Task(k(key))
		sm.record(sm.handle(&TaskFinished{Worker: addr(w), Key: k(key), RunID: ts.runID, NBytes: nbytes,
			Type: []byte("pickled-int"), TypeName: "int",
			StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 1.5}}}))
	}
	done("w1", "busy-0", 8) // the busy prefix now takes 0.5 s
	done("w1", "big", 20e6)
	done("w2", "small", 8)
	out := sm.submit("c1", []GraphTask{task("c", "big", "small")}, "c")
	for _, w := range []string{"w1", "w2"} {
		for _, msg := range msgsOp(out.Workers.Of(addr(w)), "compute-task") {
			if msgKey(msg) == "c" {
				return w
			}
		}
	}
	t.Fatalf("c was not sent to a worker")
	return ""
}

func TestCoAssignmentWeighsTransfersWhenPlacingConsumers(t *testing.T) {
	// distributed's objective: w1 starts c after 0.5 s of busy-1, w2 after
	// fetching 20 MB (0.2 s at 100 MB/s): w2, and big moves. Co-assignment
	// counts the transfer 10 times (2 s): c runs where big is.
	eq(t, consumerPlacement(t, mode{"withholding", 1.0, false}), "w2", "without co-assignment")
	eq(t, consumerPlacement(t, mode{"coassign", 1.0, true}), "w1", "with co-assignment")
}
