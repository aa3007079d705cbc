package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"daskgo/protocol"
)

// The table behaves as the map it replaced under a long random mix of
// inserts, replacements, lookups and deletes, on a table small enough that
// runs wrap around its end and deletions shift entries back.
func TestTaskTableMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tt taskTable
	ref := map[protocol.Key]*TaskState{}
	check := func(step int) { checkTableMatches(t, step, &tt, ref) }
	for step := range 20000 {
		k := protocol.Key(fmt.Sprintf("k-%d", rng.IntN(300)))
		switch op := rng.IntN(10); {
		case op < 5: // insert or replace
			ts := keyedTask(k)
			tt.put(ts)
			ref[k] = ts
		case op < 8:
			if ts := ref[k]; ts != nil {
				tt.remove(ts)
				delete(ref, k)
			} else {
				tt.remove(keyedTask(k)) // not held: no change
			}
		default:
			if got := tt.get(k); got != ref[k] {
				t.Fatalf("step %d: get(%q) = %p, want %p", step, k, got, ref[k])
			}
		}
		if step%500 == 0 {
			check(step)
		}
		if step == 10000 { // emptied and refilled, as removeKey does after a big graph
			for k, ts := range ref {
				tt.remove(ts)
				delete(ref, k)
			}
			check(step)
			tt.reset()
			tt.sizeFor(10)
		}
	}
	check(-1)
	if got := tt.get("absent"); got != nil {
		t.Fatalf("get of an absent key = %p", got)
	}
}

// checkTableMatches fails the test unless tt holds exactly ref: Len, all()
// and get of every key.
func checkTableMatches(t *testing.T, step int, tt *taskTable, ref map[protocol.Key]*TaskState) {
	t.Helper()
	if tt.Len() != len(ref) {
		t.Fatalf("step %d: Len %d, map %d", step, tt.Len(), len(ref))
	}
	seen := 0
	for k, ts := range tt.all() {
		if ref[k] != ts {
			t.Fatalf("step %d: all() yields %q -> %p, map has %p", step, k, ts, ref[k])
		}
		seen++
	}
	if seen != len(ref) {
		t.Fatalf("step %d: all() yields %d tasks, map has %d", step, seen, len(ref))
	}
	for k, ts := range ref {
		if got := tt.get(k); got != ts {
			t.Fatalf("step %d: get(%q) = %p, want %p", step, k, got, ts)
		}
	}
}

// Segments (the tasks of big graphs, held through the graph's own index)
// keep the table a map: random graphs adopted over keys some of which are
// already held, replacements, deletes that empty or fold segments, and
// more segments than segmentsMax.
func TestTaskTableSegmentsMatchAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var tt taskTable
	ref := map[protocol.Key]*TaskState{}
	check := func(step int) {
		t.Helper()
		checkTableMatches(t, step, &tt, ref)
		if _, err := tt.checkSegments(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	key := func() protocol.Key { return protocol.Key(fmt.Sprintf("k-%d", rng.IntN(600))) }
	segments := 0
	for step := range 20000 {
		switch op := rng.IntN(100); {
		case op < 2: // a graph: an index over 40-100 keys, new ones adopted
			var g []GraphTask
			for range 40 + rng.IntN(60) {
				g = append(g, GraphTask{Key: key()}) // repeats: the last entry wins
			}
			idx := IndexGraph(g)
			sg := tt.adoptSegment(idx.index, len(g))
			segments++
			for i := range g {
				k := g[i].Key
				if idx.Lookup(k) == int32(i) && ref[k] == nil {
					ts := keyedTask(k)
					tt.adopt(sg, int32(i), ts)
					ref[k] = ts
				}
			}
			tt.settle(sg)
		case op < 40: // insert or replace, wherever the old one is
			k := key()
			ts := keyedTask(k)
			tt.put(ts)
			ref[k] = ts
		case op < 80:
			k := key()
			if ts := ref[k]; ts != nil {
				tt.remove(ts)
				delete(ref, k)
			} else {
				tt.remove(keyedTask(k))
			}
		default:
			if k := key(); tt.get(k) != ref[k] {
				t.Fatalf("step %d: get(%q) = %p, want %p", step, k, tt.get(k), ref[k])
			}
		}
		if step%200 == 0 {
			check(step)
		}
	}
	check(-1)
	if segments < 100 {
		t.Fatalf("only %d segments adopted; the test exercises too little", segments)
	}
	for k, ts := range ref {
		tt.remove(ts)
		delete(ref, k)
	}
	check(-2)
	if len(tt.segs) != 0 {
		t.Fatalf("%d segments left in an empty table", len(tt.segs))
	}
}

// A graph of segmentMin tasks or more is held by a segment; its tasks are
// found by key like any other, a second graph over some of its keys takes
// only its new ones, releasing most of the first folds the rest into the
// slots, and releasing everything leaves neither slots nor segments.
func TestBigGraphTasksLiveInASegment(t *testing.T) {
	s := newTestState(t, withWorkers("w1:2"), func(c *Config, _ *[]string) { c.ValidateInvariants = false })
	first := rootTasks("a", segmentMin)
	s.submit("c1", first)
	eq(t, len(s.tasks.segs), 1, "segments after a big graph")
	eq(t, s.tasks.n, 0, "tasks in the slots")
	eq(t, s.NumTasks(), segmentMin, "tasks")
	for _, i := range []int{0, segmentMin / 2, segmentMin - 1} {
		if ts := s.Task(first[i].Key); ts == nil || ts.seg == nil {
			t.Fatalf("task %d of the big graph: %v, not found in its segment", i, ts)
		}
	}

	// the second graph repeats a quarter of the first's keys: it adopts
	// only its own three quarters
	second := append(rootTasks("b", segmentMin*3/4), rootTasks("a", segmentMin/4)...)
	s.submit("c1", second)
	eq(t, len(s.tasks.segs), 2, "segments after a second big graph")
	eq(t, s.tasks.segs[1].live, segmentMin*3/4, "tasks the second segment adopted")
	eq(t, s.NumTasks(), segmentMin*7/4, "tasks")

	// releasing all but the last tenth of the first graph folds it
	var gone []string
	for _, gt := range first[:segmentMin*9/10] {
		gone = append(gone, gt.Key.String())
	}
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys(gone...)})
	eq(t, len(s.tasks.segs), 1, "segments after the fold")
	eq(t, s.NumTasks(), segmentMin*7/4-len(gone), "tasks")
	if ts := s.Task(first[segmentMin-1].Key); ts == nil || ts.seg != nil {
		t.Fatalf("a kept task of the folded graph: %v, not in the slots", ts)
	}
	if s.Task(first[0].Key) != nil {
		t.Fatal("a released task is still found")
	}
	s.validateState()

	var all []string
	for ks := range s.tasks.all() {
		all = append(all, ks.String())
	}
	s.handle(&ClientReleasesKeys{Client: "c1", Keys: keys(all...)})
	eq(t, s.NumTasks(), 0, "tasks after releasing everything")
	eq(t, len(s.tasks.segs), 0, "segments after releasing everything")
	if s.tasks.slots != nil {
		t.Fatal("the slots of an emptied table were kept")
	}
}

// keyedTask is a bare task of key k with its key hash, as makeTask makes it.
func keyedTask(k protocol.Key) *TaskState {
	return &TaskState{Key: k, keyHash: uint32(keyIndexHash(k))}
}
