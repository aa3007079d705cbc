package scheduler

// oset2 is oset with room inline for two items, for a task's dependencies
// and waiting_on. A task on two inputs is common (an elementwise operation
// on two arrays, each node of a binary tree reduction), and with one
// inline slot each of those sets spilled into storage of its own: two
// allocations per task, and one more cache line to read whenever a
// dependency finishes (waitingOn.Remove) or the task is placed or sent
// (dependencies.Items). Replaying the 100k-task tree over 1,000 simulated
// workers, two slots took 100,000 of its 284,173 allocations away and its
// CPU per task about 4 % lower (BenchmarkEngineReplay, 10 rounds, paired
// median 0.96).
//
// Iteration order and every result are oset's: items in insertion order,
// a removal moving the last item into the hole, storage kept once spilled.
//
// Invariant: rest == nil and the items are two's prefix up to its first
// zero value (the rest of two is zero); or rest != nil, holds every item,
// and two is zero. An oset2 must never be copied by value once it holds
// items.
type oset2[T comparable] struct {
	two  [2]T
	rest *osetItems[T]
}

// inline is the number of items held inline.
func (s *oset2[T]) inline() int {
	var zero T
	switch {
	case s.two[0] == zero:
		return 0
	case s.two[1] == zero:
		return 1
	}
	return 2
}

func (s *oset2[T]) Len() int {
	if s.rest != nil {
		return len(s.rest.items)
	}
	return s.inline()
}

// Items is the backing slice: read-only, and invalid after a mutation.
func (s *oset2[T]) Items() []T {
	if s.rest != nil {
		return s.rest.items
	}
	if n := s.inline(); n > 0 {
		return s.two[:n]
	}
	return nil
}

func (s *oset2[T]) find(v T) int {
	if r := s.rest; r != nil {
		return r.find(v)
	}
	var zero T
	switch {
	case v == zero:
		return -1
	case v == s.two[0]:
		return 0
	case v == s.two[1]:
		return 1
	}
	return -1
}

func (s *oset2[T]) Has(v T) bool { return s.find(v) >= 0 }

// Add inserts v and reports whether it was new.
func (s *oset2[T]) Add(v T) bool {
	if s.find(v) >= 0 {
		return false
	}
	s.addNew(v)
	return true
}

// addNew appends v, which the caller knows is absent.
func (s *oset2[T]) addNew(v T) {
	if s.rest == nil {
		var zero T
		if n := s.inline(); n < 2 && v != zero {
			s.two[n] = v
			return
		}
		s.rest = spill(s.two[:])
	}
	s.rest.add(v)
}

// Remove deletes v (moving the last item into its place) and reports
// whether it was present.
func (s *oset2[T]) Remove(v T) bool {
	i := s.find(v)
	if i < 0 {
		return false
	}
	if s.rest == nil {
		var zero T
		if i == 0 {
			s.two[0] = s.two[1]
		}
		s.two[1] = zero
		return true
	}
	s.rest.removeAt(i, v)
	return true
}

// Clear empties the set, releasing its memory.
func (s *oset2[T]) Clear() {
	var zero T
	s.two[0], s.two[1] = zero, zero
	s.rest = nil
}

// Snapshot copies the items, for loops that mutate the set.
func (s *oset2[T]) Snapshot() []T {
	items := s.Items()
	if len(items) == 0 {
		return nil
	}
	return append([]T(nil), items...)
}
