package scheduler

import (
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
