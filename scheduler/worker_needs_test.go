package scheduler

import "testing"

// TestReplicaNeedsMatchesMap drives replicaNeeds and a map with the same
// random increments, decrements and removals over enough tasks to pass
// needsLinear, comparing every count and report.
func TestReplicaNeedsMatchesMap(t *testing.T) {
	tasks := make([]*TaskState, 3*needsLinear)
	for i := range tasks {
		tasks[i] = &TaskState{}
	}
	var r replicaNeeds
	ref := map[*TaskState]int{}
	next := xorshift(11)
	for step := 0; step < 20000; step++ {
		ts := tasks[next(len(tasks))]
		switch next(3) {
		case 0:
			eq(t, r.inc(ts), ref[ts] == 0, "inc reports new")
			ref[ts]++
		case 1:
			if ref[ts] > 0 {
				ref[ts]--
				gone := ref[ts] == 0
				if gone {
					delete(ref, ts)
				}
				eq(t, r.dec(ts), gone, "dec reports gone")
			}
		default:
			_, had := ref[ts]
			delete(ref, ts)
			eq(t, r.remove(ts), had, "remove reports held")
		}
		eq(t, r.Len(), len(ref), "len")
		for _, x := range tasks {
			eq(t, r.get(x), ref[x], "count")
		}
	}
	if r.many == nil {
		t.Error("the set never passed needsLinear entries")
	}
}
