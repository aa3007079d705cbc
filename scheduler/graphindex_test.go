package scheduler

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"daskgo/protocol"
)

// A slot whose tag matches but whose entry holds another key (two keys
// whose hashes share an upper half) is passed over by lookup and by a
// segment's get, and so is a segment entry whose task is gone.
func TestKeyIndexSkipsCandidatesOfOtherKeys(t *testing.T) {
	tasks := []GraphTask{{Key: "a"}, {Key: "b"}, {Key: "c"}}
	g := IndexGraph(tasks)
	// rebuild the slots so that "a"'s home holds a forged slot: a's tag,
	// entry of "b"; "a" itself one slot further on
	h := keyIndexHash("a")
	mask := len(g.index.slots) - 1
	clear(g.index.slots)
	home := int(h) & mask
	g.index.slots[home] = h&keyTagMask | 2 // entry 1 ("b") under a's tag
	g.index.slots[(home+1)&mask] = h&keyTagMask | 1
	if got := g.Lookup("a"); got != 0 {
		t.Fatalf("lookup(a) past a forged candidate = %d, want 0", got)
	}

	var tt taskTable
	sg := tt.adoptSegment(g.index, len(tasks))
	ta, tb := keyedTask("a"), keyedTask("b")
	tt.adopt(sg, 0, ta)
	tt.adopt(sg, 1, tb) // the forged slot's entry: held, but not a's
	if got := tt.get("a"); got != ta {
		t.Fatalf("get(a) = %p, want %p", got, ta)
	}
	tt.remove(tb) // the forged slot's entry now has no task to compare
	if got := tt.get("a"); got != ta {
		t.Fatalf("get(a) past an entry whose task is gone = %p, want %p", got, ta)
	}
}

// IndexGraph resolves as a map from key to its last entry would: every
// key in the graph (some repeated) and none outside it, every dependency
// (-1 outside the graph, counted as external), and the first entry that
// repeats a key; its index is at most half full.
func TestIndexGraphResolvesEveryDependency(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 7, 100, 300, 5000} {
		tasks := make([]GraphTask, n)
		ref := map[protocol.Key]int32{}
		dup := int32(-1)
		for i := range tasks {
			k := protocol.Key(fmt.Sprintf("k-%d", rng.IntN(n+n/8+1)))
			if _, seen := ref[k]; seen && dup < 0 {
				dup = int32(i)
			}
			tasks[i].Key = k
			ref[k] = int32(i)
		}
		external := 0
		for i := range tasks {
			for range rng.IntN(4) {
				d := protocol.Key(fmt.Sprintf("k-%d", rng.IntN(n+n/2+1)))
				tasks[i].Deps = append(tasks[i].Deps, d)
				if _, in := ref[d]; !in {
					external++
				}
			}
		}
		g := IndexGraph(tasks)
		if len(g.index.slots) < 2*n {
			t.Fatalf("n=%d: %d slots, more than half full", n, len(g.index.slots))
		}
		eq(t, g.Duplicate(), dup, fmt.Sprintf("n=%d: first repeated entry", n))
		eq(t, g.external, external, fmt.Sprintf("n=%d: external dependencies", n))
		for k, e := range ref {
			eq(t, g.Lookup(k), e, fmt.Sprintf("n=%d: Lookup(%s) (the last entry)", n, k))
		}
		for i := range 200 {
			k := protocol.Key(fmt.Sprintf("absent-%d", i))
			eq(t, g.Lookup(k), -1, fmt.Sprintf("n=%d: Lookup of absent key %s", n, k))
		}
		for i := range tasks {
			deps := g.Deps(i)
			eq(t, len(deps), len(tasks[i].Deps), fmt.Sprintf("n=%d: entry %d's dependencies", n, i))
			for d, j := range deps {
				want, in := ref[tasks[i].Deps[d]]
				if !in {
					want = -1
				}
				eq(t, j, want, fmt.Sprintf("n=%d: entry %d dependency %s", n, i, tasks[i].Deps[d]))
			}
		}
	}
}

// A graph applied with the GraphKeys made where it arrived gives the same
// messages and transitions as one the engine resolves itself: dependencies
// inside and outside the graph, a repeated key, a lost dependency, a graph
// big enough for a segment, and keys made for another slice (ignored).
func TestGraphAppliedAlikeWithItsKeys(t *testing.T) {
	run := func(withKeys bool) ([][]byte, []string) {
		s := newTestState(t, withWorkers("w1:2", "w2:1"), withSaturation(1.1))
		var outs []Outbox
		submit := func(tasks []GraphTask, keysFor []GraphTask, wanted ...string) {
			for i := range tasks {
				tasks[i].Order = int64(i)
			}
			if len(wanted) == 0 {
				for _, gt := range tasks {
					wanted = append(wanted, gt.Key.String())
				}
			}
			out := s.handle(updateGraph("c1", wanted...))
			gm := &GraphMaterialized{RequestID: out.Helper[0].ID, Client: "c1", Tasks: tasks}
			if withKeys {
				gm.Keys = IndexGraph(keysFor)
			}
			outs = append(outs, s.handle(gm))
		}
		xs := append(rootTasks("x", 10), task("sum", "x-0", "x-1", "x-2"))
		submit(xs, xs)
		outs = append(outs, s.finish("w1", "x-0"), s.finish("w2", "x-1"))
		ys := []GraphTask{task("y", "sum", "x-3"), task("z", "y")}
		submit(ys, ys, "z")
		lost := []GraphTask{task("lost", "nope")}
		submit(lost, lost)
		rs := []GraphTask{task("r", "x-4"), task("r2", "r"), task("r", "x-5")}
		submit(rs, rs, "r2")
		big := append(rootTasks("b", segmentMin), task("b-sum", "b-0", "b-1", "x-6"))
		submit(big, big, "b-sum")
		other := []GraphTask{task("o", "x-7")}
		submit(other, slices.Clone(other))
		var log []string
		for _, tr := range s.TransitionLog() {
			log = append(log, fmt.Sprintf("%s %s>%s %s %s %v", tr.Key, tr.From, tr.To, tr.StimulusID, tr.Worker, tr.Reason))
		}
		return encodeOutboxes(t, outs), log
	}
	encA, logA := run(false)
	encB, logB := run(true)
	eq(t, len(encB), len(encA), "messages")
	for i := range encA {
		if !bytes.Equal(encA[i], encB[i]) {
			t.Fatalf("message %d differs with the graph's keys:\n%q\n%q", i, encB[i], encA[i])
		}
	}
	eqSlice(t, logB, logA, "transition log")
	if !slices.ContainsFunc(logA, func(l string) bool { return strings.HasPrefix(l, "b-sum ") }) {
		t.Fatalf("the segment-sized graph was not applied: %v", logA[len(logA)-5:])
	}
}
