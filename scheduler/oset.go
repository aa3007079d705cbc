package scheduler

import "slices"

// oset is an insertion-ordered set with swap-remove. The engine iterates its
// sets to build messages and recommendations, and Go map order is random, so
// plain maps would make the outbox differ between runs; oset keeps every run
// of the same stimuli byte-identical (raft-style determinism). Small sets
// (the common case: dependencies, replicas) are scanned linearly; an index
// map is built only once a set grows past osetLinear, so a 10k-way fan-in
// still removes in O(1).
//
// The first item lives inline (one): most sets hold a single item (who_has,
// who_wants, a lone dependent), and that saves an allocation per set. An
// oset must therefore never be copied by value once it holds items.
type oset[T comparable] struct {
	items []T
	idx   map[T]int32
	one   [1]T
}

const osetLinear = 16

func (s *oset[T]) Len() int { return len(s.items) }

// Items is the backing slice: read-only, and invalid after a mutation.
func (s *oset[T]) Items() []T { return s.items }

func (s *oset[T]) find(v T) int {
	if s.idx != nil {
		if i, ok := s.idx[v]; ok {
			return int(i)
		}
		return -1
	}
	for i, x := range s.items {
		if x == v {
			return i
		}
	}
	return -1
}

func (s *oset[T]) Has(v T) bool { return s.find(v) >= 0 }

// Add inserts v and reports whether it was new.
func (s *oset[T]) Add(v T) bool {
	if s.find(v) >= 0 {
		return false
	}
	s.addNew(v)
	return true
}

// addNew appends v, which the caller knows is absent (a symmetric set
// said so): it skips Add's lookup, a hash probe on big sets.
func (s *oset[T]) addNew(v T) {
	if s.items == nil {
		s.items = s.one[:0:1]
	} else if len(s.items) == 1 && cap(s.items) == 1 {
		// leaving the inline slot: clear it so it pins nothing
		s.items = append(make([]T, 0, 4), s.items[0])
		s.one[0] = *new(T)
	}
	s.items = appendDoubling(s.items, v)
	if s.idx != nil {
		s.idx[v] = int32(len(s.items) - 1)
	} else if len(s.items) > osetLinear {
		s.buildIndex(2 * len(s.items))
	}
}

func (s *oset[T]) buildIndex(size int) {
	s.idx = make(map[T]int32, size)
	for i, x := range s.items {
		s.idx[x] = int32(i)
	}
}

// Remove deletes v (moving the last item into its place) and reports
// whether it was present.
func (s *oset[T]) Remove(v T) bool {
	i := s.find(v)
	if i < 0 {
		return false
	}
	last := len(s.items) - 1
	if i != last {
		s.items[i] = s.items[last]
		if s.idx != nil {
			s.idx[s.items[i]] = int32(i)
		}
	}
	var zero T
	s.items[last] = zero
	s.items = s.items[:last]
	if s.idx != nil {
		delete(s.idx, v)
	}
	return true
}

// Clear empties the set, releasing its memory.
func (s *oset[T]) Clear() {
	s.items = nil
	s.idx = nil
	s.one[0] = *new(T)
}

// reset empties the set but keeps its storage, for a reused scratch set.
func (s *oset[T]) reset() {
	clear(s.items)
	s.items = s.items[:0]
	if s.idx != nil {
		clear(s.idx)
	}
}

// Snapshot copies the items, for loops that mutate the set.
func (s *oset[T]) Snapshot() []T {
	if len(s.items) == 0 {
		return nil
	}
	return append([]T(nil), s.items...)
}

// appendDoubling is append with a capacity that doubles: append grows big
// slices by 1.25x, re-copying every element about five times over while a
// 100k-item set (a client's wants_what, the queue) fills up.
func appendDoubling[T any](s []T, v T) []T {
	if len(s) == cap(s) && len(s) >= 256 {
		s = slices.Grow(s, len(s))
	}
	return append(s, v)
}
