package scheduler

import "testing"

// TestTaskSetMatchesOset drives three has_what sets (so tasks take the
// spare slot, then overflow into idx), a wants_what set competing for that
// spare slot, the replicated set and one roleNone set with random adds and
// removes, checking membership and order against oset and the index
// invariants after every step.
func TestTaskSetMatchesOset(t *testing.T) {
	s := New(Config{ValidateInvariants: true})
	tasks := make([]*TaskState, 40)
	for i := range tasks {
		tasks[i] = &TaskState{Key: k("t"), recIdx: -1}
	}
	sets := []*taskSet{{role: roleHasWhat}, {role: roleHasWhat}, {role: roleHasWhat},
		{role: roleWantsWhat}, {role: roleReplicated}, {}}
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
			for r, set := range x.slotSet {
				if pos := x.slotPos[r]; set != nil && set.items[pos] != x {
					t.Fatalf("step %d: stale slot %d", step, r)
				}
			}
			for n, set := range sets {
				eq(t, set.Has(x), refs[n].Has(x), "has")
			}
		}
	}
}
