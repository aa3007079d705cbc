package scheduler

import "testing"

// TestTaskSetMatchesOset drives three sets of one role (so tasks overflow
// from their slot into idx) and one roleNone set with random adds and
// removes, checking membership and order against oset and the index
// invariants after every step.
func TestTaskSetMatchesOset(t *testing.T) {
	s := New(Config{ValidateInvariants: true})
	tasks := make([]*TaskState, 40)
	for i := range tasks {
		tasks[i] = &TaskState{Key: k("t"), recIdx: -1}
	}
	sets := []*taskSet{{role: roleHasWhat}, {role: roleHasWhat}, {role: roleHasWhat}, {}}
	refs := make([]oset[*TaskState], len(sets))
	next := xorshift(7)
	for step := 0; step < 10000; step++ {
		j := next(len(sets))
		ts := tasks[next(len(tasks))]
		switch next(5) {
		case 0, 1:
			eq(t, sets[j].Add(ts), refs[j].Add(ts), "add")
		case 2, 3:
			eq(t, sets[j].Remove(ts), refs[j].Remove(ts), "remove")
		default:
			if next(50) == 0 {
				sets[j].Clear()
				refs[j].Clear()
			}
		}
		for n, set := range sets {
			eqSlice(t, set.Items(), refs[n].Items(), "items")
			set.validate(s, "set")
		}
		for _, x := range tasks {
			set, pos := x.slotSet[roleHasWhat-1], x.slotPos[roleHasWhat-1]
			if set != nil && set.items[pos] != x {
				t.Fatalf("step %d: stale slot", step)
			}
			for n, set := range sets {
				eq(t, set.Has(x), refs[n].Has(x), "has")
			}
		}
	}
}
