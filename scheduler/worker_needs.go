package scheduler

// replicaNeeds is WorkerState.needsWhat (distributed's
// WorkerState.needs_what): per dependency the worker lacks, how many of
// its processing tasks need it. A withholding worker processes a few
// tasks at a time, so it needs a few dependencies: they sit in a slice
// scanned linearly, where a Go map cost a hash probe or two at each
// assignment, completion and transfer of a task. Past needsLinear entries
// (a worker given thousands of tasks at once) a map takes over. Nothing
// iterates it, so the representation changes no decision.
type replicaNeeds struct {
	few  []replicaNeed
	many map[*TaskState]int
}

type replicaNeed struct {
	ts *TaskState
	n  int
}

const needsLinear = 16

// Len is the number of dependencies needed.
func (r *replicaNeeds) Len() int {
	if r.many != nil {
		return len(r.many)
	}
	return len(r.few)
}

// get returns how many processing tasks need ts, 0 when none.
func (r *replicaNeeds) get(ts *TaskState) int {
	if r.many != nil {
		return r.many[ts]
	}
	for _, e := range r.few {
		if e.ts == ts {
			return e.n
		}
	}
	return 0
}

// inc counts one more task needing ts and reports whether ts was not
// needed before.
func (r *replicaNeeds) inc(ts *TaskState) bool {
	if r.many != nil {
		n := r.many[ts]
		r.many[ts] = n + 1
		return n == 0
	}
	for i := range r.few {
		if r.few[i].ts == ts {
			r.few[i].n++
			return false
		}
	}
	if len(r.few) < needsLinear {
		r.few = append(r.few, replicaNeed{ts, 1})
		return true
	}
	r.many = make(map[*TaskState]int, 2*needsLinear)
	for _, e := range r.few {
		r.many[e.ts] = e.n
	}
	r.few = nil
	r.many[ts] = 1
	return true
}

// dec counts one task fewer needing ts, which must be needed, and reports
// whether ts is needed no more.
func (r *replicaNeeds) dec(ts *TaskState) bool {
	if r.many != nil {
		n := r.many[ts] - 1
		if n > 0 {
			r.many[ts] = n
			return false
		}
		delete(r.many, ts)
		return true
	}
	for i := range r.few {
		if r.few[i].ts == ts {
			if r.few[i].n--; r.few[i].n > 0 {
				return false
			}
			r.drop(i)
			return true
		}
	}
	return true
}

// remove forgets ts and reports whether it was needed.
func (r *replicaNeeds) remove(ts *TaskState) bool {
	if r.many != nil {
		_, ok := r.many[ts]
		delete(r.many, ts)
		return ok
	}
	for i := range r.few {
		if r.few[i].ts == ts {
			r.drop(i)
			return true
		}
	}
	return false
}

// drop deletes entry i (order does not matter: nothing iterates the set).
func (r *replicaNeeds) drop(i int) {
	last := len(r.few) - 1
	r.few[i] = r.few[last]
	r.few[last] = replicaNeed{}
	r.few = r.few[:last]
}
