package scheduler

import (
	"fmt"
	"sort"
	"testing"
)

// farPairs returns roots x-0..x-(2n-1) in priority order where combine y-i
// takes x-i and x-(i+n): inputs n priorities apart, as anom-mean's
// time-axis combines are; one final task takes every y.
func farPairs(n int) []GraphTask {
	var out []GraphTask
	for i := 0; i < 2*n; i++ {
		out = append(out, task(fmt.Sprintf("x-%d", i)))
	}
	var ys []string
	for i := 0; i < n; i++ {
		y := fmt.Sprintf("y-%d", i)
		out = append(out, task(y, fmt.Sprintf("x-%d", i), fmt.Sprintf("x-%d", i+n)))
		ys = append(ys, y)
	}
	out = append(out, task("total", ys...))
	for i := range out {
		out[i].Order = int64(i + 1)
	}
	return out
}

// ownerOf maps each root index to the worker it was sent to or whose run
// holds it.
func (sm *sim) ownerOf() map[int]string {
	owner := map[int]string{}
	for w, sent := range sm.sent {
		for _, i := range sent {
			owner[i] = w
		}
	}
	for _, ws := range sm.workerOrder.Items() {
		if ws.coRuns == nil {
			continue
		}
		for _, r := range ws.coRuns.items {
			for _, ts := range r.block.tasks[r.lo:r.hi] {
				if ts == nil {
					continue
				}
				if i, ok := rootIndex(ts.Key.String(), sm.prefix); ok {
					owner[i] = ws.Address
				}
			}
		}
	}
	return owner
}

func TestCoFamiliesPutFarApartInputsOnOneWorker(t *testing.T) {
	const n = 32
	sm := newSim(t, modes[2], "x", "w1:1", "w2:1")
	sm.record(sm.submit("c1", farPairs(n), "total"))
	owner := sm.ownerOf()
	eq(t, len(owner), 2*n, "every root owned or sent")
	for i := 0; i < n; i++ {
		if owner[i] != owner[i+n] {
			t.Fatalf("y-%d's inputs x-%d and x-%d went to %s and %s", i, i, i+n, owner[i], owner[i+n])
		}
	}
	sm.drain("w1", "w2")
	sm.wantStatus("total", "memory")
	// each worker walked both halves of the priority range, in priority order
	for _, w := range []string{"w1", "w2"} {
		xs := sm.sent[addr(w)]
		eq(t, len(xs), n, w+" share")
		eq(t, sort.IntsAreSorted(xs), true, w+" in priority order")
		eq(t, xs[0] < n && xs[len(xs)-1] >= n, true, w+" covers both halves")
	}
}

func TestCoPriorityRangesSplitFarApartInputs(t *testing.T) {
	// the contrast that makes the test above meaningful: contiguous ranges
	// give x-0..x-31 to one worker and x-32..x-63 to the other
	const n = 32
	sm := newSimWith(t, modes[2], "x", []string{"w1:1", "w2:1"}, withPriorityRanges())
	sm.record(sm.submit("c1", farPairs(n), "total"))
	owner := sm.ownerOf()
	split := 0
	for i := 0; i < n; i++ {
		if owner[i] != owner[i+n] {
			split++
		}
	}
	eq(t, split, n, "every combine's inputs on two workers")
}

func TestCoFamiliesKeepReductionSubtreesWhole(t *testing.T) {
	// 64 roots in a fan-in-4 tree on 2 workers: each worker's share (32) is
	// two whole level-2 subtrees of 16, so no level-1 or level-2 reduction
	// needs a root from the other worker.
	sm := newSim(t, modes[2], "x", "w1:1", "w2:1")
	sm.record(sm.submit("c1", reductionTree("x", 64, 4), "xsum3-0"))
	owner := sm.ownerOf()
	for sub := 0; sub < 4; sub++ {
		for i := sub * 16; i < sub*16+16; i++ {
			if owner[i] != owner[sub*16] {
				t.Fatalf("subtree %d split: x-%d on %s, x-%d on %s", sub, i, owner[i], sub*16, owner[sub*16])
			}
		}
	}
	sm.drain("w1", "w2")
	sm.wantStatus("xsum3-0", "memory")
}

func TestCoDealSharesFollowThreads(t *testing.T) {
	// w2 has three times w1's threads: it owns three times as many roots,
	// however the families fall
	sm := newSim(t, modes[2], "x", "w1:1", "w2:3")
	sm.record(sm.submit("c1", reductionTree("x", 128, 4), "xsum4-0"))
	count := map[string]int{}
	for _, w := range sm.ownerOf() {
		count[w]++
	}
	eq(t, count[addr("w1")], 32, "w1's share: 128 × 1/4")
	eq(t, count[addr("w2")], 96, "w2's share: 128 × 3/4")
	sm.drain("w1", "w2")
	sm.wantStatus("xsum4-0", "memory")
}
