package scheduler

// taskSet is oset for the sets of tasks that grow big: a worker's
// has_what and processing, a client's wants_what, the replicated tasks.
// Each task keeps, per
// role, a slot holding its position in one set of that role, so the
// common case (one holder, one wanting client, one worker processing it)
// adds, finds and swap-removes with no hashing. An oset's index map cost
// three hash operations per removal and one per insertion, on maps of 100k
// entries: a quarter of the engine's CPU in BenchmarkSubmitFinish. A task
// whose slot is taken (a second replica, a second client) is indexed in
// idx instead. Iteration order is oset's: insertion order with swap-remove.
//
// Invariant: ts is a member iff its slot names the set or idx holds it
// (never both), and either way gives its position in items.
type taskSet struct {
	items []*TaskState
	idx   map[*TaskState]int32
	role  setRole
}

// setRole picks a task's slot; roleNone sets index like oset.
type setRole uint8

const (
	roleNone setRole = iota
	roleHasWhat
	roleWantsWhat
	roleProcessing
	roleStealable // one level of a worker's stealable tasks (steal.go)
	numRoles
	// roleReplicated is State.replicated's: the tasks in memory on more
	// than one worker, a set as big as a graph's intermediate results. It
	// shares roleProcessing's slot, which a task in memory leaves free (a
	// processing task is in memory nowhere); a task that ever needed both
	// would be indexed in idx, as any task whose slot is taken.
	roleReplicated = numRoles
)

// slot is the index in TaskState.slotSet and slotPos of r's slot.
func (r setRole) slot() int {
	if r == roleReplicated {
		return int(roleProcessing) - 1
	}
	return int(r) - 1
}

// spareSlot is a second slot a has_what may use, roleWantsWhat's: a
// task's second replica (each transfer of a dependency makes one) is
// then found without hashing as its first is, and a client wanting
// the task finds its slot taken only while the task has two holders
// (it then indexes it in idx, which is correct whoever holds the slot).
const spareSlot = int(roleWantsWhat) - 1

// slotOf returns the slot of ts that names s, or -1: ts's position in s
// is then TaskState.slotPos of that slot. A task's slot is split into two
// arrays (set pointers, positions) so that it packs into 12 bytes a role
// instead of a padded 16, keeping TaskState small (oset.go).
func (s *taskSet) slotOf(ts *TaskState) int {
	if s.role == roleNone {
		return -1
	}
	if j := s.role.slot(); ts.slotSet[j] == s {
		return j
	}
	if s.role == roleHasWhat && ts.slotSet[spareSlot] == s {
		return spareSlot
	}
	return -1
}

// owns reports whether a slot of ts names s.
func (s *taskSet) owns(ts *TaskState) bool { return s.slotOf(ts) >= 0 }

func (s *taskSet) Len() int { return len(s.items) }

// Items is the backing slice: read-only, and invalid after a mutation.
func (s *taskSet) Items() []*TaskState { return s.items }

func (s *taskSet) find(ts *TaskState) int {
	if j := s.slotOf(ts); j >= 0 {
		return int(ts.slotPos[j])
	}
	if s.idx != nil {
		if i, ok := s.idx[ts]; ok {
			return int(i)
		}
		return -1
	}
	if s.role != roleNone {
		return -1 // no overflow members
	}
	for i, x := range s.items {
		if x == ts {
			return i
		}
	}
	return -1
}

func (s *taskSet) Has(ts *TaskState) bool { return s.find(ts) >= 0 }

// Add inserts ts and reports whether it was new.
func (s *taskSet) Add(ts *TaskState) bool {
	if s.find(ts) >= 0 {
		return false
	}
	s.addNew(ts)
	return true
}

// addNew appends ts, which the caller knows is absent.
func (s *taskSet) addNew(ts *TaskState) {
	i := int32(len(s.items))
	s.items = appendDoubling(s.items, ts)
	if s.role != roleNone {
		j := s.role.slot()
		if ts.slotSet[j] != nil && s.role == roleHasWhat {
			j = spareSlot
		}
		if ts.slotSet[j] == nil {
			ts.slotSet[j], ts.slotPos[j] = s, i
			return
		}
	}
	switch {
	case s.idx != nil:
		s.idx[ts] = i
	case s.role != roleNone:
		s.idx = map[*TaskState]int32{ts: i}
	case len(s.items) > osetLinear:
		s.idx = make(map[*TaskState]int32, 2*len(s.items))
		for j, x := range s.items {
			s.idx[x] = int32(j)
		}
	}
}

// setPos records that member x now sits at i.
func (s *taskSet) setPos(x *TaskState, i int) {
	if j := s.slotOf(x); j >= 0 {
		x.slotPos[j] = int32(i)
	} else if s.idx != nil {
		s.idx[x] = int32(i)
	}
}

// unindex forgets member x's position.
func (s *taskSet) unindex(x *TaskState) {
	if j := s.slotOf(x); j >= 0 {
		x.slotSet[j], x.slotPos[j] = nil, 0
	} else if s.idx != nil {
		delete(s.idx, x)
	}
}

// Remove deletes ts (moving the last item into its place) and reports
// whether it was present.
func (s *taskSet) Remove(ts *TaskState) bool {
	i := s.find(ts)
	if i < 0 {
		return false
	}
	last := len(s.items) - 1
	if i != last {
		moved := s.items[last]
		s.items[i] = moved
		s.setPos(moved, i)
	}
	s.items[last] = nil
	s.items = s.items[:last]
	s.unindex(ts)
	return true
}

// Clear empties the set, releasing its memory.
func (s *taskSet) Clear() {
	for _, x := range s.items {
		s.unindex(x)
	}
	s.items = nil
	s.idx = nil
}

// grow makes room for n more items (a bulk insert).
func (s *taskSet) grow(n int) {
	if want := len(s.items) + n; cap(s.items) < want {
		items := make([]*TaskState, len(s.items), want)
		copy(items, s.items)
		s.items = items
	}
}

// Snapshot copies the items, for loops that mutate the set.
func (s *taskSet) Snapshot() []*TaskState {
	if len(s.items) == 0 {
		return nil
	}
	return append([]*TaskState(nil), s.items...)
}

// validate checks the position index (Config.ValidateInvariants).
func (s *taskSet) validate(st *State, what string) {
	n := 0
	for i, x := range s.items {
		if s.find(x) != i {
			st.broken(x, "%s: indexed at %d, sits at %d", what, s.find(x), i)
		}
		if s.owns(x) {
			n++
		}
	}
	if len(s.idx)+n != len(s.items) && (s.role != roleNone || s.idx != nil) {
		panic("scheduler invariant broken: " + what + ": index size differs from the set's")
	}
}
