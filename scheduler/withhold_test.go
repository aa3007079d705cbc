package scheduler

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Engine tests for WITHHOLDING.md: the slot limit, queue order, the three
// modes (off = distributed's co-assignment, withholding, withholding with
// co-assignment), and rebalancing of runs. Validate is on in every test, so
// the structural invariants are checked after every stimulus too.

type mode struct {
	name string
	sat  float64
	co   bool
}

var modes = []mode{{"off", inf, false}, {"withholding", 1.0, false}, {"coassign", 1.0, true}}

func withCoAssignment(on bool) option {
	return func(c *Config, _ *[]string) { c.RootTaskCoAssignment = on }
}

// reductionTree returns roots x-0..x-(n-1) feeding a tree reduction of
// fan-in f (groups s1, s2, ...), in post-order as dask.order numbers it:
// the roots of one reduction get consecutive priorities.
func reductionTree(prefix string, n, f int) []GraphTask {
	var out []GraphTask
	var build func(level, i int) (string, bool)
	width := func(level int) int {
		w := n
		for l := 0; l < level; l++ {
			w = (w + f - 1) / f
		}
		return w
	}
	top := 0
	for width(top) > 1 {
		top++
	}
	build = func(level, i int) (string, bool) {
		if i >= width(level) {
			return "", false
		}
		if level == 0 {
			key := fmt.Sprintf("%s-%d", prefix, i)
			out = append(out, task(key))
			return key, true
		}
		var deps []string
		for c := f * i; c < f*i+f; c++ {
			if d, ok := build(level-1, c); ok {
				deps = append(deps, d)
			}
		}
		key := fmt.Sprintf("%s%d-%d", prefix+"sum", level, i)
		out = append(out, task(key, deps...))
		return key, true
	}
	build(top, 0)
	for i := range out {
		out[i].Order = int64(i + 1)
	}
	return out
}

func rootIndex(key, prefix string) (int, bool) {
	rest, ok := strings.CutPrefix(key, prefix+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil
}

// checkSlotLimit: with withholding on, no worker runs more tasks of the
// root group (long-running ones excluded) than its slots.
func (s *tstate) checkSlotLimit(group string) {
	s.t.Helper()
	if s.queuingOff() {
		return
	}
	for _, ws := range s.workerOrder.Items() {
		n := 0
		for _, ts := range ws.processing.Items() {
			if ts.group.Name == group && !ws.longRunning.Has(ts) {
				n++
			}
		}
		if limit := max(int(math.Ceil(s.cfg.WorkerSaturation*float64(ws.NThreads))), 1); n > limit {
			s.t.Fatalf("%s runs %d root tasks, slot limit %d", ws.Address, n, limit)
		}
	}
}

// sim records which root tasks each worker was sent, in order.
type sim struct {
	*tstate
	prefix string
	sent   map[string][]int
}

func newSim(t *testing.T, m mode, prefix string, workers ...string) *sim {
	return newSimWith(t, m, prefix, workers)
}

func newSimWith(t *testing.T, m mode, prefix string, workers []string, opts ...option) *sim {
	opts = append([]option{withWorkers(workers...), withSaturation(m.sat), withCoAssignment(m.co)}, opts...)
	return &sim{tstate: newTestState(t, opts...), prefix: prefix, sent: map[string][]int{}}
}

// withPriorityRanges partitions co-assigned roots into one contiguous range
// of priorities per worker (CoFamilyDepth < 0), the design before families.
func withPriorityRanges() option {
	return func(c *Config, _ *[]string) { c.CoFamilyDepth = -1 }
}

func (sm *sim) record(out Outbox) Outbox {
	for _, w := range sm.WorkerAddresses() {
		for _, m := range msgsOp(out.Workers.Of(w), "compute-task") {
			if i, ok := rootIndex(msgKey(m), sm.prefix); ok {
				sm.sent[w] = append(sm.sent[w], i)
			}
		}
	}
	sm.checkSlotLimit(sm.prefix)
	return out
}

// step finishes one processing task of worker w (the first in its set);
// false when w has nothing processing.
func (sm *sim) step(w string) bool {
	ws := sm.Worker(addr(w))
	for _, ts := range ws.processing.Items() {
		if !ws.longRunning.Has(ts) {
			sm.record(sm.finish(w, ts.Key.String()))
			return true
		}
	}
	return false
}

// drain finishes tasks round-robin over workers until nothing runs.
func (sm *sim) drain(workers ...string) {
	for progress := true; progress; {
		progress = false
		for _, w := range workers {
			if sm.Worker(addr(w)) != nil && sm.step(w) {
				progress = true
			}
		}
	}
	if n := sm.queuedLen(); n > 0 {
		sm.t.Fatalf("%d tasks still queued with nothing processing", n)
	}
}

func TestSlotLimitAcrossEvents(t *testing.T) {
	for _, m := range modes[1:] {
		t.Run(m.name, func(t *testing.T) {
			sm := newSim(t, m, "x", "w1:2", "w2:1")
			// 16 independent sums of 4 roots, so that an erred root
			// only errs its own sum
			var g []GraphTask
			var wanted []string
			for _, gt := range reductionTree("x", 64, 4) {
				if key := gt.Key.String(); strings.HasPrefix(key, "xsum1-") || !strings.Contains(key, "sum") {
					g = append(g, gt)
					if strings.HasPrefix(key, "xsum1-") {
						wanted = append(wanted, key)
					}
				}
			}
			sm.record(sm.submit("c1", g, wanted...))
			eq(t, sm.queuedLen(), 64-3, "queued after submit (2+1 slots)")
			sm.step("w1")
			sm.step("w2")
			// erred root: its reduction errs too, the slot still frees and
			// the next queued root takes it at once
			failedOn := ""
			for _, w := range []string{"w2", "w1"} {
				if ws := sm.Worker(addr(w)); ws.processing.Len() > 0 {
					sent := len(sm.sent[addr(w)])
					sm.record(sm.fail(w, ws.processing.Items()[0].Key.String()))
					eq(t, len(sm.sent[addr(w)]), sent+1, "the erred root's slot given to the next root on "+w)
					failedOn = w
					break
				}
			}
			if failedOn == "" {
				t.Fatal("no root processing to fail")
			}
			// long-running root: its slot is free for another root
			ws := sm.Worker(addr("w1"))
			lr := ws.processing.Items()[0]
			before := ws.processing.Len()
			sm.record(sm.handle(&LongRunning{Worker: addr("w1"), Key: lr.Key, RunID: lr.runID, ComputeDuration: -1}))
			eq(t, ws.processing.Len(), before+1, "seceded task frees a slot")
			// join and leave
			sm.record(sm.addWorker("w3", 2))
			eq(t, len(sm.sent[addr("w3")]), 2, "new worker fills its 2 slots")
			sm.record(sm.handle(&RemoveWorker{Worker: addr("w2")}))
			sm.record(sm.finish("w1", lr.Key.String()))
			sm.drain("w1", "w3")
			eq(t, sm.Count(StatusErred), 2, "the erred root and its sum, nothing else")
			eq(t, sm.Count(StatusMemory), 15, "the other sums computed")
			eq(t, sm.Count(StatusProcessing), 0, "nothing left processing")
		})
	}
}

func TestAllModesComputeTheGraph(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			sm := newSim(t, m, "x", "w1:2", "w2:2", "w3:1")
			sm.record(sm.submit("c1", reductionTree("x", 200, 4), "xsum4-0"))
			sm.drain("w1", "w2", "w3")
			sm.wantStatus("xsum4-0", "memory")
			total := 0
			for _, xs := range sm.sent {
				total += len(xs)
			}
			eq(t, total, 200, "every root ran once")
		})
	}
}

// contiguousRuns counts the maximal runs of consecutive indices in xs.
func contiguousRuns(xs []int) int {
	ys := append([]int(nil), xs...)
	sort.Ints(ys)
	runs := 0
	for i, x := range ys {
		if i == 0 || x != ys[i-1]+1 {
			runs++
		}
	}
	return runs
}

func TestWithholdingOffAssignsAllAndCoAssigns(t *testing.T) {
	sm := newSim(t, modes[0], "x", "w1:2", "w2:2")
	sm.record(sm.submit("c1", reductionTree("x", 100, 4), "xsum4-0"))
	eq(t, sm.Count(StatusQueued), 0, "nothing withheld")
	eq(t, len(sm.sent[addr("w1")])+len(sm.sent[addr("w2")]), 100, "every root sent at once")
	// floor(len(group) / total_nthreads * nthreads) = 100/4*2 = 50 each
	for _, w := range []string{"w1", "w2"} {
		eq(t, len(sm.sent[addr(w)]), 50, w+" run length")
		eq(t, contiguousRuns(sm.sent[addr(w)]), 1, w+" siblings in one run")
	}
	eq(t, sm.groups["x"].lastWorker == nil, true, "last_worker cleared on the final task")
	sm.drain("w1", "w2")
	sm.wantStatus("xsum4-0", "memory")
}

func TestSpreadRootsWithoutQueueInterleaves(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2", "w2:2"), withSaturation(inf),
		func(c *Config, _ *[]string) { c.SpreadRootsWithoutQueue = true })
	sm := &sim{tstate: s, prefix: "x", sent: map[string][]int{}}
	sm.record(sm.submit("c1", reductionTree("x", 100, 4), "xsum4-0"))
	eq(t, sm.Count(StatusQueued), 0, "nothing withheld")
	eq(t, len(sm.sent[addr("w1")])+len(sm.sent[addr("w2")]), 100, "every root sent at once")
	// round-robin over idle workers: siblings alternate, no co-location
	for _, w := range []string{"w1", "w2"} {
		eq(t, len(sm.sent[addr(w)]), 50, w+" share")
		eq(t, contiguousRuns(sm.sent[addr(w)]) > 10, true, w+" siblings spread, not in one run")
	}
	sm.drain("w1", "w2")
	sm.wantStatus("xsum4-0", "memory")
}

func TestCoAssignmentRangesRunsAndPerRunOrder(t *testing.T) {
	sm := newSimWith(t, modes[2], "x", []string{"w1:2", "w2:2"}, withPriorityRanges())
	sm.record(sm.submit("c1", reductionTree("x", 100, 4), "xsum4-0"))
	eqSlice(t, sm.sent[addr("w1")], []int{0, 1}, "w1 starts its run")
	eqSlice(t, sm.sent[addr("w2")], []int{50, 51}, "w2 starts the second half")
	for i := 0; i < 40; i++ {
		sm.step("w1")
		sm.step("w2")
	}
	for _, w := range []string{"w1", "w2"} {
		xs := sm.sent[addr(w)]
		eq(t, sort.IntsAreSorted(xs), true, w+" takes its run in priority order")
		eq(t, contiguousRuns(xs), 1, w+" run contiguous")
	}
	sm.drain("w1", "w2")
	sm.wantStatus("xsum4-0", "memory")
	eq(t, contiguousRuns(sm.sent[addr("w1")]), 1, "w1 one run")
	eq(t, contiguousRuns(sm.sent[addr("w2")]), 1, "w2 one run")
	// contiguous ranges split a first-level reduction only where the two
	// ranges meet: roots 48..51 feed xsum1-12, and w2's range starts at
	// 50. Every other xsum1-j has its four roots on one worker.
	owner := map[int]string{}
	split := map[int]bool{}
	for _, w := range []string{"w1", "w2"} {
		for _, i := range sm.sent[addr(w)] {
			if o, ok := owner[i/4]; ok && o != w {
				split[i/4] = true
			}
			owner[i/4] = w
		}
	}
	if len(split) != 1 || !split[12] {
		t.Fatalf("reductions split between workers: %v; want only xsum1-12, at the ranges' boundary", split)
	}
}

func TestCoAssignmentStealsFarHalf(t *testing.T) {
	sm := newSimWith(t, modes[2], "x", []string{"w1:1", "w2:1"}, withPriorityRanges())
	sm.record(sm.submit("c1", reductionTree("x", 40, 4), "xsum3-0"))
	// w1 owns 0..19, w2 owns 20..39; only w1 makes progress
	for len(sm.sent[addr("w1")]) < 21 {
		sm.step("w1") // the 20th root finishing makes w1 steal from w2's run 21..39
	}
	eq(t, contiguousRuns(sm.sent[addr("w1")][:20]), 1, "w1 ran its own run")
	got := sm.sent[addr("w1")][20]
	eq(t, got, 30, "w1 stole the far half (30..39) of w2's remaining 21..39")
	sm.step("w2")
	eq(t, sm.sent[addr("w2")][1], 21, "w2 keeps its near half")
	sm.drain("w1", "w2")
	sm.wantStatus("xsum3-0", "memory")
}

func TestCoAssignmentJoinLeavePause(t *testing.T) {
	sm := newSim(t, modes[2], "x", "w1:1", "w2:1")
	sm.record(sm.submit("c1", reductionTree("x", 64, 4), "xsum3-0"))
	sm.record(sm.addWorker("w3", 1))
	// w3 joins dry: half of the largest run (w1's 1..31, 31 left: 16..31)
	eqSlice(t, sm.sent[addr("w3")], []int{16}, "joiner steals the far half")
	sm.record(sm.handle(&WorkerStatusChange{Worker: addr("w2"), Status: "paused"}))
	eq(t, sm.queued.Len(), 0, "a paused worker's runs are spread again")
	sm.record(sm.handle(&RemoveWorker{Worker: addr("w1")}))
	sm.record(sm.handle(&WorkerStatusChange{Worker: addr("w2"), Status: "running"}))
	sm.drain("w2", "w3")
	sm.wantStatus("xsum3-0", "memory")
}

func TestCoAssignmentSeveralGraphs(t *testing.T) {
	sm := newSim(t, modes[2], "x", "w1:1", "w2:1")
	sm.record(sm.submit("c1", reductionTree("x", 40, 4), "xsum3-0"))
	urgent := reductionTree("u", 16, 4)
	for i := range urgent {
		urgent[i] = annotated(urgent[i], "priority", int64(10))
	}
	sm.prefix, sm.sent = "u", map[string][]int{}
	sm.record(sm.submit("c1", urgent, "usum2-0"))
	sm.step("w1")
	sm.step("w2")
	a, b := sm.sent[addr("w1")], sm.sent[addr("w2")]
	if len(a) != 1 || len(b) != 1 || (a[0] != 0 && a[0] != 8) || a[0]+b[0] != 8 {
		t.Fatalf("each worker should switch to the head of its half of the urgent graph: %v %v", a, b)
	}
	for i := 0; i < 100 && sm.status("usum2-0") != "memory"; i++ {
		sm.step("w1")
		sm.step("w2")
	}
	sm.wantStatus("usum2-0", "memory")
	eq(t, sm.queuedLen() > 0, true, "the urgent graph finished while x roots were still withheld")
	eq(t, len(sm.sent[addr("w1")]), 8, "w1 ran its urgent half")
	eq(t, contiguousRuns(sm.sent[addr("w1")]), 1, "urgent run on w1 contiguous")
	eq(t, contiguousRuns(sm.sent[addr("w2")]), 1, "urgent run on w2 contiguous")
	sm.drain("w1", "w2")
	sm.wantStatus("usum2-0", "memory")
	sm.wantStatus("xsum3-0", "memory")
}

func TestConfigChangeMovesBetweenModes(t *testing.T) {
	sm := newSim(t, mode{"", 2.0, false}, "x", "w1:2", "w2:2")
	sm.record(sm.submit("c1", reductionTree("x", 100, 4), "xsum4-0"))
	eq(t, sm.queuedLen(), 100-8, "2 x 2 x 2 slots")
	sm.handle(&ConfigChange{WorkerSaturation: 1.0, RootTaskCoAssignment: true})
	eq(t, sm.queuedLen(), 100-8, "a lower limit does not cancel running tasks")
	// the roots placed under 2.0 finish without being replaced
	for _, w := range []string{"w1", "w2"} {
		ws := sm.Worker(addr(w))
		for ws.processing.Len() > 2 {
			sm.finish(w, ws.processing.Items()[0].Key.String())
		}
	}
	eq(t, sm.queuedLen(), 100-8, "no new root while over the lower limit")
	for i := 0; i < 10; i++ {
		sm.step("w1")
		sm.step("w2")
	}
	sm.record(sm.handle(&ConfigChange{WorkerSaturation: inf}))
	eq(t, sm.queuedLen(), 0, "withholding off: every queued root assigned")
	sm.drain("w1", "w2")
	sm.wantStatus("xsum4-0", "memory")
	sm.record(sm.handle(&ConfigChange{WorkerSaturation: 1.0}))
	sm.prefix = "y"
	sm.record(sm.submit("c1", reductionTree("y", 40, 4), "ysum3-0"))
	eq(t, sm.queuedLen(), 40-4, "withholding again")
	sm.drain("w1", "w2")
	sm.wantStatus("ysum3-0", "memory")
}
