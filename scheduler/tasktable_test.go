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
	check := func(step int) {
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
	for step := range 20000 {
		k := protocol.Key(fmt.Sprintf("k-%d", rng.IntN(300)))
		switch op := rng.IntN(10); {
		case op < 5: // insert or replace
			ts := &TaskState{Key: k}
			tt.put(ts)
			ref[k] = ts
		case op < 8:
			if ts := ref[k]; ts != nil {
				tt.remove(ts)
				delete(ref, k)
			} else {
				tt.remove(&TaskState{Key: k}) // not held: no change
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
