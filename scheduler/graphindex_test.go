package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"daskgo/protocol"
)

// The graph's key index answers as a map from key to its last entry would,
// for keys in the graph (some repeated) and keys not in it.
func TestGraphIndexMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 100, 5000} {
		var tasks []GraphTask
		ref := map[protocol.Key]int32{}
		for i := range n {
			k := protocol.Key(fmt.Sprintf("k-%d", rng.IntN(n+n/4+1)))
			tasks = append(tasks, GraphTask{Key: k})
			ref[k] = int32(i)
		}
		g := newGraphIndex(tasks)
		if len(g.index.slots) < 2*n {
			t.Fatalf("n=%d: %d slots, more than half full", n, len(g.index.slots))
		}
		for k, e := range ref {
			if got := g.lookup(k); got != e {
				t.Fatalf("n=%d: lookup(%q) = %d, want %d (the last entry)", n, k, got, e)
			}
		}
		for i := range 200 {
			if k := protocol.Key(fmt.Sprintf("absent-%d", i)); g.lookup(k) != -1 {
				t.Fatalf("n=%d: lookup of absent key %q = %d", n, k, g.lookup(k))
			}
		}
	}
}

// A slot whose tag matches but whose entry holds another key (two keys
// whose hashes share an upper half) is passed over by lookup and by a
// segment's get, and so is a segment entry whose task is gone.
func TestKeyIndexSkipsCandidatesOfOtherKeys(t *testing.T) {
	tasks := []GraphTask{{Key: "a"}, {Key: "b"}, {Key: "c"}}
	g := newGraphIndex(tasks)
	// rebuild the slots so that "a"'s home holds a forged slot: a's tag,
	// entry of "b"; "a" itself one slot further on
	h := keyIndexHash("a")
	mask := len(g.index.slots) - 1
	clear(g.index.slots)
	home := int(h) & mask
	g.index.slots[home] = h&keyTagMask | 2 // entry 1 ("b") under a's tag
	g.index.slots[(home+1)&mask] = h&keyTagMask | 1
	if got := g.lookup("a"); got != 0 {
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
