package scheduler

import (
	"fmt"
	"slices"
	"testing"
)

func TestCoPaceGivesAnUnstartedFamilyToAWorkerAhead(t *testing.T) {
	// 128 roots in a binary tree on 4 workers: families of 16 (depth 4),
	// dealt round-robin, so the slow worker owns families 0 and 4 and the
	// owner of family 1 owns family 5 (roots 80..95). The slow worker never
	// finishes its first root. Once the owner of family 1 is done with it,
	// its next own root (80) is more than the window (4 × 16) ahead of the
	// front (root 1): it takes family 4, whole, before its own family 5.
	sm := newSim(t, modes[2], "x", "w1:1", "w2:1", "w3:1", "w4:1")
	sm.record(sm.submit("c1", reductionTree("x", 128, 2), "xsum7-0"))
	owner := sm.ownerOf()
	slow, fast := owner[0], owner[16]
	eq(t, owner[64], slow, "family 4's owner at the deal")
	eq(t, owner[80], fast, "family 5's owner at the deal")
	var others []string
	for _, w := range []string{"w1", "w2", "w3", "w4"} {
		if addr(w) != slow {
			others = append(others, w)
		}
	}
	for progress := true; progress; {
		progress = false
		for _, w := range others {
			progress = sm.step(w) || progress
		}
	}
	sent := sm.sent[fast]
	at64, at80 := slices.Index(sent, 64), slices.Index(sent, 80)
	if at64 < 0 || at80 < 0 || at64 > at80 {
		t.Fatalf("%s ran root 64 at %d and root 80 at %d: want family 4 first\nsent %v", fast, at64, at80, sent)
	}
	for i := 64; i < 80; i++ {
		if !slices.Contains(sent, i) {
			t.Fatalf("family 4 split: root %d not run by %s", i, fast)
		}
	}
	eq(t, len(sm.sent[slow]), 1, "roots sent to the slow worker")
	sm.drain("w1", "w2", "w3", "w4")
	sm.wantStatus("xsum7-0", "memory")
}

// pairsGraph is the transcript coassign_paced_memory's graph: 24 roots,
// p-i takes x-i and x-(i+12), q takes every p. Its two families of 12
// roots go one to each of two workers, each worker's early roots waiting
// in memory for its later ones.
func pairsGraph() []GraphTask {
	tasks := rootTasks("x", 24)
	var ps []string
	for i := 0; i < 12; i++ {
		p := fmt.Sprintf("p-%d", i)
		tasks = append(tasks, task(p, fmt.Sprintf("x-%d", i), fmt.Sprintf("x-%d", i+12)))
		ps = append(ps, p)
	}
	return append(tasks, task("q", ps...))
}

// finishSized is task-finished for key on its worker with nbytes.
func (s *tstate) finishSized(key string, nbytes int64) Outbox {
	s.t.Helper()
	ts := s.Task(k(key))
	return s.handle(&TaskFinished{Worker: ts.processingOn.Address, Key: k(key), RunID: ts.runID, NBytes: nbytes,
		Type: []byte("pickled-int"), TypeName: "int", StartStops: []StartStop{{Action: "compute", Start: 1, Stop: 1.5}}})
}

func TestCoPaceByMemoryTakesTheFrontOnlyWithAMemoryLimit(t *testing.T) {
	// w1 is stuck on x-0 while w2 runs x-6..x-10 (6 MB each, waiting for
	// x-18..x-22): 15 MB more than its share, above the bound of 12 MB
	// (two rounds of its slot). With a memory limit it takes the front,
	// x-1; without one, nothing bounds it and it goes on with x-11.
	for _, limit := range []int64{1 << 30, 0} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			s := newTestState(t, withSaturation(1.0), withCoAssignment(true))
			for _, w := range []string{"w1", "w2"} {
				s.addWorker(w, 1, func(aw *AddWorker) { aw.MemoryLimit = limit })
			}
			s.submit("c1", pairsGraph())
			var out Outbox
			for i := 6; i <= 10; i++ {
				out = s.finishSized(fmt.Sprintf("x-%d", i), 6_000_000)
			}
			sent := computeTasksTo(out, "w2")
			if len(sent) != 1 {
				t.Fatalf("w2 was sent %d tasks, want 1", len(sent))
			}
			want := "x-1"
			if limit == 0 {
				want = "x-11"
			}
			eq(t, msgKey(sent[0]), want, "w2's next root")
			if limit > 0 {
				story := s.Story(k("x-1"))
				eq(t, story[len(story)-1].Reason.Rule, RuleCoPacedMemory, "x-1's placement rule")
			}
		})
	}
}
